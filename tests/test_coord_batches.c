/* test_coord_batches.c - what the coordinator keeps of an engine's messages over ipc: sample
 * batches land at their iterations, and a batch that overlaps what arrived, runs past the
 * plan's iterations, carries the "missing" marker or comes in an audit is rejected and
 * counted, never stored; a rank or shape outside the arm is refused by the decoder; a hello
 * is answered once every rank has said hello, and a second hello, a blob over BK_BLOB_MAX, a
 * hello on the samples socket, or samples or peers on the rendezvous socket are rejected and
 * counted; an audit's outputs must be as many as the coordinator was opened for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "collectives/collectives.h" /* BK_BLOB_MAX */
#include "kernels/catalog.h"
#include "runner/coordinator.h"
#include "runner/wire.h"

#include "coord_fixture.h"

#define RUN "test-coord-batches"
#define ITERS 4
#define NSHAPES 2
#define BOUND_NS 10000000000ull /* every wait below is bounded by this */

typedef coord_fixture fixture;

static void open_coord(fixture *f, int world, int audit)
{
    coord_fixture_open(f, RUN, NSHAPES, ITERS, NULL, world, audit);
}

static void close_coord(fixture *f) { coord_fixture_close(f); }

static void *socket_to(fixture *f, int type, const char *ep)
{
    void *s = zmq_socket(f->zctx, type);
    int zero = 0;
    assert_non_null(s);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

static void send_buf(void *s, bk_wire_buf *b)
{
    assert_true(zmq_send(s, b->data, b->size, 0) >= 0);
    bk_wire_buf_free(b);
}

static void send_samples(void *s, const char *arm, uint32_t rank, uint32_t shape,
                         uint64_t first, const uint64_t *ns, size_t n)
{
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, arm, rank };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_samples(&b, &h, shape, first, ns, n, &err), BK_OK);
    send_buf(s, &b);
}

static void send_hello(void *s, uint32_t rank, uint32_t world, const void *blob, size_t len)
{
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "B", rank };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_hello(&b, &h, world, 100 + rank, blob, len, &err), BK_OK);
    send_buf(s, &b);
}

static uint64_t seen(const fixture *f)
{
    const bk_wire_stats *ws = bk_coord_stats(f->c);
    uint64_t n = ws->accepted;
    for (int r = 0; r < BK_REJ_COUNT; r++)
        n += ws->rejected[r];
    return n;
}

/* Poll until `want` messages were accepted or rejected, at most BOUND_NS. */
static void poll_seen(fixture *f, uint64_t want)
{
    uint64_t end = bk_now_ns() + BOUND_NS;
    while (seen(f) < want && bk_now_ns() < end)
        bk_coord_poll(f->c, 10);
    assert_int_equal(seen(f), want);
}

/* ---- sample batches ---- */

static void test_batches(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 2, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    const uint64_t a[] = { 11, 12 }, b[] = { 13, 14 }, o[] = { 91, 92 }, one[] = { 7 };
    const uint64_t marker[] = { 21, UINT64_MAX };
    send_samples(s, "B", 0, 0, 0, a, 2);      /* iterations 0..1: kept */
    send_samples(s, "B", 0, 0, 1, o, 2);      /* 1..2 overlaps iteration 1: rejected */
    send_samples(s, "B", 0, 0, 2, b, 2);      /* 2..3: kept, ends exactly at ITERS */
    send_samples(s, "B", 0, 1, 3, o, 2);      /* 3..4 runs past ITERS: rejected */
    send_samples(s, "B", 0, 1, 5, NULL, 0);   /* starts past ITERS: rejected */
    send_samples(s, "B", 1, 1, 0, marker, 2); /* the "missing" marker as a sample: rejected */
    send_samples(s, "B", 2, 0, 0, one, 1);    /* rank 2 of a world of 2: bad rank */
    send_samples(s, "B", 1, NSHAPES, 0, one, 1); /* shape 2 of 2: bad field */
    send_samples(s, "C", 1, 0, 0, one, 1);    /* another arm */
    send_hello(s, 1, 2, "x", 1);              /* a hello on the samples socket */
    send_samples(s, "B", 1, 1, 3, one, 1);    /* the last iteration alone: kept */
    poll_seen(&f, 11);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->accepted, 3);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 5);
    assert_int_equal(ws->rejected[BK_REJ_BAD_RANK], 1);
    assert_int_equal(ws->rejected[BK_REJ_WRONG_ARM], 1);
    assert_int_equal(ws->rejected[BK_REJ_UNKNOWN_TYPE], 1);
    const bk_rank_data *d0 = &f.arm.r[0], *d1 = &f.arm.r[1];
    assert_int_equal(d0->samples_got, 4);
    assert_int_equal(d0->ns_seen[0], 4);
    assert_int_equal(d0->ns_seen[1], 0);
    const uint64_t want0[ITERS] = { 11, 12, 13, 14 };
    assert_memory_equal(d0->ns[0], want0, sizeof want0);
    for (int i = 0; i < ITERS; i++)
        assert_true(d0->ns[1][i] == UINT64_MAX);
    assert_int_equal(d1->samples_got, 1);
    assert_int_equal(d1->ns_seen[1], 1);
    assert_true(d1->ns[1][0] == UINT64_MAX && d1->ns[1][2] == UINT64_MAX);
    assert_true(d1->ns[1][3] == 7);
    zmq_close(s);
    close_coord(&f);
}

