/* wire_types.c - each message type's own fields (contracts in wire.h). */
#include "runner/wire_priv.h"

#include <string.h>

typedef bk__wire_fields fields;

static int world_matches(const fields *f, const bk_msg *m, const bk_wire_expect *x,
                         bk_err *err)
{
    if (m->world == 0 || m->world > BK_WIRE_MAX_PEERS)
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field 'world' is %u, outside 1..%d", f->what,
                       m->world, BK_WIRE_MAX_PEERS);
    if (x->world && m->world != x->world)
        return BK__REJ(BK_REJ_BAD_FIELD, "%s: field 'world' is %u, this run's world is %u", f->what,
                       m->world, x->world);
    if (m->rank >= m->world)
        return BK__REJ(BK_REJ_BAD_RANK, "%s: rank %u is not below its world %u", f->what, m->rank,
                       m->world);
    return BK__ACCEPT;
}

static int decode_hello(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                        bk_msg *m, bk_err *err)
{
    int r;
    if ((r = bk__wire_get_u32(f, K_WORLD, &m->world, err)) != BK__ACCEPT ||
        (r = bk__wire_get_int(f, K_PID, &m->pid, err)) != BK__ACCEPT ||
        (r = bk__wire_get_bin(d, f, K_BLOB, &m->blob, &m->blob_len, err)) != BK__ACCEPT)
        return r;
    return world_matches(f, m, x, err);
}

static int decode_peers(bk_wire_decoder *d, const fields *f, const bk_wire_expect *x,
                        bk_msg *m, bk_err *err)
{
    int r = BK__ACCEPT;
    if ((r = bk__wire_get_u32(f, K_WORLD, &m->world, err)) != BK__ACCEPT ||
        (r = world_matches(f, m, x, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *a =
        bk__wire_need(f, K_BLOBS, MSGPACK_OBJECT_ARRAY, "an array of bin", &r, err);
    if (!a)
        return r;
    if (a->via.array.size != m->world)
        return BK__REJ(BK_REJ_BAD_FIELD, "peers: field 'blobs' holds %u blobs for a world of %u",
                       a->via.array.size, m->world);
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *o = &a->via.array.ptr[i];
        if (o->type != MSGPACK_OBJECT_BIN)
            return BK__REJ(BK_REJ_BAD_FIELD, "peers: field 'blobs' element %u is %s, not bin", i,
                           bk__wire_obj_kind(o));
        d->blobs[i] = bk__wire_keep_bytes(d, &o->via.bin);
        d->blob_lens[i] = o->via.bin.size;
    }
    m->nblobs = m->world;
    m->blobs = d->blobs;
    m->blob_lens = d->blob_lens;
    return BK__ACCEPT;
}

static int get_shape(const fields *f, const bk_wire_expect *x, bk_msg *m, bk_err *err)
{
    int r = bk__wire_get_u32(f, K_SHAPE, &m->shape, err);
    if (r == BK__ACCEPT && x->max_shapes && m->shape >= x->max_shapes)
        r = BK__REJ(BK_REJ_BAD_FIELD, "%s: field 'shape' is %u, the plan has %u shapes", f->what,
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
        (r = bk__wire_get_uint(f, K_FIRST, UINT64_MAX, &m->first, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *a =
        bk__wire_need(f, K_NS, MSGPACK_OBJECT_ARRAY, "an array of unsigned integers", &r, err);
    if (!a)
        return r;
    size_t n = a->via.array.size;
    if (n && m->first > UINT64_MAX - (n - 1))
        return BK__REJ(BK_REJ_BAD_FIELD, "samples: iterations %llu + %zu overflow",
                       (unsigned long long)m->first, n);
    if (bk__wire_grow((void **)&d->ns, &d->ns_cap, n, sizeof *d->ns) != 0)
        return BK__REJ(BK_REJ_MALFORMED, "samples: out of memory for %zu samples", n);
    const msgpack_object *e = a->via.array.ptr;
    uint64_t *out = d->ns;
    for (size_t i = 0; i < n; i++) {
        if (e[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return BK__REJ(BK_REJ_BAD_FIELD,
                           "samples: field 'ns' must be an array of unsigned integers "
                           "(element %zu is %s)", i, bk__wire_obj_kind(&e[i]));
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
        (r = bk__wire_get_str(f, K_NAME, m->name, sizeof m->name, err)) != BK__ACCEPT ||
        (r = bk__wire_get_str(f, K_DTYPE, m->dtype, sizeof m->dtype, err)) != BK__ACCEPT)
        return r;
    return bk__wire_get_bin(d, f, K_DATA, &m->data, &m->data_len, err);
}

static int decode_status(const fields *f, bk_msg *m, bk_err *err)
{
    int r = BK__ACCEPT;
    const msgpack_object *ok = bk__wire_need(f, K_OK, MSGPACK_OBJECT_BOOLEAN, "a bool", &r, err);
    if (!ok)
        return r;
    m->ok = ok->via.boolean ? 1 : 0;
    if ((r = bk__wire_get_int(f, K_CODE, &m->code, err)) != BK__ACCEPT ||
        (r = bk__wire_get_str(f, K_MESSAGE, m->message, sizeof m->message, err)) != BK__ACCEPT ||
        (r = bk__wire_get_uint(f, K_SAMPLES, UINT64_MAX, &m->samples, err)) != BK__ACCEPT ||
        (r = bk__wire_get_uint(f, K_T_FIRST_NS, UINT64_MAX, &m->t_first_ns, err)) != BK__ACCEPT ||
        (r = bk__wire_get_uint(f, K_ROUTED, UINT64_MAX, &m->routed, err)) != BK__ACCEPT)
        return r;
    return bk__wire_get_str(f, K_SETTINGS, m->settings, sizeof m->settings, err);
}

int bk__wire_decode_body(bk_wire_decoder *d, const fields *f,
                         const bk_wire_expect *x, bk_msg *m, bk_err *err)
{
    switch (m->type) {
    case BK_MSG_SAMPLES: return decode_samples(d, f, x, m, err);
    case BK_MSG_HELLO: return decode_hello(d, f, x, m, err);
    case BK_MSG_PEERS: return decode_peers(d, f, x, m, err);
    case BK_MSG_TENSOR: return decode_tensor(d, f, x, m, err);
    case BK_MSG_STATUS: return decode_status(f, m, err);
    }
    return BK__REJ(BK_REJ_UNKNOWN_TYPE, "%s: unknown type", f->what);
}
