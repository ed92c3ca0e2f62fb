/* coord_fixture.h - what the coordinator tests share (test_transport.c,
 * test_coord_batches.c): a real coordinator with one arm begun on `world` lane ranks, and
 * a ZeroMQ context for the test's own sockets. */
#ifndef BK_TEST_COORD_FIXTURE_H
#define BK_TEST_COORD_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "runner/coordinator.h"
#include "runner/transport.h"
#include "runner/wire.h"

typedef struct coord_fixture {
    bk_coord *c;
    bk_arm_run arm;
    void *zctx;
    int nshapes;
} coord_fixture;

/* Open run `run` (nshapes, iters, one output; transport t, NULL: ipc) and begin arm B, or
 * the audit A when `audit`, on `world` ranks. */
static inline void coord_fixture_open(coord_fixture *f, const char *run, int nshapes, int iters,
                                      const bk_transport *t, int world, int audit)
{
    bk_err err = { 0 };
    memset(f, 0, sizeof *f);
    f->nshapes = nshapes;
    assert_int_equal(bk_coord_open_ex(&f->c, run, nshapes, iters, 1, t, &err), BK_OK);
    f->arm.idx = audit ? BK_ARM_IDX_A : BK_ARM_IDX_B;
    f->arm.name = audit ? "A" : "B";
    f->arm.audit = audit;
    f->arm.world = world;
    f->arm.r = calloc((size_t)world, sizeof *f->arm.r);
    f->arm.lane = calloc((size_t)world, sizeof *f->arm.lane);
    assert_non_null(f->arm.r);
    assert_int_equal(bk_coord_begin_arm(f->c, &f->arm, &err), BK_OK);
    f->zctx = zmq_ctx_new();
    assert_non_null(f->zctx);
}

static inline void coord_fixture_close(coord_fixture *f)
{
    zmq_ctx_term(f->zctx);
    bk_arm_free(&f->arm, f->nshapes, 1);
    bk_coord_close(f->c);
}

/* The next message on sock into buf (n bytes, more is a failure), decoded against x into
 * *m (its pointers into dec's storage); 0, or -1 when none came within the socket's
 * receive time-out. */
static inline int coord_fixture_recv(void *sock, bk_wire_decoder *dec, const bk_wire_expect *x,
                                     void *buf, size_t n, bk_msg *m)
{
    const int got = zmq_recv(sock, buf, n, 0);
    if (got < 0)
        return -1;
    assert_true(got > 0 && (size_t)got < n);
    bk_err err = { 0 };
    assert_int_equal(bk_wire_decode(dec, buf, (size_t)got, x, m, NULL, NULL, &err), BK_OK);
    return 0;
}

#endif
