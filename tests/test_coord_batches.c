/* test_coord_batches.c - what the coordinator keeps of an engine's messages over ipc: sample
 * batches land at their iterations, and a batch that overlaps what arrived with other times,
 * runs past the plan's iterations, carries the "missing" marker or comes in an audit is
 * rejected and counted, never stored; one that repeats what arrived, with the same times, is
 * counted as repeated, its new iterations stored; a rank or shape outside the arm is refused
 * by the decoder; a hello is answered once every rank has said hello, the same hello again
 * (same process and blob, a new connection) is a repeat answered on its connection, and a
 * second hello that differs, a blob over BK_BLOB_MAX, a hello on the samples socket, or
 * samples or peers on the rendezvous socket are rejected and counted, a blob of exactly
 * BK_BLOB_MAX is passed on whole; an audit's outputs must be as many as the coordinator was opened for, each (shape,
 * output) has its own slot and length, and a tensor that comes again is a repeat when the
 * same, rejected when not; the arm is done when every rank has sent its status; the first
 * samples' time is kept; a round's name is "B", "B#2"... */
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

/* Samples sent again (an engine over tcp after its connection broke): an iteration already
 * received may come again with the same time, alone or beside new ones, and is counted as
 * repeated, not received twice; with another time its batch is rejected whole, the new
 * iterations in it left unstored. */
static void test_repeats(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    const uint64_t a[] = { 11, 12 }, ab[] = { 12, 13 }, bad1[] = { 11, 99 }, bad2[] = { 99, 5 };
    send_samples(s, "B", 0, 0, 0, a, 2);    /* iterations 0..1: new */
    send_samples(s, "B", 0, 0, 0, a, 2);    /* the same again: 2 repeated */
    send_samples(s, "B", 0, 0, 1, ab, 2);   /* 1 again, 2 new: 1 repeated, 1 new */
    send_samples(s, "B", 0, 0, 0, bad1, 2); /* 1 again with another time: rejected */
    send_samples(s, "B", 0, 0, 2, bad2, 2); /* 2 with another time beside a new 3: rejected */
    poll_seen(&f, 5);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->accepted, 3);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 2);
    assert_int_equal(ws->repeated, 3);
    const bk_rank_data *d = &f.arm.r[0];
    assert_int_equal(d->samples_got, 3);
    assert_int_equal(d->ns_seen[0], 3);
    const uint64_t want[ITERS] = { 11, 12, 13, UINT64_MAX };
    assert_memory_equal(d->ns[0], want, sizeof want);
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

/* Sock's next message within `ms` decoded as rank r's peers answer of a lane of 2 holding
 * blobs "zero" and "one" (anything else fails); 1 when it came, 0 when none came. */
static int got_peers(void *sock, uint32_t r, int ms)
{
    char buf[256];
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &ms, sizeof ms);
    bk_wire_decoder *dec = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_wire_decoder_new(&dec, &err), BK_OK);
    bk_msg m;
    bk_wire_expect x = { RUN, "B", 2, 0 };
    const int came = coord_fixture_recv(sock, dec, &x, buf, sizeof buf, &m) == 0;
    if (came) {
        assert_int_equal(m.type, BK_MSG_PEERS);
        assert_int_equal(m.rank, r);
        assert_int_equal(m.nblobs, 2);
        assert_int_equal(m.blob_lens[0], 4);
        assert_memory_equal(m.blobs[0], "zero", 4);
        assert_int_equal(m.blob_lens[1], 3);
        assert_memory_equal(m.blobs[1], "one", 3);
    }
    bk_wire_decoder_free(dec);
    return came;
}

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
    assert_true(got_peers(r0, 0, 5000));
    assert_true(got_peers(r1, 1, 5000));
    zmq_close(r0);
    zmq_close(r1);
    close_coord(&f);
}

/* A hello again from the same engine (same pid, same blob) on a new connection, as an
 * engine over tcp sends after its connection broke, is a repeat: counted, not rejected,
 * the answer going to the new connection, and given again when it came after the answer;
 * a second hello with another blob is still rejected. */