/* An audit arm sends tensors, not timings: its samples are rejected and nothing is stored
 * (an audit rank holds no sample arrays). */
static void test_audit_samples(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 1);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    const uint64_t a[] = { 11, 12 };
    send_samples(s, "A", 0, 0, 0, a, 2);
    poll_seen(&f, 1);
    assert_int_equal(bk_coord_stats(f.c)->accepted, 0);
    assert_int_equal(bk_coord_stats(f.c)->rejected[BK_REJ_BAD_FIELD], 1);
    assert_int_equal(f.arm.r[0].samples_got, 0);
    zmq_close(s);
    close_coord(&f);
}

/* ---- the rendezvous ---- */

static void test_rendezvous(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 2, 0);
    void *r0 = socket_to(&f, ZMQ_DEALER, bk_coord_rendezvous_ep(f.c));
    void *r1 = socket_to(&f, ZMQ_DEALER, bk_coord_rendezvous_ep(f.c));
    static unsigned char big[BK_BLOB_MAX + 1];
    send_hello(r0, 0, 2, "zero", 4);
    poll_seen(&f, 1);
    send_hello(r0, 0, 2, "again", 5);          /* a second hello from rank 0 */
    send_hello(r1, 1, 2, big, sizeof big);    /* a blob over BK_BLOB_MAX */
    send_hello(r1, 1, 3, "w3", 2);            /* another world */
    const uint64_t one[] = { 7 };
    send_samples(r1, "B", 1, 0, 0, one, 1);   /* samples on the rendezvous socket */
    {                                         /* a peers message of this world, from rank 1 */
        const void *blobs[2] = { "p", "q" };
        const size_t lens[2] = { 1, 1 };
        bk_wire_buf b = { 0 };
        bk_wire_hdr h = { RUN, "B", 1 };
        bk_err e = { 0 };
        assert_int_equal(bk_wire_peers(&b, &h, 2, blobs, lens, &e), BK_OK);
        send_buf(r1, &b);
    }
    poll_seen(&f, 6);
    assert_int_equal(f.arm.r[1].hello, 0);
    int timeout = 0;
    zmq_setsockopt(r0, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    char buf[256];
    assert_int_equal(zmq_recv(r0, buf, sizeof buf, 0), -1); /* no answer before all met */
    send_hello(r1, 1, 2, "one", 3);
    poll_seen(&f, 7);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->accepted, 2);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 5);
    assert_int_equal(f.arm.r[1].samples_got, 0);
    assert_int_equal(f.arm.r[0].pid, 100);
    assert_int_equal(f.arm.r[1].pid, 101);
    /* each rank gets the peers message: its own rank, every blob in rank order */
    bk_wire_decoder *dec = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_wire_decoder_new(&dec, &err), BK_OK);
    void *socks[2] = { r0, r1 };
    for (uint32_t r = 0; r < 2; r++) {
        int ms = 5000;
        zmq_setsockopt(socks[r], ZMQ_RCVTIMEO, &ms, sizeof ms);
        int n = zmq_recv(socks[r], buf, sizeof buf, 0);
        assert_true(n > 0 && (size_t)n < sizeof buf);
        bk_msg m;
        bk_wire_expect x = { RUN, "B", 2, 0 };
        assert_int_equal(bk_wire_decode(dec, buf, (size_t)n, &x, &m, NULL, NULL, &err), BK_OK);
        assert_int_equal(m.type, BK_MSG_PEERS);
        assert_int_equal(m.rank, r);
        assert_int_equal(m.nblobs, 2);
        assert_int_equal(m.blob_lens[0], 4);
        assert_memory_equal(m.blobs[0], "zero", 4);
        assert_int_equal(m.blob_lens[1], 3);
        assert_memory_equal(m.blobs[1], "one", 3);
    }
    bk_wire_decoder_free(dec);
    zmq_close(r0);
    zmq_close(r1);
    close_coord(&f);
}

/* The outputs an audit is checked against must be the ones the coordinator was opened for. */
static void test_outputs_count(void **state)
{
    (void)state;
    const bk_target *tg = bk_catalog_target("collective.allreduce_residual_rmsnorm");
    assert_non_null(tg);
    const bk_shape shape = { .tokens = 2, .hidden = 8, .weight = 1 };
    bk_coord *c = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_coord_open(&c, RUN, 1, 1, 1, &err), BK_OK);
    assert_int_equal(bk_coord_set_outputs(c, tg, &shape, "bf16", &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "collective.allreduce_residual_rmsnorm has 2 output(s), "
                                    "opened for 1"));
    bk_coord_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_audit_samples),
        cmocka_unit_test(test_rendezvous),
        cmocka_unit_test(test_outputs_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
