/* test_engine_cpu_shape.c - the cpu backend's work on one shape, through its table with a
 * stand-in target and variant: every timed iteration gives exactly one sample, pushed with
 * its iteration index (shape 0's very first alone, then batches of 256, then the rest); the
 * variant sees warm-up and checked calls as iteration -1 and timed ones as 0..iters-1; the
 * arm's start time is taken at the first timed iteration, after the warm-up; a variant lazy
 * when timed is refused; an audit returns the outputs as the call left them (unwritten: the
 * bf16 NaN poison) on this rank's own inputs, checks inputs only when asked; each lane rank
 * is pinned to its own core. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/engine.h"

#define TIMEOUT_S 10.0
#define LOG_MAX 1024

static char RUN[64]; /* test-cpu-shape-PID: no clash with a crashed earlier run */

/* ---- A stand-in target: input x, output y, one bf16 element per token x hidden ---- */

static size_t st_elems(const bk_shape *s, int world, int idx)
{
    (void)world;
    (void)idx;
    return (size_t)(s->tokens * s->hidden);
}

static size_t st_elem_bytes(int idx)
{
    (void)idx;
    return 2;
}

/* Finite bf16 values that depend on seed, shape and rank (never the poison 0xFFFF). */
static uint16_t st_value(uint64_t seed, int shape_index, int rank, size_t i)
{
    return (uint16_t)(0x3F80 + ((seed * 7 + (uint64_t)shape_index * 13 + (uint64_t)rank * 29 +
                                 i) % 64));
}

static void st_init(bk_tensor *t, const bk_shape *s, uint64_t seed, int shape_index, int rank,
                    int world)
{
    (void)s;
    (void)world;
    uint16_t *x = t[0].data;
    for (size_t i = 0; i < t[0].elems; i++)
        x[i] = st_value(seed, shape_index, rank, i);
}

static const bk_target k_target = {
    .name = "test.copy",
    .ntensors = 2,
    .tensor_names = { "x", "y" },
    .tensor_is_output = { 0, 1 },
    .tensor_elems = st_elems,
    .tensor_elem_bytes = st_elem_bytes,
    .init_inputs = st_init,
};

/* ---- A stand-in variant: y = x, as the mode says; every call logged ---- */

enum { MODE_COPY, MODE_LAZY_TIMED, MODE_NOTHING, MODE_MUTATE_INPUT };

typedef struct call_log {
    int mode;
    int n;
    long iter[LOG_MAX];
    uint64_t start_ns[LOG_MAX];
} call_log;

static bk_status sv_run(void *state, bk_call *call, bk_err *err)
{
    call_log *log = state;
    (void)err;
    if (log->n < LOG_MAX) {
        log->iter[log->n] = call->iter;
        log->start_ns[log->n] = bk_now_ns();
    }
    log->n++;
    const uint16_t *x = call->t[0].data;
    uint16_t *y = call->t[1].data;
    if (log->mode == MODE_NOTHING || (log->mode == MODE_LAZY_TIMED && call->iter >= 0))
        return BK_OK;
    memcpy(y, x, call->t[1].elems * 2);
    if (log->mode == MODE_MUTATE_INPUT)
        ((uint16_t *)call->t[0].data)[0] ^= 1;
    return BK_OK;
}

static const bk_variant k_variant = { .name = "stand_in", .target = "test.copy", .run = sv_run };

/* ---- Samples as the engine would push them ---- */

typedef struct emit_log {
    int n;
    uint32_t shape[LOG_MAX];
    uint64_t first[LOG_MAX];
    size_t count[LOG_MAX];
} emit_log;

static bk_status collect(void *user, uint32_t shape, uint64_t first, const uint64_t *ns,
                         size_t n, bk_err *err)
{
    emit_log *log = user;
    (void)ns;
    (void)err;
    if (log->n < LOG_MAX) {
        log->shape[log->n] = shape;
        log->first[log->n] = first;
        log->count[log->n] = n;
    }
    log->n++;
    return BK_OK;
}