static void test_rendezvous_again(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 2, 0);
    const char *ep = bk_coord_rendezvous_ep(f.c);
    void *old0 = socket_to(&f, ZMQ_DEALER, ep), *new0 = socket_to(&f, ZMQ_DEALER, ep);
    void *r1 = socket_to(&f, ZMQ_DEALER, ep), *late0 = socket_to(&f, ZMQ_DEALER, ep);
    send_hello(old0, 0, 2, "zero", 4);
    poll_seen(&f, 1);
    send_hello(new0, 0, 2, "zero", 4); /* the same engine, a new connection */
    send_hello(new0, 0, 2, "zerO", 4); /* rank 0 with another blob */
    poll_seen(&f, 3);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->repeated_hellos, 1);
    assert_int_equal(ws->accepted, 2);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 1);
    send_hello(r1, 1, 2, "one", 3);
    poll_seen(&f, 4);
    assert_true(got_peers(new0, 0, 5000)); /* rank 0's answer on its new connection */
    assert_true(got_peers(r1, 1, 5000));
    assert_false(got_peers(old0, 0, 200)); /* not on the old one */
    send_hello(late0, 0, 2, "zero", 4);    /* again after the answer: answered again */
    poll_seen(&f, 5);
    assert_true(got_peers(late0, 0, 5000));
    assert_int_equal(ws->repeated_hellos, 2);
    assert_int_equal(f.arm.r[0].pid, 100);
    zmq_close(old0);
    zmq_close(new0);
    zmq_close(r1);
    zmq_close(late0);
    close_coord(&f);
}

/* A blob of exactly BK_BLOB_MAX bytes is the largest accepted, and is passed on whole. */
static void test_rendezvous_blob_max(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    void *r0 = socket_to(&f, ZMQ_DEALER, bk_coord_rendezvous_ep(f.c));
    static unsigned char blob[BK_BLOB_MAX], buf[2 * BK_BLOB_MAX];
    memset(blob, 0x5a, sizeof blob);
    send_hello(r0, 0, 1, blob, sizeof blob);
    poll_seen(&f, 1);
    assert_int_equal(bk_coord_stats(f.c)->accepted, 1);
    assert_int_equal(f.arm.r[0].hello, 1);
    int ms = 5000;
    zmq_setsockopt(r0, ZMQ_RCVTIMEO, &ms, sizeof ms);
    bk_wire_decoder *dec = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_wire_decoder_new(&dec, &err), BK_OK);
    bk_msg m;
    bk_wire_expect x = { RUN, "B", 1, 0 };
    assert_int_equal(coord_fixture_recv(r0, dec, &x, buf, sizeof buf, &m), 0);
    assert_int_equal(m.type, BK_MSG_PEERS);
    assert_int_equal(m.nblobs, 1);
    assert_int_equal(m.blob_lens[0], BK_BLOB_MAX);
    assert_memory_equal(m.blobs[0], blob, sizeof blob);
    bk_wire_decoder_free(dec);
    zmq_close(r0);
    close_coord(&f);
}

/* ---- an audit's tensors over several shapes ---- */

static void send_status_arm(void *s, const char *arm, uint32_t rank, int ok, int64_t code);

static void send_tensor(void *s, const char *arm, uint32_t shape, const char *name, size_t len,
                        unsigned char fill)
{
    unsigned char data[32];
    memset(data, fill, sizeof data);
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, arm, 0 };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_tensor(&b, &h, shape, name, "bf16", data, len, &err), BK_OK);
    send_buf(s, &b);
}

/* Each (shape, output) has its own slot, shape * noutputs + output, and a tensor's length
 * is that of its own shape; a tensor in an arm that is not the audit is rejected. A tensor
 * that comes again the same is a repeat, other bytes for it are rejected; the audit is all
 * in when a rank that reported success has every tensor. */
