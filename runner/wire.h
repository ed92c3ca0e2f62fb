/* wire.h - the bracket.wire/1 messages (msgpack maps over ZeroMQ) between engines and the
 * coordinator: encoders, and a decoder that rejects and counts what it cannot trust. */
#ifndef BK_WIRE_H
#define BK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "runner/status.h"

#define BK_WIRE_SCHEMA "bracket.wire/1"
#define BK_RUN_ID_LEN 96
#define BK_ARM_LEN 8
#define BK_WIRE_MAX_PEERS 1024
/* The largest message the coordinator takes (ZMQ_MAXMSGSIZE: ZeroMQ drops a longer one, and
 * the connection, saying nothing), and so the most tensor data one tensor message carries:
 * an audit sends each rank's output tensor of a shape whole (bk_wire_tensor refuses more;
 * a plan that would need more is refused before any engine starts, bk_audit_msg_too_big). */
#define BK_WIRE_MSG_MAX (1ull << 30)
#define BK_WIRE_TENSOR_MAX (BK_WIRE_MSG_MAX - 4096)

/* Every message is a msgpack map with at least:
 *   "schema": "bracket.wire/1", "type": str, "run": str, "arm": str, "rank": uint
 * and, by type:
 *   hello   : "world": uint, "pid": int, "blob": bin      engine -> rendezvous
 *   peers   : "world": uint, "blobs": [bin, ...] (world)   rendezvous -> engine
 *   samples : "shape": uint, "first": uint, "ns": [uint, ...]  per-iteration times,
 *             iterations first .. first+len-1 of that shape
 *   tensor  : "shape": uint, "name": str, "dtype": str, "data": bin
 *   status  : "ok": bool, "code": int, "message": str, "samples": uint (count sent),
 *             "t_first_ns": uint (engine start -> first timed iteration, 0 if none),
 *             "settings": str (the engine backend's timing settings in effect, "name=value"
 *             words; empty when the backend has none),
 *             "routed": uint (bit i: shape i was served by the incumbent in place of the
 *             arm's variant, outside its domain; a plan holds 64 shapes at most)
 */
typedef enum bk_msg_type {
    BK_MSG_HELLO = 1,
    BK_MSG_PEERS,
    BK_MSG_SAMPLES,
    BK_MSG_TENSOR,
    BK_MSG_STATUS
} bk_msg_type;

/* Why a message was rejected; each reason has a counter. */
typedef enum bk_wire_reject {
    BK_REJ_MALFORMED = 0, /* not msgpack, truncated, trailing bytes, not a map */
    BK_REJ_FOREIGN,       /* no or another "schema" */
    BK_REJ_WRONG_RUN,     /* "run" is not this run */
    BK_REJ_WRONG_ARM,     /* "arm" is not the arm running now */
    BK_REJ_BAD_RANK,      /* rank >= world */
    BK_REJ_BAD_FIELD,     /* a field missing, of the wrong type or out of range */
    BK_REJ_UNKNOWN_TYPE,
    BK_REJ_COUNT
} bk_wire_reject;

typedef struct bk_wire_stats {
    uint64_t accepted;
    uint64_t rejected[BK_REJ_COUNT];
    /* samples that came again for an iteration already received, with the same time (an
     * engine over tcp sends its samples again after a connection broke, or when one was
     * not ready for a send of its work), taken once */
    uint64_t repeated;
    /* an audit's output tensors that came again, the same (sent again likewise), taken once */
    uint64_t repeated_tensors;
    /* hellos that came again from the same engine with the same blob (it says hello again
     * after its connection to the rendezvous broke), answered on its new connection */
    uint64_t repeated_hellos;
} bk_wire_stats;

const char *bk_wire_reject_name(bk_wire_reject r);

/* A decoded message. Pointers (blob, blobs, ns, data, message) point into
 * the decoder's storage and stay valid until its next decode. */
typedef struct bk_msg {
    bk_msg_type type;
    char run[BK_RUN_ID_LEN];
    char arm[BK_ARM_LEN];
    uint32_t rank;
    /* hello / peers */
    uint32_t world;
    int64_t pid;
    const void *blob;
    size_t blob_len;
    uint32_t nblobs;
    const void **blobs;
    size_t *blob_lens;
    /* samples / tensor */
    uint32_t shape;
    uint64_t first;
    const uint64_t *ns;
    size_t n;
    char name[32];
    char dtype[16];
    const void *data;
    size_t data_len;
    /* status */
    int ok;
    int64_t code;
    char message[512];
    uint64_t samples;
    uint64_t t_first_ns;
    char settings[512];
    uint64_t routed;
} bk_msg;

/* What the receiver expects; empty strings / 0 skip a check. */
typedef struct bk_wire_expect {
    const char *run;
    const char *arm;
    uint32_t world;  /* rank must be < world when > 0 */
    uint32_t max_shapes; /* shape must be < max_shapes when > 0 */
} bk_wire_expect;

typedef struct bk_wire_decoder bk_wire_decoder; /* opaque */

bk_status bk_wire_decoder_new(bk_wire_decoder **out, bk_err *err);
void bk_wire_decoder_free(bk_wire_decoder *d);

/* Decode one ZeroMQ message. BK_OK: *msg filled, stats->accepted++.
 * BK_ERR_PEER: rejected, stats->rejected[reason]++, *reason set, err says why.
 * Never crashes on any input, never allocates without bound (at most `len`
 * worth of samples). */
bk_status bk_wire_decode(bk_wire_decoder *d, const void *buf, size_t len,
                         const bk_wire_expect *expect, bk_msg *msg, bk_wire_stats *stats,
                         bk_wire_reject *reason, bk_err *err);

/* The decoder's bounds pre-pass (see wire_priv.h) over the msgpack object at the start of
 * buf[0..len), for readers of files of several objects (samples.msgpack): 0 with *used its
 * length in bytes, so that msgpack-c may unpack buf[0..*used) with its allocations bounded
 * by O(*used); -1 when it is cut short, claims more elements or bytes than remain, or holds
 * the reserved byte 0xc1 (*why a static phrase, *bad_at the byte offset). */
int bk_wire_scan_next(const void *buf, size_t len, size_t *used, const char **why,
                      size_t *bad_at);

/* Encoders: write one message into a growable buffer (reset first). */
typedef struct bk_wire_buf {
    char *data;
    size_t size;
    size_t alloc;
} bk_wire_buf;

void bk_wire_buf_free(bk_wire_buf *b);

typedef struct bk_wire_hdr {
    const char *run;
    const char *arm;
    uint32_t rank;
} bk_wire_hdr;

bk_status bk_wire_hello(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t world, int64_t pid,
                        const void *blob, size_t blob_len, bk_err *err);
bk_status bk_wire_peers(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t world,
                        const void *const *blobs, const size_t *lens, bk_err *err);
bk_status bk_wire_samples(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t shape,
                          uint64_t first, const uint64_t *ns, size_t n, bk_err *err);
bk_status bk_wire_tensor(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t shape,
                         const char *name, const char *dtype, const void *data, size_t len,
                         bk_err *err);
bk_status bk_wire_status(bk_wire_buf *b, const bk_wire_hdr *h, int ok, int64_t code,
                         const char *message, uint64_t samples, uint64_t t_first_ns,
                         const char *settings, uint64_t routed, bk_err *err);

#endif
