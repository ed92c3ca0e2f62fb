/* wire_priv.h - internal to the wire decoder (wire_decode.c, wire_fields.c, wire_types.c,
 * wire_scan.c): the decoder's storage, the known keys, and the field readers. */
#ifndef BK_WIRE_PRIV_H
#define BK_WIRE_PRIV_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "runner/wire.h"

/* The decoder owns everything a decoded bk_msg points to. Every buffer only
 * grows, to the largest message seen, so steady-state decoding allocates
 * nothing; each is bounded by O(len) of that message. */
struct bk_wire_decoder {
    msgpack_zone *zone;   /* msgpack objects of the last message; cleared per decode */
    size_t zone_chunk;    /* its first chunk's size: grown so one message fits in it */
    uint64_t *ns;         /* the last samples message's ns, copied */
    size_t ns_cap;
    char *bytes;          /* the last message's bin payloads, copied */
    size_t bytes_cap, bytes_used;
    const void *blobs[BK_WIRE_MAX_PEERS];
    size_t blob_lens[BK_WIRE_MAX_PEERS];
};

#define BK__ACCEPT (-1) /* "no reject reason": the field or message is fine */
#define BK__REJ(reason, ...) (BK_FAIL(err, BK_ERR_PEER, __VA_ARGS__), (int)(reason))

/* Readers return BK__ACCEPT or a bk_wire_reject with `err` set through BK__REJ,
 * which needs a `bk_err *err` in scope. */

/* ---- the keys this version knows; others are ignored ---- */

enum { K_SCHEMA, K_TYPE, K_RUN, K_ARM, K_RANK, K_WORLD, K_PID, K_BLOB, K_BLOBS, K_SHAPE,
       K_FIRST, K_NS, K_NAME, K_DTYPE, K_DATA, K_OK, K_CODE, K_MESSAGE, K_SAMPLES,
       K_T_FIRST_NS, K_SETTINGS, K_ROUTED, K_COUNT };

/* One message's known fields, and what to call it in error messages. */
typedef struct bk__wire_fields {
    const msgpack_object *v[K_COUNT];
    const char *what; /* "message" until the type is known, then the type's name */
} bk__wire_fields;

const char *bk__wire_obj_kind(const msgpack_object *o);
int bk__wire_grow(void **p, size_t *cap, size_t n, size_t each);

/* Index the known keys of map `top` into `f` (a known key given twice is rejected). */
int bk__wire_index_map(const msgpack_object *top, bk__wire_fields *f, bk_err *err);

/* Field `k` of type `t` (`kind` names it in the error), or NULL with *rej set. */
const msgpack_object *bk__wire_need(const bk__wire_fields *f, int k, msgpack_object_type t,
                                    const char *kind, int *rej, bk_err *err);
int bk__wire_get_uint(const bk__wire_fields *f, int k, uint64_t max, uint64_t *out,
                      bk_err *err);
int bk__wire_get_u32(const bk__wire_fields *f, int k, uint32_t *out, bk_err *err);
int bk__wire_get_int(const bk__wire_fields *f, int k, int64_t *out, bk_err *err);
/* A string into `dst` of `cap` bytes: too long or holding a NUL is rejected, never cut. */
int bk__wire_get_str(const bk__wire_fields *f, int k, char *dst, size_t cap, bk_err *err);
/* A bin field, copied into the decoder's byte store (reserved for the message). */
int bk__wire_get_bin(bk_wire_decoder *d, const bk__wire_fields *f, int k, const void **p,
                     size_t *len, bk_err *err);
const void *bk__wire_keep_bytes(bk_wire_decoder *d, const msgpack_object_bin *b);

/* The type's own fields of an indexed message whose header already passed. */
int bk__wire_decode_body(bk_wire_decoder *d, const bk__wire_fields *f,
                         const bk_wire_expect *x, bk_msg *m, bk_err *err);

/* ---- the bounds pre-pass (wire_scan.c) ---- */

/* What the pre-pass learnt about one buffer. */
typedef struct bk__wire_scan {
    size_t zone_bytes; /* upper bound of what msgpack-c's unpacker will take from its zone */
    size_t end;        /* on success: the byte just past the object */
    size_t bad_at;     /* on failure: the byte offset where the problem was seen */
    const char *why;   /* on failure: a static phrase ("truncated", "trailing bytes", ...) */
} bk__wire_scan;

/* Walk `len` bytes as exactly one msgpack object, without building anything.
 * Returns 0 when the bytes hold one complete object and nothing after it, -1
 * otherwise (s->why, s->bad_at say what and where).
 *
 * Why this exists: msgpack-c's C unpacker allocates an array's or map's
 * element storage from the count in its header before reading the elements,
 * so a 5-byte message claiming 2^32 elements would ask for ~100 GB. This pass
 * rejects any container that claims more elements than bytes remain (each
 * element takes at least one byte), which bounds the unpacker's allocation by
 * O(len); it also reports truncation and trailing bytes precisely. The real
 * decoding is left to msgpack-c. */
int bk__wire_scan_bytes(const unsigned char *p, size_t len, bk__wire_scan *s);

#endif
