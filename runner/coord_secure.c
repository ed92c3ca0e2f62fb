/* coord_secure.c - the coordinator's tcp side: CURVE servers, a ZAP handler that passes
 * only the run's client key, and handshake monitors that count refused connections. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "runner/coord_secure.h"

struct bk_coord_sec {
    void *zap, *mon[2];
    uint8_t client_key[32];           /* the one client key this run accepts */
    bk_transport_stats st;
    uint64_t accepted, handshakes_ok; /* tcp connections, and those that became peers */
};

static bk_status open_monitor(bk_coord_sec *s, void *zctx, void *sock, int k, bk_err *err)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://bk-monitor-%d", k);
    if (bk_monitor_open(zctx, sock, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED,
                        &s->mon[k]) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: socket monitor: %s",
                       zmq_strerror(zmq_errno()));
    return BK_OK;
}

bk_status bk_coord_sec_open(bk_coord_sec **out, void *zctx, void *router, void *pull,
                            const bk_transport *t, bk_err *err)
{
    bk_status st = BK_OK;
    int zero = 0;
    bk_coord_sec *s = calloc(1, sizeof *s);
    *out = s;
    if (!s)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory");
    if (!zmq_z85_decode(s->client_key, t->keys.client_public))
        return BK_FAIL(err, BK_ERR_INTERNAL, "coordinator: bad client key");
    /* the ZAP handler must be bound before any CURVE socket meets a client */
    s->zap = zmq_socket(zctx, ZMQ_REP);
    if (!s->zap || zmq_setsockopt(s->zap, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(s->zap, "inproc://zeromq.zap.01") != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: ZAP handler: %s",
                       zmq_strerror(zmq_errno()));
    BK_TRY(bk_curve_server(router, &t->keys, err));
    BK_TRY(bk_curve_server(pull, &t->keys, err));
    BK_TRY(open_monitor(s, zctx, router, 0, err));
    BK_TRY(open_monitor(s, zctx, pull, 1, err));
out:
    return st;
}

bk_status bk_coord_sec_bind(void *sock, const bk_transport *t, int port, char *ep, size_t len,
                            bk_err *err)
{
    char want[128];
    if (t->port)
        snprintf(want, sizeof want, "tcp://%s:%d", t->addr, port);
    else
        snprintf(want, sizeof want, "tcp://%s:*", t->addr);
    if (zmq_bind(sock, want) != 0) {
        int e = zmq_errno();
        if (e == EADDRINUSE)
            return BK_FAIL(err, BK_ERR_INPUT, "coordinator: port %d on %s%s%s%s is already in "
                           "use: choose another --port (it takes PORT and PORT+1), or leave it "
                           "out for any free port", port, t->addr, t->iface[0] ? " (" : "",
                           t->iface, t->iface[0] ? ")" : "");
        return BK_FAIL(err, e == EADDRNOTAVAIL || e == EINVAL ? BK_ERR_INPUT : BK_ERR_SYSTEM,
                       "coordinator: cannot bind %s: %s", want, zmq_strerror(e));
    }
    size_t n = len;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &n) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: ZMQ_LAST_ENDPOINT: %s",
                       zmq_strerror(zmq_errno()));
    return BK_OK;
}

void bk_coord_sec_pollitems(const bk_coord_sec *s, void *items)
{
    zmq_pollitem_t *it = items;
    it[0] = (zmq_pollitem_t){ s->zap, 0, ZMQ_POLLIN, 0 };
    it[1] = (zmq_pollitem_t){ s->mon[0], 0, ZMQ_POLLIN, 0 };
    it[2] = (zmq_pollitem_t){ s->mon[1], 0, ZMQ_POLLIN, 0 };
}

/* Connections accepted that never completed a handshake (garbage, another protocol, a
 * wrong server key) and were not denied by ZAP: accepted - succeeded - denied. libzmq
 * reports no event for a bad greeting, so the count is kept as that difference, folded
 * into the wire's MALFORMED rejections; a handshake in flight counts until it succeeds,
 * and its success is queued before its first message can be read. */
static void fold_refused(bk_coord_sec *s, bk_wire_stats *stats)
{
    uint64_t done = s->handshakes_ok + s->st.auth_denied;
    uint64_t now = s->accepted > done ? s->accepted - done : 0;
    stats->rejected[BK_REJ_MALFORMED] += now - s->st.handshake_failed;
    s->st.handshake_failed = now;
}

/* A ZAP request (RFC 27): pass only the run's client key over CURVE. */
static void on_zap(bk_coord_sec *s, bk_wire_stats *stats)
{
    zmq_msg_t f[8];
    int n = 0, more = 1, extra = 0;
    while (more && n < 8) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], s->zap, 0) < 0) {
            zmq_msg_close(&f[n]);
            break;
        }
        more = zmq_msg_more(&f[n]);
        n++;
    }
    while (more) { /* more frames than RFC 27 has: drain, then deny */
        zmq_msg_t x;
        zmq_msg_init(&x);
        more = zmq_msg_recv(&x, s->zap, 0) >= 0 && zmq_msg_more(&x);
        zmq_msg_close(&x);
        extra = 1;
    }
    int ok = !extra && n == 7 && zmq_msg_size(&f[5]) == 5 &&
             !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) && zmq_msg_size(&f[6]) == 32 &&
             !memcmp(zmq_msg_data(&f[6]), s->client_key, 32);
    if (!ok) {
        s->st.auth_denied++;
        stats->rejected[BK_REJ_FOREIGN]++;
        fold_refused(s, stats);
    }
    if (n >= 2) {
        const char *code = ok ? "200" : "400";
        const char *text = ok ? "OK" : "not this run's client key";
        zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(s->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
        zmq_send(s->zap, code, 3, ZMQ_SNDMORE);
        zmq_send(s->zap, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
        zmq_send(s->zap, "", 0, 0);
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void on_monitor(bk_coord_sec *s, void *mon, bk_wire_stats *stats)
{
    const int id = bk_monitor_event(mon, 0);
    if (id < 0)
        return;
    if (id == ZMQ_EVENT_ACCEPTED)
        s->accepted++;
    else if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        s->handshakes_ok++;
    fold_refused(s, stats);
}

static int readable(void *sock)
{
    int ev = 0;
    size_t sz = sizeof ev;
    return zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN);
}

void bk_coord_sec_serve(bk_coord_sec *s, bk_wire_stats *stats)
{
    for (int round = 0; round < 64 && readable(s->zap); round++)
        on_zap(s, stats);
    for (int k = 0; k < 2; k++)
        for (int round = 0; round < 256 && readable(s->mon[k]); round++)
            on_monitor(s, s->mon[k], stats);
}

const bk_transport_stats *bk_coord_sec_stats(const bk_coord_sec *s) { return &s->st; }

void bk_coord_sec_close(bk_coord_sec *s)
{
    if (!s)
        return;
    for (int k = 0; k < 2; k++)
        if (s->mon[k])
            zmq_close(s->mon[k]);
    if (s->zap)
        zmq_close(s->zap);
    free(s);
}
