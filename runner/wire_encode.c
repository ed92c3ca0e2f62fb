/* wire_encode.c - bracket.wire/1 encoders: one msgpack map per message, packed by
 * msgpack-c into a growable bk_wire_buf. */
#include "runner/wire.h"

#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the growable buffer ---- */

void bk_wire_buf_free(bk_wire_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->size = 0;
    b->alloc = 0;
}

/* Make room for `extra` more bytes; 0 on success, -1 when out of memory or
 * the size would overflow. Grows geometrically so packing stays amortised O(1). */
__attribute__((noinline)) static int buf_reserve(bk_wire_buf *b, size_t extra)
{
    if (extra <= b->alloc - b->size)
        return 0;
    if (extra > SIZE_MAX / 2 - b->size)
        return -1;
    size_t want = b->size + extra;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < want)
        n *= 2;
    char *p = realloc(b->data, n);
    if (!p)
        return -1;
    b->data = p;
    b->alloc = n;
    return 0;
}

/* msgpack_packer_write callback: append `len` bytes to the bk_wire_buf. */
static int buf_write(void *data, const char *src, size_t len)
{
    bk_wire_buf *b = data;
    if (__builtin_expect(len > b->alloc - b->size, 0) && buf_reserve(b, len) != 0)
        return -1;
    char *dst = b->data + b->size;
    b->size += len;
    /* msgpack-c writes every scalar separately: copy the short ones with
     * fixed-size (inlined) copies instead of a library call each. */
    switch (len) {
    case 1: dst[0] = src[0]; return 0;
    case 2: memcpy(dst, src, 2); return 0;
    case 3: memcpy(dst, src, 3); return 0;
    case 5: memcpy(dst, src, 5); return 0;
    case 9: memcpy(dst, src, 9); return 0;
    default: memcpy(dst, src, len); return 0;
    }
}

/* ---- packing helpers: each returns msgpack-c's 0 / -1 ---- */

static int pack_key(msgpack_packer *pk, const char *key)
{
    return msgpack_pack_str_with_body(pk, key, strlen(key));
}

static int pack_kstr(msgpack_packer *pk, const char *key, const char *val)
{
    if (pack_key(pk, key) != 0)
        return -1;
    return msgpack_pack_str_with_body(pk, val, strlen(val));
}

static int pack_kuint(msgpack_packer *pk, const char *key, uint64_t val)
{
    if (pack_key(pk, key) != 0)
        return -1;
    return msgpack_pack_uint64(pk, val);
}

static int pack_kint(msgpack_packer *pk, const char *key, int64_t val)
{
    if (pack_key(pk, key) != 0)
        return -1;
    return msgpack_pack_int64(pk, val);
}

static int pack_kbin(msgpack_packer *pk, const char *key, const void *val, size_t len)
{
    if (pack_key(pk, key) != 0)
        return -1;
    return msgpack_pack_bin_with_body(pk, val, len);
}

/* Check a header and a string field's length against what the decoder accepts
 * (the decoder never truncates, so an encoder must not produce what it rejects). */
static bk_status check_str(const char *what, const char *s, size_t cap, bk_err *err)
{
    if (!s)
        return BK_FAIL(err, BK_ERR_INPUT, "wire: %s is NULL", what);
    size_t n = strlen(s);
    if (n >= cap)
        return BK_FAIL(err, BK_ERR_INPUT, "wire: %s is %zu bytes, the limit is %zu", what,
                       n, cap - 1);
    return BK_OK;
}

/* Reset `b`, set up a packer over it and pack the map header and the five
 * fields every message carries. `nfields` counts the type's own fields. */
static bk_status begin(bk_wire_buf *b, msgpack_packer *pk, const bk_wire_hdr *h,
                       const char *type, size_t nfields, size_t reserve, bk_err *err)
{
    bk_status st = BK_OK;
    if (!b || !h)
        return BK_FAIL(err, BK_ERR_INTERNAL, "wire: NULL buffer or header");
    BK_TRY(check_str("run", h->run, BK_RUN_ID_LEN, err));
    BK_TRY(check_str("arm", h->arm, BK_ARM_LEN, err));
    b->size = 0;
    if (buf_reserve(b, reserve + 160) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "wire: out of memory for a %zu-byte %s message",
                       reserve, type);
    msgpack_packer_init(pk, b, buf_write);
    if (msgpack_pack_map(pk, 5 + nfields) != 0 || pack_kstr(pk, "schema", BK_WIRE_SCHEMA) ||
        pack_kstr(pk, "type", type) || pack_kstr(pk, "run", h->run) ||
        pack_kstr(pk, "arm", h->arm) || pack_kuint(pk, "rank", h->rank))
        st = BK_FAIL(err, BK_ERR_SYSTEM, "wire: out of memory packing a %s message", type);
out:
    return st;
}

static bk_status packed(int rc, const char *type, bk_err *err)
{
    if (rc != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "wire: out of memory packing a %s message", type);
    return BK_OK;
}

/* ---- the encoders (contracts in wire.h) ---- */

bk_status bk_wire_hello(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t world, int64_t pid,
                        const void *blob, size_t blob_len, bk_err *err)
{
    bk_status st = BK_OK;
    msgpack_packer pk;
    if (blob_len > UINT32_MAX || (blob_len && !blob))
        return BK_FAIL(err, BK_ERR_INPUT, "wire: hello blob of %zu bytes is invalid", blob_len);
    BK_TRY(begin(b, &pk, h, "hello", 3, blob_len, err));
    st = packed(pack_kuint(&pk, "world", world) || pack_kint(&pk, "pid", pid) ||
                    pack_kbin(&pk, "blob", blob, blob_len),
                "hello", err);
out:
    return st;
}