/* ---- A lane of `world` ranks in this process, one thread a rank ---- */

typedef struct lane {
    int world;
    const char *arm;
    unsigned char blobs[2][BK_BLOB_MAX];
    size_t lens[2];
    pthread_barrier_t met;
} lane;

typedef struct rank_arg {
    lane *lane;
    int rank;
    bk_shape shape;
    bk_shape_job job;
    call_log calls;
    emit_log emits;
    uint64_t t_first;
    int audit;                /* 0: time_shape; 1: audit_shape */
    void *outs[1];
    size_t bytes[1];
    bk_status st;
    bk_err err;
    cpu_set_t pinned;         /* this thread's CPUs after open */
} rank_arg;

static void *rank_main(void *p)
{
    rank_arg *a = p;
    lane *l = a->lane;
    bk_backend_ctx *ctx = NULL;
    bk_err *err = &a->err;
    bk_status st = BK_OK;
    bk_err_clear(err);
    BK_TRY(bk_engine_cpu.open(&ctx, a->rank, l->world, -1, err));
    sched_getaffinity(0, sizeof a->pinned, &a->pinned);
    BK_TRY(bk_engine_cpu.comm_create(ctx, RUN, l->arm, 4096, l->blobs[a->rank],
                                     &l->lens[a->rank], err));
    pthread_barrier_wait(&l->met); /* every blob written: the rendezvous */
    BK_TRY(bk_engine_cpu.comm_connect(ctx, l->blobs, l->lens, TIMEOUT_S, err));
    a->job.target = &k_target;
    a->job.variant = &k_variant;
    a->job.vstate = &a->calls;
    a->job.shape = &a->shape;
    a->job.rank = a->rank;
    a->job.world = l->world;
    a->job.timeout_s = TIMEOUT_S;
    a->job.emit = collect;
    a->job.emit_user = &a->emits;
    a->job.t_first_ns = &a->t_first;
    a->job.rtol = 1e-2;
    a->job.atol = 1e-3;
    if (a->audit)
        st = bk_engine_cpu.audit_shape(ctx, &a->job, a->outs, a->bytes, err);
    else
        st = bk_engine_cpu.time_shape(ctx, &a->job, err);
out:
    bk_engine_cpu.close(ctx);
    a->st = st;
    return NULL;
}

/* Run every rank of `args` (world of them) on arm `arm`, each on its own thread. The test's
 * own CPU set is restored after (open pins the calling thread). */
static void run_lane(rank_arg *args, int world, const char *arm)
{
    lane l;
    memset(&l, 0, sizeof l);
    l.world = world;
    l.arm = arm;
    assert_int_equal(pthread_barrier_init(&l.met, NULL, (unsigned)world), 0);
    pthread_t th[2];
    for (int r = 0; r < world; r++) {
        args[r].lane = &l;
        args[r].rank = r;
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < world; r++)
        assert_int_equal(pthread_join(th[r], NULL), 0);
    pthread_barrier_destroy(&l.met);
}

static rank_arg *new_args(int world, int tokens, int hidden, int mode)
{
    rank_arg *a = calloc((size_t)world, sizeof *a);
    assert_non_null(a);
    for (int r = 0; r < world; r++) {
        a[r].shape.tokens = tokens;
        a[r].shape.hidden = hidden;
        a[r].job.seed = 5;
        a[r].calls.mode = mode;
    }
    return a;
}

/* ---- Timing ---- */

/* 300 timed iterations after 3 of warm-up: shape 0's first sample goes alone (the
 * coordinator sees the arm start), then 256, then the last 43; every one numbered. The
 * variant sees -1 three times, 0..299, then -1 for the untimed check call. */