static void test_tensor_slots(void **state)
{
    (void)state;
    const bk_target *tg = bk_catalog_target("collective.allreduce_residual_rmsnorm");
    assert_non_null(tg);
    /* 16 bf16 (32 bytes) and 8 bf16 (16 bytes); outputs: 0 "out", 1 "residual_out" */
    const bk_shape shapes[2] = { { .tokens = 2, .hidden = 8, .weight = 1 },
                                 { .tokens = 1, .hidden = 8, .weight = 1 } };
    fixture f;
    memset(&f, 0, sizeof f);
    f.nshapes = 2;
    bk_err err = { 0 };
    assert_int_equal(bk_coord_open(&f.c, RUN, 2, 1, 2, &err), BK_OK);
    assert_int_equal(bk_coord_set_outputs(f.c, tg, shapes, "bf16", &err), BK_OK);
    bk_arm_run b = { .idx = BK_ARM_IDX_B, .name = "B", .world = 1 };
    b.r = calloc(1, sizeof *b.r);
    assert_non_null(b.r);
    assert_int_equal(bk_coord_begin_arm(f.c, &b, &err), BK_OK);
    f.zctx = zmq_ctx_new();
    assert_non_null(f.zctx);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    send_tensor(s, "B", 0, "out", 32, 1); /* arm B times, it does not audit */
    poll_seen(&f, 1);
    assert_int_equal(bk_coord_stats(f.c)->rejected[BK_REJ_BAD_FIELD], 1);
    for (int k = 0; k < 4; k++)
        assert_null(b.r[0].tensors[k]);
    bk_coord_end_arm(f.c);

    f.arm.idx = BK_ARM_IDX_A;
    f.arm.name = "A";
    f.arm.audit = 1;
    f.arm.world = 1;
    f.arm.r = calloc(1, sizeof *f.arm.r);
    assert_non_null(f.arm.r);
    assert_int_equal(bk_coord_begin_arm(f.c, &f.arm, &err), BK_OK);
    send_tensor(s, "A", 0, "residual_out", 32, 2); /* slot 1 */
    send_tensor(s, "A", 1, "out", 16, 3);          /* slot 2, 16 bytes: shape 1's length */
    send_tensor(s, "A", 1, "residual_out", 16, 4); /* slot 3 */
    send_tensor(s, "A", 1, "out", 32, 5);          /* shape 0's length for shape 1 */
    poll_seen(&f, 5);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->accepted, 3);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 2);
    const bk_rank_data *d = &f.arm.r[0];
    assert_null(d->tensors[0]);
    const size_t want_len[4] = { 0, 32, 16, 16 };
    for (int k = 1; k < 4; k++) {
        assert_non_null(d->tensors[k]);
        assert_int_equal(d->tensor_len[k], want_len[k]);
        assert_int_equal(((unsigned char *)d->tensors[k])[0], k + 1);
    }
    /* sent again (an engine over tcp after its connection broke): the same bytes are a
     * repeat, taken once; other bytes for a filled slot are rejected, the first kept */
    send_tensor(s, "A", 0, "residual_out", 32, 2);
    send_tensor(s, "A", 1, "out", 16, 9);
    poll_seen(&f, 7);
    assert_int_equal(ws->repeated_tensors, 1);
    assert_int_equal(ws->accepted, 4);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 3);
    assert_int_equal(((unsigned char *)d->tensors[2])[0], 3);
    /* all in: a rank whose status is a success needs every tensor; one that failed does not */
    send_status_arm(s, "A", 0, 1, 0);
    poll_seen(&f, 8);
    assert_int_equal(bk_coord_all_status(f.c), 1);
    assert_int_equal(bk_coord_all_in(f.c), 0);
    send_tensor(s, "A", 0, "out", 32, 1);
    poll_seen(&f, 9);
    assert_int_equal(bk_coord_all_in(f.c), 1);
    zmq_close(s);
    bk_arm_free(&b, 2, 2);
    bk_arm_free(&f.arm, 2, 2);
    zmq_ctx_term(f.zctx);
    bk_coord_close(f.c);
}

/* ---- status and timing ---- */

static void send_status_routed(void *s, const char *arm, uint32_t rank, int ok, int64_t code,
                               uint64_t routed)
{
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, arm, rank };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_status(&b, &h, ok, code, ok ? "" : "it failed", 8, 1000 + rank,
                                     "ipc=1", routed, &err),
                     BK_OK);
    send_buf(s, &b);
}

static void send_status_arm(void *s, const char *arm, uint32_t rank, int ok, int64_t code)
{
    send_status_routed(s, arm, rank, ok, code, (uint64_t)rank);
}

static void send_status(void *s, uint32_t rank, int ok, int64_t code)
{
    send_status_arm(s, "B", rank, ok, code);
}

/* The arm is done when every rank, the last one included, has sent its status; a failed
 * rank broke the contract only when its code says so. */
