/* wire_decode.c - the bracket.wire/1 decoder: bounds pre-pass, msgpack-c unpack into a
 * reused zone, then a check of every field; rejects are counted by reason. */
#include "runner/wire.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runner/wire_scan.h"

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
#define REJ(reason, ...) (BK_FAIL(err, BK_ERR_PEER, __VA_ARGS__), (int)(reason))

const char *bk_wire_reject_name(bk_wire_reject r)
{
    switch (r) {
    case BK_REJ_MALFORMED: return "malformed";
    case BK_REJ_FOREIGN: return "foreign";
    case BK_REJ_WRONG_RUN: return "wrong_run";
    case BK_REJ_WRONG_ARM: return "wrong_arm";
    case BK_REJ_BAD_RANK: return "bad_rank";
    case BK_REJ_BAD_FIELD: return "bad_field";
    case BK_REJ_UNKNOWN_TYPE: return "unknown_type";
    case BK_REJ_COUNT: break;
    }
    return "unknown";
}

/* ---- decoder lifecycle ---- */

bk_status bk_wire_decoder_new(bk_wire_decoder **out, bk_err *err)
{
    bk_wire_decoder *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return BK_FAIL(err, BK_ERR_SYSTEM, "wire: out of memory for a decoder");
    d->zone_chunk = 64 * 1024;
    d->zone = msgpack_zone_new(d->zone_chunk);
    if (!d->zone) {
        free(d);
        return BK_FAIL(err, BK_ERR_SYSTEM, "wire: out of memory for a msgpack zone");
    }
    *out = d;
    return BK_OK;
}

void bk_wire_decoder_free(bk_wire_decoder *d)
{
    if (!d)
        return;
    msgpack_zone_free(d->zone);
    free(d->ns);
    free(d->bytes);
    free(d);
}

/* Grow `*p` (elements of `each` bytes) to hold `n`; never shrinks. */
static int grow(void **p, size_t *cap, size_t n, size_t each)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < n)
        c *= 2;
    void *q = realloc(*p, c * each);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- the keys this version knows; others are ignored ---- */

enum { K_SCHEMA, K_TYPE, K_RUN, K_ARM, K_RANK, K_WORLD, K_PID, K_BLOB, K_BLOBS, K_SHAPE,
       K_FIRST, K_NS, K_NAME, K_DTYPE, K_DATA, K_OK, K_CODE, K_MESSAGE, K_SAMPLES,
       K_T_FIRST_NS, K_COUNT };

static const struct { const char *name; uint32_t len; } keys[K_COUNT] = {
#define KEY(s) { s, sizeof s - 1 }
    KEY("schema"), KEY("type"), KEY("run"), KEY("arm"), KEY("rank"), KEY("world"),
    KEY("pid"), KEY("blob"), KEY("blobs"), KEY("shape"), KEY("first"), KEY("ns"),
    KEY("name"), KEY("dtype"), KEY("data"), KEY("ok"), KEY("code"), KEY("message"),
    KEY("samples"), KEY("t_first_ns"),
#undef KEY
};

/* One message's known fields, and what to call it in error messages. */
typedef struct fields {
    const msgpack_object *v[K_COUNT];
    const char *what; /* "message" until the type is known, then the type's name */
} fields;

static const char *obj_kind(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "an unsigned integer";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "a negative integer";
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a string";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown";
}

/* Index the map's known keys. A known key given twice is rejected: which of
 * the two a reader believed would otherwise be up to the reader. */
static int index_map(const msgpack_object *top, fields *f, bk_err *err)
{
    memset(f->v, 0, sizeof f->v);
    f->what = "message";
    for (uint32_t i = 0; i < top->via.map.size; i++) {
        const msgpack_object_kv *kv = &top->via.map.ptr[i];
        if (kv->key.type != MSGPACK_OBJECT_STR)
            continue;
        const msgpack_object_str *k = &kv->key.via.str;
        for (int j = 0; j < K_COUNT; j++) {
            if (k->size != keys[j].len || memcmp(k->ptr, keys[j].name, k->size) != 0)
                continue;
            if (f->v[j])
                return REJ(BK_REJ_BAD_FIELD, "message: key '%s' appears twice", keys[j].name);
            f->v[j] = &kv->val;
            break;
        }
    }
    return BK__ACCEPT;
}