bk_status bk_wire_peers(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t world,
                        const void *const *blobs, const size_t *lens, bk_err *err)
{
    bk_status st = BK_OK;
    msgpack_packer pk;
    size_t total = 0;
    if (world > BK_WIRE_MAX_PEERS)
        return BK_FAIL(err, BK_ERR_INPUT, "wire: peers for world %u, the limit is %d", world,
                       BK_WIRE_MAX_PEERS);
    if (world && (!blobs || !lens))
        return BK_FAIL(err, BK_ERR_INTERNAL, "wire: peers without blobs");
    for (uint32_t i = 0; i < world; i++) {
        if (lens[i] > UINT32_MAX || (lens[i] && !blobs[i]))
            return BK_FAIL(err, BK_ERR_INPUT, "wire: peers blob %u of %zu bytes is invalid",
                           i, lens[i]);
        total += lens[i] + 5;
    }
    BK_TRY(begin(b, &pk, h, "peers", 2, total, err));
    int rc = pack_kuint(&pk, "world", world) || pack_key(&pk, "blobs") ||
             msgpack_pack_array(&pk, world);
    for (uint32_t i = 0; i < world && rc == 0; i++)
        rc = msgpack_pack_bin_with_body(&pk, blobs[i], lens[i]);
    st = packed(rc, "peers", err);
out:
    return st;
}

bk_status bk_wire_samples(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t shape,
                          uint64_t first, const uint64_t *ns, size_t n, bk_err *err)
{
    bk_status st = BK_OK;
    msgpack_packer pk;
    if (n > UINT32_MAX || (n && !ns))
        return BK_FAIL(err, BK_ERR_INPUT, "wire: samples batch of %zu is invalid", n);
    if (n && first > UINT64_MAX - (n - 1))
        return BK_FAIL(err, BK_ERR_INPUT, "wire: samples from iteration %llu overflow",
                       (unsigned long long)first);
    /* Reserve the worst case (9 bytes a sample) so the per-sample write is a copy. */
    BK_TRY(begin(b, &pk, h, "samples", 3, 9 * n, err));
    int rc = pack_kuint(&pk, "shape", shape) || pack_kuint(&pk, "first", first) ||
             pack_key(&pk, "ns") || msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = msgpack_pack_uint64(&pk, ns[i]);
    st = packed(rc, "samples", err);
out:
    return st;
}

bk_status bk_wire_tensor(bk_wire_buf *b, const bk_wire_hdr *h, uint32_t shape,
                         const char *name, const char *dtype, const void *data, size_t len,
                         bk_err *err)
{
    bk_status st = BK_OK;
    msgpack_packer pk;
    BK_TRY(check_str("tensor name", name, sizeof ((bk_msg *)0)->name, err));
    BK_TRY(check_str("tensor dtype", dtype, sizeof ((bk_msg *)0)->dtype, err));
    if (len && !data)
        return BK_FAIL(err, BK_ERR_INPUT, "wire: tensor '%s' of %zu bytes is invalid", name,
                       len);
    if (len > BK_WIRE_TENSOR_MAX)
        return BK_FAIL(err, BK_ERR_INPUT, "wire: tensor '%s' of %zu bytes is more than one "
                       "message carries (%llu bytes: the coordinator takes messages of up to "
                       "1 GiB)", name, len, (unsigned long long)BK_WIRE_TENSOR_MAX);
    BK_TRY(begin(b, &pk, h, "tensor", 4, len, err));
    st = packed(pack_kuint(&pk, "shape", shape) || pack_kstr(&pk, "name", name) ||
                    pack_kstr(&pk, "dtype", dtype) || pack_kbin(&pk, "data", data, len),
                "tensor", err);
out:
    return st;
}

/* The status message is free text (often an error relayed from deep inside an
 * engine): one longer than the decoder's buffer is cut, on a UTF-8 character
 * boundary, rather than losing the whole status. */
bk_status bk_wire_status(bk_wire_buf *b, const bk_wire_hdr *h, int ok, int64_t code,
                         const char *message, uint64_t samples, uint64_t t_first_ns,
                         const char *settings, uint64_t routed, bk_err *err)
{
    bk_status st = BK_OK;
    msgpack_packer pk;
    const char *m = message ? message : "";
    size_t mlen = strlen(m);
    size_t cap = sizeof ((bk_msg *)0)->message - 1;
    if (mlen > cap) {
        mlen = cap;
        while (mlen > 0 && ((unsigned char)m[mlen] & 0xC0) == 0x80)
            mlen--;
    }
    BK_TRY(check_str("engine settings", settings, sizeof ((bk_msg *)0)->settings, err));
    BK_TRY(begin(b, &pk, h, "status", 7, mlen + strlen(settings), err));
    int rc = pack_key(&pk, "ok") || (ok ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk)) ||
             pack_kint(&pk, "code", code) || pack_key(&pk, "message") ||
             msgpack_pack_str_with_body(&pk, m, mlen) || pack_kuint(&pk, "samples", samples) ||
             pack_kuint(&pk, "t_first_ns", t_first_ns) || pack_kstr(&pk, "settings", settings) ||
             pack_kuint(&pk, "routed", routed);
    st = packed(rc, "status", err);
out:
    return st;
}
