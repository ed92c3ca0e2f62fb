/* wire_fields.c - the decoder's field readers: known keys, typed reads that say exactly
 * which field is wrong and why. */
#include "runner/wire_priv.h"

#include <stdlib.h>
#include <string.h>

static const struct { const char *name; uint32_t len; } keys[K_COUNT] = {
#define KEY(s) { s, sizeof s - 1 }
    KEY("schema"), KEY("type"), KEY("run"), KEY("arm"), KEY("rank"), KEY("world"),
    KEY("pid"), KEY("blob"), KEY("blobs"), KEY("shape"), KEY("first"), KEY("ns"),
    KEY("name"), KEY("dtype"), KEY("data"), KEY("ok"), KEY("code"), KEY("message"),
    KEY("samples"), KEY("t_first_ns"), KEY("settings"), KEY("routed"),
#undef KEY
};

/* Grow `*p` (elements of `each` bytes) to hold `n`; never shrinks. */
int bk__wire_grow(void **p, size_t *cap, size_t n, size_t each)
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

const char *bk__wire_obj_kind(const msgpack_object *o)
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
int bk__wire_index_map(const msgpack_object *top, bk__wire_fields *f, bk_err *err)
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
                return BK__REJ(BK_REJ_BAD_FIELD, "message: key '%s' appears twice", keys[j].name);
            f->v[j] = &kv->val;
            break;
        }
    }
    return BK__ACCEPT;
}

/* ---- typed field readers: BK__ACCEPT or a reject reason with err set ---- */

const msgpack_object *bk__wire_need(const bk__wire_fields *f, int k, msgpack_object_type t,
                                    const char *kind, int *rej, bk_err *err)
{
    const msgpack_object *o = f->v[k];
    if (!o)
        *rej = BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is missing", f->what, keys[k].name);
    else if (o->type != t)
        *rej = BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' must be %s, not %s", f->what,
                       keys[k].name, kind, bk__wire_obj_kind(o));
    else
        return o;
    return NULL;
}

int bk__wire_get_uint(const bk__wire_fields *f, int k, uint64_t max, uint64_t *out, bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o =
        bk__wire_need(f, k, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer", &rej, err);
    if (!o)
        return rej;
    if (o->via.u64 > max)
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is %llu, above its limit %llu", f->what,
                       keys[k].name, (unsigned long long)o->via.u64, (unsigned long long)max);
    *out = o->via.u64;
    return BK__ACCEPT;
}

int bk__wire_get_u32(const bk__wire_fields *f, int k, uint32_t *out, bk_err *err)
{
    uint64_t v = 0;
    int rej = bk__wire_get_uint(f, k, UINT32_MAX, &v, err);
    *out = (uint32_t)v;
    return rej;
}

int bk__wire_get_int(const bk__wire_fields *f, int k, int64_t *out, bk_err *err)
{
    const msgpack_object *o = f->v[k];
    if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return BK__ACCEPT;
    }
    uint64_t v = 0;
    if (o && o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' must be an integer, not %s", f->what,
                       keys[k].name, bk__wire_obj_kind(o));
    int rej = bk__wire_get_uint(f, k, INT64_MAX, &v, err);
    *out = (int64_t)v;
    return rej;
}

/* Copy a string field into `dst` (capacity `cap`, NUL-terminated). Too long
 * or holding a NUL byte is rejected, never cut. */
int bk__wire_get_str(const bk__wire_fields *f, int k, char *dst, size_t cap, bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o = bk__wire_need(f, k, MSGPACK_OBJECT_STR, "a string", &rej, err);
    if (!o)
        return rej;
    const msgpack_object_str *s = &o->via.str;
    if (s->size >= cap)
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' is %u bytes, longer than the %zu allowed",
                       f->what, keys[k].name, s->size, cap - 1);
    if (s->size && memchr(s->ptr, '\0', s->size))
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field '%s' holds a NUL byte", f->what, keys[k].name);
    memcpy(dst, s->ptr, s->size);
    dst[s->size] = '\0';
    return BK__ACCEPT;
}

/* Copy a bin payload into the decoder's byte store (reserved for the whole
 * message before the type's fields are read, so this cannot fail). */
const void *bk__wire_keep_bytes(bk_wire_decoder *d, const msgpack_object_bin *b)
{
    char *p = d->bytes + d->bytes_used;
    if (b->size)
        memcpy(p, b->ptr, b->size);
    d->bytes_used += b->size;
    return p;
}

int bk__wire_get_bin(bk_wire_decoder *d, const bk__wire_fields *f, int k, const void **p,
                     size_t *len, bk_err *err)
{
    int rej = BK__ACCEPT;
    const msgpack_object *o = bk__wire_need(f, k, MSGPACK_OBJECT_BIN, "bin", &rej, err);
    if (!o)
        return rej;
    *p = bk__wire_keep_bytes(d, &o->via.bin);
    *len = o->via.bin.size;
    return BK__ACCEPT;
}