/* ---- typed field readers: BK__ACCEPT or a reject reason with err set ---- */

static const msgpack_object *need(const fields *f, int k, msgpack_object_type t,
                                  const char *kind, int *rej, bk_err *err)
{
    const msgpack_object *o = f->v[k];
    if (!o)
        *rej = REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is missing", f->what, keys[k].name);
    else if (o->type != t)
        *rej = REJ(BK_REJ_BAD_FIELD, "%s: field '%s' must be %s, not %s", f->what,
                   keys[k].name, kind, obj_kind(o));
    else
        return o;
    return NULL;
}

static int get_uint(const fields *f, int k, uint64_t max, uint64_t *out, bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o =
        need(f, k, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer", &rej, err);
    if (!o)
        return rej;
    if (o->via.u64 > max)
        return REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is %llu, above its limit %llu", f->what,
                   keys[k].name, (unsigned long long)o->via.u64, (unsigned long long)max);
    *out = o->via.u64;
    return BK__ACCEPT;
}

static int get_u32(const fields *f, int k, uint32_t *out, bk_err *err)
{
    uint64_t v = 0;
    int rej = get_uint(f, k, UINT32_MAX, &v, err);
    *out = (uint32_t)v;
    return rej;
}

static int get_int(const fields *f, int k, int64_t *out, bk_err *err)
{
    const msgpack_object *o = f->v[k];
    if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return BK__ACCEPT;
    }
    uint64_t v = 0;
    if (o && o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return REJ(BK_REJ_BAD_FIELD, "%s: field '%s' must be an integer, not %s", f->what,
                   keys[k].name, obj_kind(o));
    int rej = get_uint(f, k, INT64_MAX, &v, err);
    *out = (int64_t)v;
    return rej;
}

/* Copy a string field into `dst` (capacity `cap`, NUL-terminated). Too long
 * or holding a NUL byte is rejected, never cut. */
static int get_str(const fields *f, int k, char *dst, size_t cap, bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o = need(f, k, MSGPACK_OBJECT_STR, "a string", &rej, err);
    if (!o)
        return rej;
    const msgpack_object_str *s = &o->via.str;
    if (s->size >= cap)
        return REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is %u bytes, longer than the %zu allowed",
                   f->what, keys[k].name, s->size, cap - 1);
    if (s->size && memchr(s->ptr, '\0', s->size))
        return REJ(BK_REJ_BAD_FIELD, "%s: field '%s' holds a NUL byte", f->what, keys[k].name);
    memcpy(dst, s->ptr, s->size);
    dst[s->size] = '\0';
    return BK__ACCEPT;
}

/* Copy a bin payload into the decoder's byte store (reserved for the whole
 * message before the type's fields are read, so this cannot fail). */
static const void *keep_bytes(bk_wire_decoder *d, const msgpack_object_bin *b)
{
    char *p = d->bytes + d->bytes_used;
    if (b->size)
        memcpy(p, b->ptr, b->size);
    d->bytes_used += b->size;
    return p;
}

static int get_bin(bk_wire_decoder *d, const fields *f, int k, const void **p, size_t *len,
                   bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o = need(f, k, MSGPACK_OBJECT_BIN, "bin", &rej, err);
    if (!o)
        return rej;
    *p = keep_bytes(d, &o->via.bin);
    *len = o->via.bin.size;
    return BK__ACCEPT;
}

/* ---- per type ---- */