static void test_status(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 2, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    assert_int_equal(bk_coord_all_status(f.c), 0);
    send_status(s, 0, 0, BK_ERR_SYSTEM);
    poll_seen(&f, 1);
    assert_int_equal(bk_coord_all_status(f.c), 0); /* rank 1 has not reported */
    const bk_rank_data *d0 = &f.arm.r[0], *d1 = &f.arm.r[1];
    assert_int_equal(d0->status_seen, 1);
    assert_int_equal(d0->status_ok, 0);
    assert_int_equal(d0->broke_contract, 0); /* failed, but not a contract breach */
    assert_string_equal(d0->status_msg, "it failed");
    assert_int_equal(d0->samples_claimed, 8);
    assert_int_equal(d0->t_first_ns, 1000);
    assert_string_equal(d0->settings, "ipc=1");
    assert_true(d0->routed_known && d0->routed == 0); /* the status's routed: its rank's */
    send_status(s, 1, 0, BK_ERR_CONTRACT);
    poll_seen(&f, 2);
    assert_int_equal(bk_coord_all_status(f.c), 1);
    assert_int_equal(d1->broke_contract, 1);
    assert_true(d1->routed_known && d1->routed == 1);
    bk_coord_end_arm(f.c);
    assert_int_equal(bk_coord_stats(f.c)->rejected[BK_REJ_BAD_FIELD], 0);
    assert_int_equal(bk_coord_all_status(f.c), 0); /* no arm running */
    zmq_close(s);
    close_coord(&f);
}

/* A status's free text (a library's error relayed, a path) is kept printable UTF-8, byte for
 * byte: it is judged into the arm's reason, printed and recorded (where a byte that is not
 * UTF-8 left jansson unable to write the process's entry, and an escape sequence or a
 * newline reached the terminal of whoever reads the record) */
static void test_status_text(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "B", 0 };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_status(&b, &h, 0, BK_ERR_SYSTEM, "NCCL failure\nLast error:\x1b[31m "
                                     "caf\xe9 \xc3\xa9", 0, 0, "NCCL_X=\"a\x07\"", 0, &err),
                     BK_OK);
    send_buf(s, &b);
    poll_seen(&f, 1);
    const bk_rank_data *d0 = &f.arm.r[0];
    assert_int_equal(d0->status_seen, 1);
    assert_string_equal(d0->status_msg, "NCCL failure Last error:?[31m caf? \xc3\xa9");
    assert_string_equal(d0->settings, "NCCL_X=\"a?\"");
    zmq_close(s);
    close_coord(&f);
}

/* A status that says a shape past the plan's was routed is not the run's: rejected as a bad
 * field, the rank's status still unseen; one within the plan's shapes is taken. */
static void test_status_routed_past_shapes(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    send_status_routed(s, "B", 0, 1, 0, (uint64_t)1 << NSHAPES);
    poll_seen(&f, 1);
    const bk_rank_data *d0 = &f.arm.r[0];
    assert_int_equal(bk_coord_stats(f.c)->rejected[BK_REJ_BAD_FIELD], 1);
    assert_int_equal(d0->status_seen, 0);
    assert_int_equal(d0->routed_known, 0);
    send_status_routed(s, "B", 0, 1, 0, (uint64_t)1 << (NSHAPES - 1));
    poll_seen(&f, 2);
    assert_int_equal(d0->status_seen, 1);
    assert_true(d0->routed_known && d0->routed == (uint64_t)1 << (NSHAPES - 1));
    bk_coord_end_arm(f.c);
    zmq_close(s);
    close_coord(&f);
}

/* A timed arm is all in when every status came and, for each rank, as many samples as its
 * status says it sent: samples sent again after that status (a connection broke) are still
 * awaited. An audit arm, without samples, awaits the outputs of each rank that reported
 * success (test_tensor_slots sends them), not those of a rank that failed. */