static void test_every_timed_iteration_one_sample(void **state)
{
    (void)state;
    rank_arg *a = new_args(1, 2, 8, MODE_COPY);
    a->job.warmup = 3;
    a->job.iters = 300;
    run_lane(a, 1, "T0");
    if (a->st != BK_OK)
        fail_msg("time_shape: %s", a->err.msg);
    assert_int_equal(a->emits.n, 3);
    assert_int_equal(a->emits.first[0], 0);
    assert_int_equal(a->emits.count[0], 1);
    assert_int_equal(a->emits.first[1], 1);
    assert_int_equal(a->emits.count[1], 256);
    assert_int_equal(a->emits.first[2], 257);
    assert_int_equal(a->emits.count[2], 43);
    for (int k = 0; k < 3; k++)
        assert_int_equal(a->emits.shape[k], 0);
    assert_int_equal(a->calls.n, 3 + 300 + 1);
    for (int i = 0; i < a->calls.n; i++) {
        long want = i < 3 ? -1 : i < 303 ? i - 3 : -1;
        if (a->calls.iter[i] != want)
            fail_msg("call %d ran as iteration %ld, want %ld", i, a->calls.iter[i], want);
    }
    free(a);
}

/* A later shape's samples need no lone first: batches of 256 from iteration 0; the
 * warm-up count does not shift the numbering. */
static void test_later_shape_batches(void **state)
{
    (void)state;
    rank_arg *a = new_args(1, 1, 4, MODE_COPY);
    a->job.shape_index = 1;
    a->job.warmup = 0;
    a->job.iters = 257;
    run_lane(a, 1, "T1");
    if (a->st != BK_OK)
        fail_msg("time_shape: %s", a->err.msg);
    assert_int_equal(a->emits.n, 2);
    assert_int_equal(a->emits.shape[0], 1);
    assert_int_equal(a->emits.first[0], 0);
    assert_int_equal(a->emits.count[0], 256);
    assert_int_equal(a->emits.first[1], 256);
    assert_int_equal(a->emits.count[1], 1);
    assert_int_equal(a->calls.iter[0], 0);
    assert_int_equal(a->calls.iter[256], 256);
    free(a);
}

/* The arm's start is the first timed iteration's: after every warm-up call began. */
static void test_first_timed_time_after_warmup(void **state)
{
    (void)state;
    rank_arg *a = new_args(1, 1, 4, MODE_COPY);
    a->job.warmup = 5;
    a->job.iters = 4;
    run_lane(a, 1, "T2");
    if (a->st != BK_OK)
        fail_msg("time_shape: %s", a->err.msg);
    assert_true(a->t_first > a->calls.start_ns[4]);   /* the last warm-up call's start */
    assert_true(a->t_first <= a->calls.start_ns[5]);  /* the first timed call's */
    free(a);
}

/* A variant that writes its outputs only when untimed (warm-up and the checked call) is
 * refused: the last timed call's outputs, poisoned before it, are NaN. */
static void test_lazy_when_timed_refused(void **state)
{
    (void)state;
    rank_arg *a = new_args(1, 2, 8, MODE_LAZY_TIMED);
    a->job.warmup = 2;
    a->job.iters = 3;
    run_lane(a, 1, "T3");
    assert_int_equal(a->st, BK_ERR_CONTRACT);
    assert_non_null(strstr(a->err.msg, "stand_in: rank 0 shape 0: its last timed call left "
                                        "output 'y' element 0 unwritten"));
    free(a);
}

/* ---- Audit ---- */

/* An output the call does not write comes back as the poison (every byte 0xFF: bf16 NaN),
 * with its size in bytes. */