static int world_matches(const fields *f, const bk_msg *m, const bk_wire_expect *x, bk_err *err)
{
    if (m->world == 0 || m->world > BK_WIRE_MAX_PEERS)
        return REJ(BK_REJ_BAD_FIELD, "%s: field 'world' is %u, outside 1..%d", f->what,
                   m->world, BK_WIRE_MAX_PEERS);
    if (x->world && m->world != x->world)
        return REJ(BK_REJ_BAD_FIELD, "%s: field 'world' is %u, this run's world is %u", f->what,
                   m->world, x->world);
    if (m->rank >= m->world)
        return REJ(BK_REJ_BAD_RANK, "%s: rank %u is not below its world %u", f->what, m->rank,
                   m->world);
    return BK__ACCEPT;
}

static int decode_hello(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                        bk_msg *m, bk_err *err)
{
    int r;
    if ((r = get_u32(f, K_WORLD, &m->world, err)) != BK__ACCEPT ||
        (r = get_int(f, K_PID, &m->pid, err)) != BK__ACCEPT ||
        (r = get_bin(d, f, K_BLOB, &m->blob, &m->blob_len, err)) != BK__ACCEPT)
        return r;
    return world_matches(f, m, x, err);
}

static int decode_peers(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                        bk_msg *m, bk_err *err)
{
    int r = BK__ACCEPT;
    if ((r = get_u32(f, K_WORLD, &m->world, err)) != BK__ACCEPT ||
        (r = world_matches(f, m, x, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *a = need(f, K_BLOBS, MSGPACK_OBJECT_ARRAY, "an array of bin", &r, err);
    if (!a)
        return r;
    if (a->via.array.size != m->world)
        return REJ(BK_REJ_BAD_FIELD, "peers: field 'blobs' holds %u blobs for a world of %u",
                   a->via.array.size, m->world);
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        if (o->type != MSGPACK_OBJECT_BIN)
            return REJ(BK_REJ_BAD_FIELD, "peers: field 'blobs' element %u is %s, not bin", i,
                       obj_kind(o));
        d->blobs[i] = keep_bytes(d, &o->via.bin);
        d->blob_lens[i] = o->via.bin.size;
    }
    m->nblobs = m->world;
    m->blobs = d->blobs;
    m->blob_lens = d->blob_lens;
    return BK__ACCEPT;
}

static int get_shape(const fields *f, const bk_wire_expect *x, bk_msg *m, bk_err *err)
{
    int r = get_u32(f, K_SHAPE, &m->shape, err);
    if (r == BK__ACCEPT && x->max_shapes && m->shape >= x->max_shapes)
        r = REJ(BK_REJ_BAD_FIELD, "%s: field 'shape' is %u, the plan has %u shapes", f->what,
                m->shape, x->max_shapes);
    return r;
}

/* The hot path: `ns` is copied into the decoder's array, element by element,
 * checking each is a non-negative integer. */
static int decode_samples(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                          bk_msg *m, bk_err *err)
{
    int r = BK__ACCEPT;
    if ((r = get_shape(f, x, m, err)) != BK__ACCEPT ||
        (r = get_uint(f, K_FIRST, UINT64_MAX, &m->first, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *a =
        need(f, K_NS, MSGPACK_OBJECT_ARRAY, "an array of unsigned integers", &r, err);
    if (!a)
        return r;
    size_t n = a->via.array.size;
    if (n && m->first > UINT64_MAX - (n - 1))
        return REJ(BK_REJ_BAD_FIELD, "samples: iterations %llu + %zu overflow",
                   (unsigned long long)m->first, n);
    if (grow((void **)&d->ns, &d->ns_cap, n, sizeof *d->ns) != 0)
        return REJ(BK_REJ_MALFORMED, "samples: out of memory for %zu samples", n);
    const msgpack_object *e = a->via.array.ptr;
    uint64_t *out = d->ns;
    for (size_t i = 0; i < n; i++) {
        if (e[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return REJ(BK_REJ_BAD_FIELD,
                       "samples: field 'ns' must be an array of unsigned integers "
                       "(element %zu is %s)", i, obj_kind(&e[i]));
        out[i] = e[i].via.u64;
    }
    m->ns = d->ns;
    m->n = n;
    return BK__ACCEPT;
}

static int decode_tensor(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                         bk_msg *m, bk_err *err)
{
    int r;
    if ((r = get_shape(f, x, m, err)) != BK__ACCEPT ||
        (r = get_str(f, K_NAME, m->name, sizeof m->name, err)) != BK__ACCEPT ||
        (r = get_str(f, K_DTYPE, m->dtype, sizeof m->dtype, err)) != BK__ACCEPT)
        return r;
    return get_bin(d, f, K_DATA, &m->data, &m->data_len, err);
}

static int decode_status(const fields *f, bk_msg *m, bk_err *err)
{
    int r = BK__ACCEPT;
    const msgpack_object *ok = need(f, K_OK, MSGPACK_OBJECT_BOOLEAN, "a bool", &r, err);
    if (!ok)
        return r;
    m->ok = ok->via.boolean ? 1 : 0;
    if ((r = get_int(f, K_CODE, &m->code, err)) != BK__ACCEPT ||
        (r = get_str(f, K_MESSAGE, m->message, sizeof m->message, err)) != BK__ACCEPT ||
        (r = get_uint(f, K_SAMPLES, UINT64_MAX, &m->samples, err)) != BK__ACCEPT)
        return r;
    return get_uint(f, K_T_FIRST_NS, UINT64_MAX, &m->t_first_ns, err);
}

/* ---- one message ---- */

static const struct { const char *name; bk_msg_type type; } types[] = {
    { "samples", BK_MSG_SAMPLES }, { "hello", BK_MSG_HELLO }, { "peers", BK_MSG_PEERS },
    { "tensor", BK_MSG_TENSOR }, { "status", BK_MSG_STATUS },
};

/* Unpack into the reused zone, sized from the pre-pass so that a message
 * normally fits its first chunk and decoding allocates nothing. */
static int unpack(bk_wire_decoder *d, const char *buf, size_t len, msgpack_object *top,
                  bk_err *err)
{
    bk__wire_scan s;
    if (bk__wire_scan_bytes((const unsigned char *)buf, len, &s) != 0)
        return REJ(BK_REJ_MALFORMED, "message: not one msgpack object: %s at byte %zu of %zu",
                   s.why, s.bad_at, len);
    if (s.zone_bytes > d->zone_chunk) {
        size_t c = d->zone_chunk;
        while (c < s.zone_bytes)
            c *= 2;
        msgpack_zone *z = msgpack_zone_new(c);
        if (!z)
            return REJ(BK_REJ_MALFORMED, "message: out of memory for %zu bytes", c);
        msgpack_zone_free(d->zone);
        d->zone = z;
        d->zone_chunk = c;
    } else {
        msgpack_zone_clear(d->zone);
    }
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack(buf, len, &off, d->zone, top);
    if (rc != MSGPACK_UNPACK_SUCCESS)
        return REJ(BK_REJ_MALFORMED, "message: msgpack-c cannot unpack it (code %d%s)", (int)rc,
                   rc == MSGPACK_UNPACK_NOMEM_ERROR ? ", nested too deep or out of memory" : "");
    if (top->type != MSGPACK_OBJECT_MAP)
        return REJ(BK_REJ_MALFORMED, "message: top level is %s, not a map", obj_kind(top));
    /* bin payloads are copied out; they total at most len bytes. */
    if (grow((void **)&d->bytes, &d->bytes_cap, len, 1) != 0)
        return REJ(BK_REJ_MALFORMED, "message: out of memory for %zu bytes", len);
    d->bytes_used = 0;
    return BK__ACCEPT;
}

static int decode_one(bk_wire_decoder *d, const char *buf, size_t len,
                      const bk_wire_expect *x, bk_msg *m, bk_err *err)
{
    msgpack_object top;
    fields f;
    int r;
    if ((r = unpack(d, buf, len, &top, err)) != BK__ACCEPT ||
        (r = index_map(&top, &f, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *sc = f.v[K_SCHEMA];
    if (!sc)
        return REJ(BK_REJ_FOREIGN, "message: no 'schema' (expected \"%s\")", BK_WIRE_SCHEMA);
    if (sc->type != MSGPACK_OBJECT_STR || sc->via.str.size != sizeof BK_WIRE_SCHEMA - 1 ||
        memcmp(sc->via.str.ptr, BK_WIRE_SCHEMA, sc->via.str.size) != 0)
        return REJ(BK_REJ_FOREIGN, "message: 'schema' is not \"%s\"", BK_WIRE_SCHEMA);
    const msgpack_object *ty = need(&f, K_TYPE, MSGPACK_OBJECT_STR, "a string", &r, err);
    if (!ty)
        return r;
    if ((r = get_str(&f, K_RUN, m->run, sizeof m->run, err)) != BK__ACCEPT ||
        (r = get_str(&f, K_ARM, m->arm, sizeof m->arm, err)) != BK__ACCEPT ||
        (r = get_u32(&f, K_RANK, &m->rank, err)) != BK__ACCEPT)
        return r;
    if (x->run && x->run[0] && strcmp(m->run, x->run) != 0)
        return REJ(BK_REJ_WRONG_RUN, "message from rank %u: run '%s' is not this run '%s'",
                   m->rank, m->run, x->run);
    if (x->arm && x->arm[0] && strcmp(m->arm, x->arm) != 0)
        return REJ(BK_REJ_WRONG_ARM, "message from rank %u: arm '%s' is not the arm '%s'",
                   m->rank, m->arm, x->arm);
    m->type = 0;
    const msgpack_object_str *ts = &ty->via.str;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (ts->size == strlen(types[i].name) && memcmp(ts->ptr, types[i].name, ts->size) == 0) {
            m->type = types[i].type;
            f.what = types[i].name;
        }
    if (m->type == 0)
        return REJ(BK_REJ_UNKNOWN_TYPE, "message from rank %u: unknown type '%.*s'", m->rank,
                   (int)(ts->size < 32 ? ts->size : 32), ts->ptr);
    if (x->world && m->rank >= x->world)
        return REJ(BK_REJ_BAD_RANK, "%s: rank %u is not below this run's world %u", f.what,
                   m->rank, x->world);
    switch (m->type) {
    case BK_MSG_SAMPLES: return decode_samples(d, &f, x, m, err);
    case BK_MSG_HELLO: return decode_hello(d, &f, x, m, err);
    case BK_MSG_PEERS: return decode_peers(d, &f, x, m, err);
    case BK_MSG_TENSOR: return decode_tensor(d, &f, x, m, err);
    case BK_MSG_STATUS: return decode_status(&f, m, err);
    }
    return REJ(BK_REJ_UNKNOWN_TYPE, "message: unknown type");
}

bk_status bk_wire_decode(bk_wire_decoder *d, const void *buf, size_t len,
                         const bk_wire_expect *expect, bk_msg *msg, bk_wire_stats *stats,
                         bk_wire_reject *reason, bk_err *err)
{
    static const bk_wire_expect none = { NULL, NULL, 0, 0 };
    bk_err why; /* this decode's own reason, so a stale message never masks it */
    int r;
    why.code = BK_OK;
    why.msg[0] = '\0';
    why.trail[0] = '\0';
    memset(msg, 0, sizeof *msg);
    if (!d || (!buf && len)) {
        BK_FAIL(&why, BK_ERR_PEER, "message: no decoder or no buffer");
        r = BK_REJ_MALFORMED;
    } else {
        r = decode_one(d, buf, len, expect ? expect : &none, msg, &why);
    }
    if (r == BK__ACCEPT) {
        if (stats)
            stats->accepted++;
        return BK_OK;
    }
    if (stats)
        stats->rejected[r]++;
    if (reason)
        *reason = (bk_wire_reject)r;
    if (err)
        *err = why;
    return BK_ERR_PEER;
}
