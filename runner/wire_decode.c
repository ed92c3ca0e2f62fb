/* wire_decode.c - the bracket.wire/1 decoder: bounds pre-pass, msgpack-c unpack into a
 * reused zone, the header checks, then the type's fields; rejects are counted by reason. */
#include "runner/wire_priv.h"

#include <stdlib.h>
#include <string.h>

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
        return BK__REJ(BK_REJ_MALFORMED, "message: not one msgpack object: %s at byte %zu of %zu",
                       s.why, s.bad_at, len);
    if (s.zone_bytes > d->zone_chunk) {
        size_t c = d->zone_chunk;
        while (c < s.zone_bytes)
            c *= 2;
        msgpack_zone *z = msgpack_zone_new(c);
        if (!z)
            return BK__REJ(BK_REJ_MALFORMED, "message: out of memory for %zu bytes", c);
        msgpack_zone_free(d->zone);
        d->zone = z;
        d->zone_chunk = c;
    } else {
        msgpack_zone_clear(d->zone);
    }
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack(buf, len, &off, d->zone, top);
    if (rc != MSGPACK_UNPACK_SUCCESS)
        return BK__REJ(BK_REJ_MALFORMED, "message: msgpack-c cannot unpack it (code %d%s)",
                       (int)rc, rc == MSGPACK_UNPACK_NOMEM_ERROR ? ", too deep or no memory" : "");
    if (top->type != MSGPACK_OBJECT_MAP)
        return BK__REJ(BK_REJ_MALFORMED, "message: top level is %s, not a map",
                       bk__wire_obj_kind(top));
    /* bin payloads are copied out; they total at most len bytes. */
    if (bk__wire_grow((void **)&d->bytes, &d->bytes_cap, len, 1) != 0)
        return BK__REJ(BK_REJ_MALFORMED, "message: out of memory for %zu bytes", len);
    d->bytes_used = 0;
    return BK__ACCEPT;
}

static int decode_one(bk_wire_decoder *d, const char *buf, size_t len,
                      const bk_wire_expect *x, bk_msg *m, bk_err *err)
{
    msgpack_object top;
    bk__wire_fields f;
    int r;
    if ((r = unpack(d, buf, len, &top, err)) != BK__ACCEPT ||
        (r = bk__wire_index_map(&top, &f, err)) != BK__ACCEPT)
        return r;
    const msgpack_object *sc = f.v[K_SCHEMA];
    if (!sc)
        return BK__REJ(BK_REJ_FOREIGN, "message: no 'schema' (expected \"%s\")", BK_WIRE_SCHEMA);
    if (sc->type != MSGPACK_OBJECT_STR || sc->via.str.size != sizeof BK_WIRE_SCHEMA - 1 ||
        memcmp(sc->via.str.ptr, BK_WIRE_SCHEMA, sc->via.str.size) != 0)
        return BK__REJ(BK_REJ_FOREIGN, "message: 'schema' is not \"%s\"", BK_WIRE_SCHEMA);
    const msgpack_object *ty = bk__wire_need(&f, K_TYPE, MSGPACK_OBJECT_STR, "a string", &r, err);
    if (!ty)
        return r;
    if ((r = bk__wire_get_str(&f, K_RUN, m->run, sizeof m->run, err)) != BK__ACCEPT ||
        (r = bk__wire_get_str(&f, K_ARM, m->arm, sizeof m->arm, err)) != BK__ACCEPT ||
        (r = bk__wire_get_u32(&f, K_RANK, &m->rank, err)) != BK__ACCEPT)
        return r;
    if (x->run && x->run[0] && strcmp(m->run, x->run) != 0)
        return BK__REJ(BK_REJ_WRONG_RUN, "message from rank %u: run '%s' is not this run '%s'",
                       m->rank, m->run, x->run);
    if (x->arm && x->arm[0] && strcmp(m->arm, x->arm) != 0)
        return BK__REJ(BK_REJ_WRONG_ARM, "message from rank %u: arm '%s' is not the arm '%s'",
                       m->rank, m->arm, x->arm);
    m->type = 0;
    const msgpack_object_str *ts = &ty->via.str;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (ts->size == strlen(types[i].name) && memcmp(ts->ptr, types[i].name, ts->size) == 0) {
            m->type = types[i].type;
            f.what = types[i].name;
        }
    if (m->type == 0)
        return BK__REJ(BK_REJ_UNKNOWN_TYPE, "message from rank %u: unknown type '%.*s'", m->rank,
                       (int)(ts->size < 32 ? ts->size : 32), ts->ptr);
    if (x->world && m->rank >= x->world)
        return BK__REJ(BK_REJ_BAD_RANK, "%s: rank %u is not below this run's world %u", f.what,
                       m->rank, x->world);
    return bk__wire_decode_body(d, &f, x, m, err);
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