static void test_audit_unwritten_output_is_poison(void **state)
{
    (void)state;
    rank_arg *a = new_args(1, 3, 5, MODE_NOTHING);
    a->audit = 1;
    run_lane(a, 1, "A0");
    if (a->st != BK_OK)
        fail_msg("audit_shape: %s", a->err.msg);
    assert_int_equal(a->bytes[0], 3 * 5 * 2);
    const unsigned char *y = a->outs[0];
    for (size_t i = 0; i < a->bytes[0]; i++)
        if (y[i] != 0xFF)
            fail_msg("byte %zu of the unwritten output is 0x%02x, not the poison", i, y[i]);
    free(a->outs[0]);
    free(a);
}

/* Each rank of a lane of 2 computes on its own seeded inputs (y = x here). */
static void test_audit_own_rank_inputs(void **state)
{
    (void)state;
    rank_arg *a = new_args(2, 2, 6, MODE_COPY);
    for (int r = 0; r < 2; r++) {
        a[r].audit = 1;
        a[r].job.shape_index = 1;
    }
    run_lane(a, 2, "A1");
    for (int r = 0; r < 2; r++) {
        if (a[r].st != BK_OK)
            fail_msg("rank %d: audit_shape: %s", r, a[r].err.msg);
        assert_int_equal(a[r].bytes[0], 2 * 6 * 2);
        const uint16_t *y = a[r].outs[0];
        for (size_t i = 0; i < 12; i++)
            if (y[i] != st_value(5, 1, r, i))
                fail_msg("rank %d element %zu: 0x%04x, want 0x%04x (its own inputs)", r, i,
                         y[i], st_value(5, 1, r, i));
        free(a[r].outs[0]);
    }
    free(a);
}

/* A call that changes an input is refused when the job asks for the check, and only then. */
static void test_audit_input_check_when_asked(void **state)
{
    (void)state;
    for (int check = 0; check <= 1; check++) {
        rank_arg *a = new_args(1, 1, 4, MODE_MUTATE_INPUT);
        a->audit = 1;
        a->job.check_inputs = check;
        run_lane(a, 1, check ? "A3" : "A2");
        if (!check && a->st != BK_OK)
            fail_msg("unchecked audit refused: %s", a->err.msg);
        if (check) {
            assert_int_equal(a->st, BK_ERR_CONTRACT);
            assert_non_null(strstr(a->err.msg, "stand_in"));
        }
        free(a->outs[0]);
        free(a);
    }
}

/* ---- Placement ---- */

/* Lane rank r runs on the (r mod n)-th CPU it may use: ranks 0 and 1 on two different
 * CPUs, each alone. */
static void test_ranks_pinned_apart(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    if (CPU_COUNT(&allowed) < 2) { /* one CPU: nothing to tell apart */
        printf("SKIP test_ranks_pinned_apart: this process may use %d CPU(s), 2 needed\n",
               CPU_COUNT(&allowed));
        skip();
    }
    int cpu[2] = { -1, -1 };
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpu[k++] = c;
    rank_arg *a = new_args(2, 1, 4, MODE_COPY);
    a[0].job.iters = a[1].job.iters = 1;
    run_lane(a, 2, "P");
    for (int r = 0; r < 2; r++) {
        if (a[r].st != BK_OK)
            fail_msg("rank %d: %s", r, a[r].err.msg);
        assert_int_equal(CPU_COUNT(&a[r].pinned), 1);
        if (!CPU_ISSET(cpu[r], &a[r].pinned))
            fail_msg("lane rank %d not on CPU %d, its (rank mod n)-th allowed", r, cpu[r]);
    }
    free(a);
}

int main(void)
{
    snprintf(RUN, sizeof RUN, "test-cpu-shape-%d", (int)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_timed_iteration_one_sample),
        cmocka_unit_test(test_later_shape_batches),
        cmocka_unit_test(test_first_timed_time_after_warmup),
        cmocka_unit_test(test_lazy_when_timed_refused),
        cmocka_unit_test(test_audit_unwritten_output_is_poison),
        cmocka_unit_test(test_audit_own_rank_inputs),
        cmocka_unit_test(test_audit_input_check_when_asked),
        cmocka_unit_test(test_ranks_pinned_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
