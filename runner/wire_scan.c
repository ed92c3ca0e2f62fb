/* wire_scan.c - the decoder's bounds pre-pass: one msgpack object, complete, with no
 * container claiming more elements than there are bytes (see wire_priv.h). */
#include "runner/wire_priv.h"

/* Big-endian length of 1, 2 or 4 bytes at p (the caller checked they exist). */
static uint32_t be_len(const unsigned char *p, unsigned width)
{
    if (width == 1)
        return p[0];
    if (width == 2)
        return (uint32_t)p[0] << 8 | p[1];
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int fail(bk__wire_scan *s, const char *why, size_t at)
{
    s->why = why;
    s->bad_at = at;
    return -1;
}

/* The shape of one msgpack header byte: how many bytes follow it before any
 * payload (`fixed`), how wide a length or count field is (`width`, 0 = none),
 * whether that field counts payload bytes or elements, and any extra byte. */
typedef struct {
    unsigned fixed;   /* bytes of fixed payload after the header byte */
    unsigned width;   /* bytes of length/count after the header byte */
    unsigned kind;    /* 0 scalar, 1 raw bytes (str/bin/ext), 2 array, 3 map */
    unsigned ext;     /* 1 for ext 8/16/32: a type byte after the length */
} hdr_shape;

static int classify(unsigned char b, hdr_shape *h, uint32_t *inline_n)
{
    *h = (hdr_shape){ 0, 0, 0, 0 };
    *inline_n = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 0;
    if (b >= 0x80 && b <= 0x8f) { *h = (hdr_shape){ 0, 0, 3, 0 }; *inline_n = b & 0x0f; return 0; }
    if (b >= 0x90 && b <= 0x9f) { *h = (hdr_shape){ 0, 0, 2, 0 }; *inline_n = b & 0x0f; return 0; }
    if (b >= 0xa0 && b <= 0xbf) { *h = (hdr_shape){ 0, 0, 1, 0 }; *inline_n = b & 0x1f; return 0; }
    switch (b) {
    case 0xc4: case 0xd9: *h = (hdr_shape){ 0, 1, 1, 0 }; return 0; /* bin8, str8 */
    case 0xc5: case 0xda: *h = (hdr_shape){ 0, 2, 1, 0 }; return 0;
    case 0xc6: case 0xdb: *h = (hdr_shape){ 0, 4, 1, 0 }; return 0;
    case 0xc7: *h = (hdr_shape){ 0, 1, 1, 1 }; return 0; /* ext8 */
    case 0xc8: *h = (hdr_shape){ 0, 2, 1, 1 }; return 0;
    case 0xc9: *h = (hdr_shape){ 0, 4, 1, 1 }; return 0;
    case 0xca: h->fixed = 4; return 0; /* float32 */
    case 0xcb: h->fixed = 8; return 0; /* float64 */
    case 0xcc: case 0xd0: h->fixed = 1; return 0;
    case 0xcd: case 0xd1: h->fixed = 2; return 0;
    case 0xce: case 0xd2: h->fixed = 4; return 0;
    case 0xcf: case 0xd3: h->fixed = 8; return 0;
    case 0xd4: h->fixed = 2; return 0; /* fixext 1: type + 1 */
    case 0xd5: h->fixed = 3; return 0;
    case 0xd6: h->fixed = 5; return 0;
    case 0xd7: h->fixed = 9; return 0;
    case 0xd8: h->fixed = 17; return 0;
    case 0xdc: *h = (hdr_shape){ 0, 2, 2, 0 }; return 0; /* array16 */
    case 0xdd: *h = (hdr_shape){ 0, 4, 2, 0 }; return 0;
    case 0xde: *h = (hdr_shape){ 0, 2, 3, 0 }; return 0; /* map16 */
    case 0xdf: *h = (hdr_shape){ 0, 4, 3, 0 }; return 0;
    default: return -1; /* 0xc1: never used */
    }
}

/* One object at the start of p[0..len): 0 with s->end just past it, or -1. */
static int scan_first(const unsigned char *p, size_t len, bk__wire_scan *s)
{
    /* `pending` objects are still to be read; each needs at least one byte, so
     * pending > len - pos means the buffer cannot hold what the headers claim. */
    uint64_t pending = 1;
    size_t pos = 0;
    s->zone_bytes = 0;
    s->end = 0;
    s->why = NULL;
    s->bad_at = 0;
    while (pending > 0) {
        if (pos >= len)
            return fail(s, "truncated", pos);
        size_t at = pos;
        unsigned char b = p[pos];
        /* Fast paths for the bulk of a samples message: integers. */
        if (b <= 0x7f || b >= 0xe0) {
            pos++;
            pending--;
            continue;
        }
        if (b >= 0xcc && b <= 0xd3) { /* uint8..uint64, int8..int64 */
            size_t w = (size_t)1 << (b & 3);
            if (len - pos - 1 < w)
                return fail(s, "truncated", at);
            pos += 1 + w;
            pending--;
            continue;
        }
        hdr_shape h;
        uint32_t n;
        if (classify(p[pos], &h, &n) != 0)
            return fail(s, "reserved byte 0xc1", at);
        pos++;
        pending--;
        if (len - pos < (size_t)h.width + h.ext + h.fixed)
            return fail(s, "truncated", at);
        if (h.width)
            n = be_len(p + pos, h.width);
        pos += h.width + h.ext + h.fixed;
        if (h.kind == 1) {
            if (len - pos < n)
                return fail(s, "truncated", at);
            pos += n;
        } else if (h.kind >= 2) {
            uint64_t elems = h.kind == 3 ? 2 * (uint64_t)n : n;
            pending += elems;
            if (pending > len - pos)
                return fail(s, elems > len - pos ? "container claims more elements than bytes"
                                                 : "truncated",
                            at);
            size_t each = h.kind == 3 ? sizeof(msgpack_object_kv) : sizeof(msgpack_object);
            s->zone_bytes += (size_t)n * each + 2 * sizeof(void *); /* + alignment */
        }
    }
    s->end = pos;
    return 0;
}

int bk__wire_scan_bytes(const unsigned char *p, size_t len, bk__wire_scan *s)
{
    if (scan_first(p, len, s) != 0)
        return -1;
    if (s->end != len)
        return fail(s, "trailing bytes after the message", s->end);
    return 0;
}

int bk_wire_scan_next(const void *buf, size_t len, size_t *used, const char **why,
                      size_t *bad_at)
{
    bk__wire_scan s;
    int rc = scan_first(buf, len, &s);
    *used = s.end;
    *why = s.why;
    *bad_at = s.bad_at;
    return rc;
}