static void test_all_in(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    const uint64_t a[] = { 11, 12, 13, 14 }, b[] = { 21, 22 }, c[] = { 22, 23, 24 };
    send_samples(s, "B", 0, 0, 0, a, 4);
    send_samples(s, "B", 0, 1, 0, b, 2);
    send_status(s, 0, 1, 0); /* says 8 sent; 6 came */
    poll_seen(&f, 3);
    assert_int_equal(bk_coord_all_status(f.c), 1);
    assert_int_equal(bk_coord_all_in(f.c), 0);
    send_samples(s, "B", 0, 1, 1, c, 3); /* sent again: 22 repeated, 23 and 24 new */
    send_status(s, 0, 1, 0);             /* and the status again */
    poll_seen(&f, 5);
    assert_int_equal(bk_coord_all_in(f.c), 1);
    assert_int_equal(f.arm.r[0].samples_got, 8);
    assert_int_equal(bk_coord_stats(f.c)->repeated, 1);
    zmq_close(s);
    close_coord(&f);
    /* an audit rank that succeeded, its one output not come: not all in; one that failed
     * (it sends no outputs): all in */
    for (int ok = 1; ok >= 0; ok--) {
        open_coord(&f, 1, 1);
        s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
        send_status_arm(s, "A", 0, ok, 0);
        poll_seen(&f, 1);
        assert_int_equal(bk_coord_stats(f.c)->accepted, 1);
        assert_int_equal(bk_coord_all_status(f.c), 1);
        assert_int_equal(bk_coord_all_in(f.c), !ok);
        zmq_close(s);
        close_coord(&f);
    }
}

/* t_first_sample_ns is the arm's start to the FIRST batch; later batches leave it. */
static void test_first_sample_time(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, 1, 0);
    f.arm.t_start_ns = bk_now_ns() - 1000;
    void *s = socket_to(&f, ZMQ_PUSH, bk_coord_samples_ep(f.c));
    const uint64_t a[] = { 11, 12 }, b[] = { 13, 14 };
    send_samples(s, "B", 0, 0, 0, a, 2);
    poll_seen(&f, 1);
    const uint64_t first = f.arm.r[0].t_first_sample_ns;
    assert_true(first >= 1000);
    const uint64_t later = bk_now_ns() + 20000000ull; /* 20 ms on, bounded */
    while (bk_now_ns() < later)
        bk_coord_poll(f.c, 5);
    send_samples(s, "B", 0, 0, 2, b, 2);
    poll_seen(&f, 2);
    assert_int_equal(f.arm.r[0].samples_got, 4);
    assert_true(f.arm.r[0].t_first_sample_ns == first);
    zmq_close(s);
    close_coord(&f);
}

/* ---- names ---- */

/* A round's name as its header documents: "B" for round 0, then "#" and the 1-based round
 * ("B#2" for round 1, "B'#16" for the 16th); an index outside the arms is "?". */
static void test_round_names(void **state)
{
    (void)state;
    char buf[BK_ARM_LEN];
    assert_string_equal(bk_arm_round_name(BK_ARM_IDX_B, 0, buf), "B");
    assert_string_equal(bk_arm_round_name(BK_ARM_IDX_B, 1, buf), "B#2");
    assert_string_equal(bk_arm_round_name(BK_ARM_IDX_BP, 15, buf), "B'#16");
    assert_string_equal(bk_arm_round_name(BK_ARM_IDX_A, 0, buf), "A");
    assert_string_equal(bk_arm_round_name(-1, 0, buf), "?");
    assert_string_equal(bk_arm_round_name(BK_ARM_NAMES, 0, buf), "?");
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
    /* more outputs than the target has is refused too (an output would never arrive) */
    bk_err e3 = { 0 };
    assert_int_equal(bk_coord_open(&c, RUN, 1, 1, 3, &e3), BK_OK);
    assert_int_equal(bk_coord_set_outputs(c, tg, &shape, "bf16", &e3), BK_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "has 2 output(s), opened for 3"));
    bk_coord_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_repeats),
        cmocka_unit_test(test_audit_samples),
        cmocka_unit_test(test_rendezvous),
        cmocka_unit_test(test_rendezvous_again),
        cmocka_unit_test(test_rendezvous_blob_max),
        cmocka_unit_test(test_outputs_count),
        cmocka_unit_test(test_tensor_slots),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_status_text),
        cmocka_unit_test(test_status_routed_past_shapes),
        cmocka_unit_test(test_all_in),
        cmocka_unit_test(test_first_sample_time),
        cmocka_unit_test(test_round_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
