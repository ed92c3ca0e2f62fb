/* test_moe_cpu.c - moe.fused_experts_reduce on the cpu backend: both variants against the
 * float64 reference at world 1, 2 and 3 (forked processes over POSIX shared memory), on
 * fresh random seeds, with poisoned outputs; the same bits on every rank; inputs left
 * alone; seeded weights independent of the world size; shape and input errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"
#include "shm_fixture.h"

#define MAXW SHM_FIXTURE_MAXW /* lane ranks at most */
#define MAX_OUT (64 * 256)
#define CALLS 3 /* calls per rank: scratch and peer memory are reused */

/* What children tell the parent (a MAP_SHARED page made before fork). */
typedef struct report {
    int code[MAXW];
    char msg[MAXW][512];
    double max_err[MAXW];
    uint16_t out[MAXW][MAX_OUT];
} report;

static report *g_rep;
static int g_counter;
static uint64_t g_seed;
static int g_late; /* ms the lane's last rank sleeps before each call */

/* a late test's teardown: a failed one leaves no late rank to the tests after it */
static int on_time(void **state)
{
    (void)state;
    g_late = 0;
    return 0;
}

/* |out - ref| <= 2^-8 (1 + |ref|): the bound of kernels/moe.c with room to spare
 * for the intermediate roundings (measured errors are a few times smaller). */
static int within(double got, double ref) { return fabs(got - ref) <= 0x1p-8 * (1.0 + fabs(ref)); }

/* ---- one rank ---- */

typedef struct tensors {
    bk_tensor t[BK_MOE_NT];
    void *copy[BK_MOE_NT];
} tensors;

static int make_tensors(tensors *ts, const bk_shape *s, uint64_t seed, int rank, int world)
{
    const bk_target *tg = &bk__moe_target;
    memset(ts, 0, sizeof *ts);
    for (int i = 0; i < BK_MOE_NT; i++) {
        bk_tensor *t = &ts->t[i];
        t->name = tg->tensor_names[i];
        t->output = tg->tensor_is_output[i];
        t->elems = tg->tensor_elems(s, world, i);
        t->elem_bytes = tg->tensor_elem_bytes(i);
        t->data = malloc(t->elems * t->elem_bytes + 1);
        if (!t->data)
            return -1;
        memset(t->data, 0xFF, t->elems * t->elem_bytes); /* outputs stay poisoned */
    }
    tg->init_inputs(ts->t, s, seed, 0, rank, world);
    for (int i = 0; i < BK_MOE_NT; i++) {
        size_t b = ts->t[i].elems * ts->t[i].elem_bytes;
        ts->copy[i] = malloc(b + 1);
        if (!ts->copy[i])
            return -1;
        memcpy(ts->copy[i], ts->t[i].data, b);
    }
    return 0;
}

static void free_tensors(tensors *ts)
{
    for (int i = 0; i < BK_MOE_NT; i++) {
        free(ts->t[i].data);
        free(ts->copy[i]);
    }
}

/* A lane id of this test process not used before */
static void new_rid(char rid[64])
{
    snprintf(rid, 64, "test-moe-%d-%d", (int)getpid(), g_counter++);
}

/* Run CALLS calls of the variant on this rank (the lane's last rank g_late ms late to
 * each), each on poisoned outputs and checked against the reference (a first call can be
 * wrong where a later one on the same inputs is right: a peer's stale memory then holds
 * the same values), and the inputs against their copies; 0 when all is well. */
static int child(const char *variant, const bk_shape *s, uint64_t seed, const char *rid, int rank,
                 int world)
{
    const bk_variant *v = bk_catalog_variant(BK_MOE_TARGET, variant);
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    void *state = NULL;
    double *ref = NULL;
    tensors ts;
    json_t *params = json_object();
    int rc = 1;
    memset(&ts, 0, sizeof ts);
    if (!v || !params || make_tensors(&ts, s, seed, rank, world) != 0) {
        snprintf(err.msg, sizeof err.msg, "setup failed");
        goto out;
    }
    if (!(shm = shm_lane_seg(rid, rank, world, bk__moe_target.peer_bytes(s, world), 10.0,
                             &err)) ||
        v->create(params, BK_BACKEND_CPU, rank, world, &state, &err) != BK_OK)
        goto out;
    bk_call call = { .shape = s, .iter = -1, .rank = rank, .world = world, .t = ts.t,
                     .nt = BK_MOE_NT, .comm = shm, .timeout_s = 10.0 };
    if (bk__moe_target.reference(s, seed, 0, rank, world, &ref, &err) != BK_OK)
        goto out;
    const uint16_t *o = ts.t[BK_MOE_OUT].data;
    size_t n = ts.t[BK_MOE_OUT].elems;
    double worst = 0.0;
    for (int c = 0; c < CALLS; c++) {
        memset(ts.t[BK_MOE_OUT].data, 0xFF, n * 2);
        if (g_late && rank == world - 1)
            nanosleep(&(struct timespec){ .tv_nsec = g_late * 1000000L }, NULL);
        if (v->run(state, &call, &err) != BK_OK)
            goto out;
        for (size_t i = 0; i < n; i++) {
            double got = bk_bf16_to_f32(o[i]);
            if (bk_bf16_is_nan(o[i]) || !within(got, ref[i])) {
                snprintf(err.msg, sizeof err.msg, "call %d: out[%zu] = %g, reference %.9g "
                         "(seed %llu)", c + 1, i, got, ref[i], (unsigned long long)seed);
                goto out;
            }
            worst = fmax(worst, fabs(got - ref[i]));
        }
    }
    for (int i = 0; i < BK_MOE_NT; i++)
        if (!ts.t[i].output &&
            memcmp(ts.copy[i], ts.t[i].data, ts.t[i].elems * ts.t[i].elem_bytes) != 0) {
            snprintf(err.msg, sizeof err.msg, "input %s was modified", ts.t[i].name);
            goto out;
        }
    g_rep->max_err[rank] = worst;
    memcpy(g_rep->out[rank], o, (n < MAX_OUT ? n : MAX_OUT) * 2);
    rc = 0;
out:
    if (rc)
        snprintf(g_rep->msg[rank], sizeof g_rep->msg[rank], "rank %d/%d %s: %.400s", rank, world,
                 variant, err.msg);
    if (v && state)
        v->destroy(state);
    bk_shm_destroy(shm);
    free(ref);
    free_tensors(&ts);
    json_decref(params);
    return rc;
}

/* Fork `world` ranks of the variant on the shape; assert every rank passed
 * and all ranks wrote the same bits. */
static void run_lane(const char *variant, bk_shape s, int world, uint64_t seed)
{
    char rid[64];
    pid_t pids[MAXW];
    new_rid(rid);
    memset(g_rep, 0, sizeof *g_rep);
    s.weight = 1.0;
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(child(variant, &s, seed, rid, r, world));
    }
    for (int r = 0; r < world; r++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            fail_msg("%s", g_rep->msg[r][0] ? g_rep->msg[r] : "child died");
    }
    size_t n = (size_t)(s.tokens * s.hidden);
    printf("  %s world %d T %lld H %lld E %lld K %lld I %lld: max |out - ref| %.3g\n", variant,
           world, (long long)s.tokens, (long long)s.hidden, (long long)s.experts,
           (long long)s.topk, (long long)s.intermediate, g_rep->max_err[0]);
    for (int r = 1; r < world; r++)
        assert_memory_equal(g_rep->out[0], g_rep->out[r], n * 2);
}

/* ---- tests ---- */

static const bk_shape k_shapes[] = {
    { .tokens = 1, .hidden = 64, .experts = 4, .topk = 2, .intermediate = 32 },
    { .tokens = 7, .hidden = 96, .experts = 8, .topk = 2, .intermediate = 48 },
    { .tokens = 16, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 64 },
    { .tokens = 12, .hidden = 72, .experts = 5, .topk = 3, .intermediate = 40 },
    /* no multiple of 8: the dot products' tails */
    { .tokens = 5, .hidden = 13, .experts = 3, .topk = 2, .intermediate = 11 },
};
#define NSHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

static void lanes_of(const char *variant, int world)
{
    for (int i = 0; i < NSHAPES; i++)
        run_lane(variant, k_shapes[i], world, g_seed + (uint64_t)i);
}

static void test_serial_world1(void **st) { (void)st; lanes_of("moe_serial", 1); }
static void test_serial_world2(void **st) { (void)st; lanes_of("moe_serial", 2); }
static void test_serial_world3(void **st) { (void)st; lanes_of("moe_serial", 3); }
static void test_fused_world1(void **st) { (void)st; lanes_of("moe_fused_combine", 1); }
static void test_fused_world2(void **st) { (void)st; lanes_of("moe_fused_combine", 2); }
static void test_fused_world3(void **st) { (void)st; lanes_of("moe_fused_combine", 3); }

/* The last rank 20 ms late to every call: the others wait for what it publishes (each
 * variant's barriers) rather than read its memory of the call before */
static void late_lanes(const char *variant, int world)
{
    g_late = 20; /* on_time, the test's teardown, sets it back */
    run_lane(variant, k_shapes[1], world, g_seed + 100);
    run_lane(variant, k_shapes[3], world, g_seed + 101);
}
static void test_serial_late_rank(void **st) { (void)st; late_lanes("moe_serial", 3); }
static void test_fused_late_rank(void **st) { (void)st; late_lanes("moe_fused_combine", 2); }

/* Expert e's weights are the same bits whatever rank and world size hold it. */
static void test_weights_follow_expert(void **st)
{
    (void)st;
    bk_shape s = { .tokens = 3, .hidden = 32, .experts = 6, .topk = 2, .intermediate = 16 };
    tensors one, two;
    assert_int_equal(make_tensors(&one, &s, g_seed, 0, 1), 0);
    assert_int_equal(make_tensors(&two, &s, g_seed, 1, 4), 0); /* slot 1 = expert 5 */
    size_t n1 = 2 * 16 * 32, n2 = 32 * 16;
    const uint16_t *a = one.t[BK_MOE_W1].data, *b = two.t[BK_MOE_W1].data;
    assert_memory_equal(a + 5 * n1, b + 1 * n1, n1 * 2);
    assert_memory_equal(a + 1 * n1, b, n1 * 2);
    a = one.t[BK_MOE_W2].data;
    b = two.t[BK_MOE_W2].data;
    assert_memory_equal(a + 5 * n2, b + 1 * n2, n2 * 2);
    /* x, ids, weights and residual do not depend on the rank */
    const int same[] = { BK_MOE_X, BK_MOE_IDS, BK_MOE_W, BK_MOE_RESIDUAL };
    for (int i = 0; i < 4; i++)
        assert_memory_equal(one.t[same[i]].data, two.t[same[i]].data,
                            one.t[same[i]].elems * one.t[same[i]].elem_bytes);
    free_tensors(&one);
    free_tensors(&two);
}

/* Router ids are distinct experts in range; weights are positive and sum to 1. */
static void test_routing_inputs(void **st)
{
    (void)st;
    bk_shape s = { .tokens = 64, .hidden = 8, .experts = 9, .topk = 4, .intermediate = 8 };
    tensors ts;
    assert_int_equal(make_tensors(&ts, &s, g_seed, 0, 1), 0);
    const int32_t *ids = ts.t[BK_MOE_IDS].data;
    const float *w = ts.t[BK_MOE_W].data;
    for (int t = 0; t < 64; t++) {
        float sum = 0.0f;
        for (int k = 0; k < 4; k++) {
            assert_in_range(ids[t * 4 + k], 0, 8);
            for (int j = 0; j < k; j++)
                assert_int_not_equal(ids[t * 4 + k], ids[t * 4 + j]);
            assert_true(w[t * 4 + k] > 0.0f);
            sum += w[t * 4 + k];
        }
        assert_true(fabsf(sum - 1.0f) < 1e-6f);
    }
    free_tensors(&ts);
}

static void test_check_shape(void **st)
{
    (void)st;
    char why[256];
    bk_shape ok = { .tokens = 4, .hidden = 64, .experts = 8, .topk = 2, .intermediate = 32 };
    assert_int_equal(bk__moe_target.check_shape(&ok, 2, why, sizeof why), BK_OK);
    bk_shape no_moe = { .tokens = 4, .hidden = 64 };
    assert_int_equal(bk__moe_target.check_shape(&no_moe, 2, why, sizeof why), BK_ERR_INPUT);
    assert_non_null(strstr(why, "experts, topk and intermediate >= 1"));
    bk_shape big_k = ok;
    big_k.topk = 9;
    assert_int_equal(bk__moe_target.check_shape(&big_k, 2, why, sizeof why), BK_ERR_INPUT);
    assert_non_null(strstr(why, "topk 9 > experts 8"));
}

static void test_catalog(void **st)
{
    (void)st;
    assert_ptr_equal(bk_catalog_target(BK_MOE_TARGET), &bk__moe_target);
    const bk_variant *f = bk_catalog_variant(BK_MOE_TARGET, "moe_fused_combine");
    assert_non_null(bk_catalog_variant(BK_MOE_TARGET, "moe_serial"));
    assert_non_null(f);
    char why[128];
    bk_shape s = { .tokens = 4096, .hidden = 64, .experts = 8, .topk = 2, .intermediate = 32 };
    assert_true(bk_domain_contains(&f->domain, &s, 2, "bf16", BK_BACKEND_CPU, 1, why, sizeof why));
    s.tokens = 4097;
    assert_false(bk_domain_contains(&f->domain, &s, 2, "bf16", BK_BACKEND_CPU, 1, why, sizeof why));
}

/* Lane rank `rank` of `world` in the test process: its segment of `bytes` in lane `rid`
 * and the variant's state, one state (so one set of scratch buffers) across the calls. */
typedef struct solo {
    const bk_variant *v;
    bk_shm *shm;
    void *state;
    json_t *params;
} solo;

static void side_open(solo *so, const char *variant, const char *rid, int rank, int world,
                      size_t bytes)
{
    bk_err err = { 0 };
    memset(so, 0, sizeof *so);
    so->v = bk_catalog_variant(BK_MOE_TARGET, variant);
    so->params = json_object();
    assert_non_null(so->v);
    if (!(so->shm = shm_lane_seg(rid, rank, world, bytes, 10.0, &err)))
        fail_msg("%s", err.msg);
    assert_int_equal(so->v->create(so->params, BK_BACKEND_CPU, rank, world, &so->state, &err),
                     BK_OK);
}

/* One rank at world 1, its segment sized for the largest of `shapes` */
static void solo_open(solo *so, const char *variant, const bk_shape *shapes, int nshapes)
{
    char rid[64];
    size_t bytes = 0;
    for (int i = 0; i < nshapes; i++) {
        size_t b = bk__moe_target.peer_bytes(&shapes[i], 1);
        bytes = b > bytes ? b : bytes;
    }
    new_rid(rid);
    side_open(so, variant, rid, 0, 1, bytes);
}

static void solo_close(solo *so)
{
    so->v->destroy(so->state);
    bk_shm_destroy(so->shm);
    json_decref(so->params);
}

/* An expert id out of range is refused with its position, before anything runs. */
static void test_bad_ids(void **st)
{
    (void)st;
    bk_shape s = { .tokens = 2, .hidden = 16, .experts = 4, .topk = 2, .intermediate = 8 };
    tensors ts;
    bk_err err = { 0 };
    solo so;
    solo_open(&so, "moe_fused_combine", &s, 1);
    assert_int_equal(make_tensors(&ts, &s, g_seed, 0, 1), 0);
    ((int32_t *)ts.t[BK_MOE_IDS].data)[3] = 4;
    bk_call call = { .shape = &s, .iter = -1, .rank = 0, .world = 1, .t = ts.t,
                     .nt = BK_MOE_NT, .comm = so.shm, .timeout_s = 5.0 };
    assert_int_equal(so.v->run(so.state, &call, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "topk_ids[3] = 4"));
    solo_close(&so);
    free_tensors(&ts);
}

/* One call of the shape on fresh inputs; BK_OK only when the output is the reference's
 * within the plans' rtol = atol = 1e-2 (these shapes reach past `within`'s tighter bound
 * in the tail: 4097 x 8 gave 1.08 x 2^-8 (1 + |ref|) once) */
static bk_status solo_call(solo *so, const bk_shape *s, bk_err *err)
{
    tensors ts;
    double *ref = NULL;
    assert_int_equal(make_tensors(&ts, s, g_seed, 0, 1), 0);
    bk_call call = { .shape = s, .iter = -1, .rank = 0, .world = 1, .t = ts.t,
                     .nt = BK_MOE_NT, .comm = so->shm, .timeout_s = 5.0 };
    bk_status st = so->v->run(so->state, &call, err);
    if (st == BK_OK) {
        assert_int_equal(bk__moe_target.reference(s, g_seed, 0, 0, 1, &ref, err), BK_OK);
        const uint16_t *o = ts.t[BK_MOE_OUT].data;
        for (size_t i = 0; i < ts.t[BK_MOE_OUT].elems; i++)
            if (bk_bf16_is_nan(o[i]) ||
                !(fabs(bk_bf16_to_f32(o[i]) - ref[i]) <= 1e-2 * (1.0 + fabs(ref[i]))))
                fail_msg("%s T %lld H %lld: out[%zu] = %g, reference %.9g", so->v->name,
                         (long long)s->tokens, (long long)s->hidden, i, bk_bf16_to_f32(o[i]),
                         ref[i]);
        free(ref);
    }
    free_tensors(&ts);
    return st;
}

/* One state serves a small shape, then larger ones: every scratch buffer grows to fit */
static void test_scratch_grows(void **st)
{
    (void)st;
    const bk_shape s[] = {
        { .tokens = 2, .hidden = 16, .experts = 2, .topk = 1, .intermediate = 8, .weight = 1 },
        { .tokens = 40, .hidden = 96, .experts = 6, .topk = 3, .intermediate = 80,
          .weight = 1 },
        { .tokens = 64, .hidden = 200, .experts = 2, .topk = 2, .intermediate = 24,
          .weight = 1 },
    };
    const char *vs[] = { "moe_serial", "moe_fused_combine" };
    for (int i = 0; i < 2; i++) {
        solo so;
        bk_err err = { 0 };
        solo_open(&so, vs[i], s, 3);
        for (int k = 0; k < 3; k++)
            if (solo_call(&so, &s[k], &err) != BK_OK)
                fail_msg("%s shape %d: %s", vs[i], k, err.msg);
        solo_close(&so);
    }
}

/* moe_fused_combine refuses a call past its domain's 4096 tokens, naming it and saying
 * where such a call goes; moe_serial serves it */
static void test_fused_refuses_outside_domain(void **st)
{
    (void)st;
    const bk_shape s = { .tokens = 4097, .hidden = 8, .experts = 2, .topk = 1,
                         .intermediate = 8, .weight = 1 };
    solo so;
    bk_err err = { 0 };
    solo_open(&so, "moe_fused_combine", &s, 1);
    assert_int_equal(solo_call(&so, &s, &err), BK_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "moe_fused_combine: call outside the domain"));
    assert_non_null(strstr(err.msg, "route it to the incumbent"));
    solo_close(&so);
    solo_open(&so, "moe_serial", &s, 1);
    assert_int_equal(solo_call(&so, &s, &err), BK_OK);
    solo_close(&so);
}

/* A peer that publishes a row number outside 0..T*K-1 (memory gone bad, or another
 * program in the segment) is named, rather than read from: rank 1 here is no variant, it
 * fills its row table with T*K and keeps the lane's first barrier */
static void test_fused_names_a_bad_peer(void **st)
{
    (void)st;
    const bk_shape s = { .tokens = 6, .hidden = 16, .experts = 4, .topk = 2,
                         .intermediate = 8, .weight = 1 };
    char rid[64];
    const size_t bytes = bk__moe_target.peer_bytes(&s, 2);
    new_rid(rid);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bk_err err = { 0 };
        bk_shm *shm = shm_lane_seg(rid, 1, 2, bytes, 10.0, &err);
        if (!shm)
            _exit(1);
        const bk__moe_layout lay = bk__moe_layout_of(&s, 2);
        int32_t *rows = (int32_t *)((char *)bk_shm_local(shm) + lay.idx_off);
        for (int64_t a = 0; a < s.tokens * s.topk; a++)
            rows[a] = (int32_t)(s.tokens * s.topk);
        int rc = bk_shm_barrier(shm, 10.0, &err) == BK_OK ? 0 : 2;
        sleep(1); /* rank 0 reads the table before this segment goes */
        bk_shm_destroy(shm);
        _exit(rc);
    }
    tensors ts;
    bk_err err = { 0 };
    solo so;
    side_open(&so, "moe_fused_combine", rid, 0, 2, bytes);
    assert_int_equal(make_tensors(&ts, &s, g_seed, 0, 2), 0);
    int32_t *ids = ts.t[BK_MOE_IDS].data; /* token 0's first expert is rank 1's */
    ids[0] = 1;
    ids[1] = 0;
    bk_call call = { .shape = &s, .iter = -1, .rank = 0, .world = 2, .t = ts.t,
                     .nt = BK_MOE_NT, .comm = so.shm, .timeout_s = 10.0 };
    const bk_status got = so.v->run(so.state, &call, &err);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_int_equal(got, BK_ERR_PEER);
    assert_string_equal(err.msg, "moe_fused_combine: rank 1 published row 12 for token 0 slot "
                                 "0 (rows 0..11)");
    solo_close(&so);
    free_tensors(&ts);
}

/* moe_fused_combine's final barrier: rank 1 played by hand owns every expert of the call
 * (odd ids) and publishes, in call c, the row of each assignment and rows y all equal to
 * c + 1, keeping the variant's two barriers and coming 200 ms late to publish each call
 * after the first. Rank 0 (the variant) reads them and must give, bit for bit, the top-k
 * sum of y weighted in k order plus the residual. A rank 0 that left a call before its
 * peers were done reading (no final barrier) meets rank 1 a barrier early in the next call
 * and reads its rows of the call before. */
static void test_fused_final_barrier(void **st)
{
    (void)st;
    const bk_shape s = { .tokens = 5, .hidden = 24, .experts = 4, .topk = 2,
                         .intermediate = 8, .weight = 1 };
    const int64_t tk = s.tokens * s.topk;
    char rid[64];
    const size_t bytes = bk__moe_target.peer_bytes(&s, 2);
    const bk__moe_layout lay = bk__moe_layout_of(&s, 2);
    new_rid(rid);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bk_err err = { 0 };
        bk_shm *shm = shm_lane_seg(rid, 1, 2, bytes, 10.0, &err);
        if (!shm)
            _exit(1);
        for (int c = 0; c < CALLS; c++) {
            if (c > 0)
                nanosleep(&(struct timespec){ .tv_nsec = 200000000L }, NULL);
            int32_t *rows = (int32_t *)((char *)bk_shm_local(shm) + lay.idx_off);
            uint16_t *y = (uint16_t *)((char *)bk_shm_local(shm) + lay.y_off);
            for (int64_t a = 0; a < tk; a++)
                rows[a] = (int32_t)a;
            for (int64_t i = 0; i < tk * s.hidden; i++)
                y[i] = bk_bf16_from_f32((float)(c + 1));
            if (bk_shm_barrier(shm, 10.0, &err) != BK_OK ||
                bk_shm_barrier(shm, 10.0, &err) != BK_OK)
                _exit(2);
        }
        bk_shm_destroy(shm);
        _exit(0);
    }
    tensors ts;
    bk_err err = { 0 };
    solo so;
    side_open(&so, "moe_fused_combine", rid, 0, 2, bytes);
    assert_int_equal(make_tensors(&ts, &s, g_seed, 0, 2), 0);
    int32_t *ids = ts.t[BK_MOE_IDS].data;
    for (int64_t a = 0; a < tk; a++)
        ids[a] = a % 2 ? 3 : 1; /* rank 1's experts */
    bk_call call = { .shape = &s, .iter = -1, .rank = 0, .world = 2, .t = ts.t,
                     .nt = BK_MOE_NT, .comm = so.shm, .timeout_s = 10.0 };
    const float *w = ts.t[BK_MOE_W].data;
    const uint16_t *res = ts.t[BK_MOE_RESIDUAL].data, *o = ts.t[BK_MOE_OUT].data;
    for (int c = 0; c < CALLS; c++) {
        if (so.v->run(so.state, &call, &err) != BK_OK)
            fail_msg("call %d: %s", c + 1, err.msg);
        const float yv = bk_bf16_to_f32(bk_bf16_from_f32((float)(c + 1)));
        for (int64_t t = 0; t < s.tokens; t++)
            for (int64_t j = 0; j < s.hidden; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < s.topk; k++)
                    acc += w[t * s.topk + k] * yv;
                uint16_t want = bk_bf16_from_f32(acc + bk_bf16_to_f32(res[t * s.hidden + j]));
                if (o[t * s.hidden + j] != want)
                    fail_msg("call %d: out[%lld][%lld] = %g, rank 1's rows of this call give "
                             "%g (its rows of the call before?)", c + 1, (long long)t,
                             (long long)j, bk_bf16_to_f32(o[t * s.hidden + j]),
                             bk_bf16_to_f32(want));
            }
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    solo_close(&so);
    free_tensors(&ts);
}

/* The shipped plans load and pass the catalog check; a bad MoE shape is named. */
static void test_plans(void **st)
{
    (void)st;
    bk_plan p;
    bk_err err = { 0 };
    const char *cpu = BK_SOURCE_DIR "/plans/moe-cpu.json";
    assert_int_equal(bk_plan_load(cpu, NULL, 0, &p, &err), BK_OK);
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    bk_plan_free(&p);
    const char *sets[] = { "workload.shapes[0].topk=9" };
    assert_int_equal(bk_plan_load(cpu, sets, 1, &p, &err), BK_OK);
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "workload.shapes[0]: topk 9 > experts 4"));
    bk_plan_free(&p);
    const char *gpu[] = { BK_SOURCE_DIR "/plans/moe-decode.json",
                          BK_SOURCE_DIR "/plans/moe-prefill.json" };
    for (int i = 0; i < 2; i++) {
        bk_err e2 = { 0 };
        assert_int_equal(bk_plan_load(gpu[i], NULL, 0, &p, &e2), BK_OK);
#ifdef BK_HAVE_CUDA
        assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CUDA, &e2), BK_OK);
#else
        /* the missing backend named, not the variant it lacks */
        assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CUDA, &e2), BK_ERR_UNSUPPORTED);
        assert_non_null(strstr(e2.msg, "backend: cuda, but this bracket was built without"));
#endif
        bk_plan_free(&p);
    }
}

int main(void)
{
    const char *env = getenv("BK_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test_moe_cpu: seed %llu (BK_TEST_SEED to repeat)\n", (unsigned long long)g_seed);
    g_rep = mmap(NULL, sizeof *g_rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_rep == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serial_world1), cmocka_unit_test(test_serial_world2),
        cmocka_unit_test(test_serial_world3), cmocka_unit_test(test_fused_world1),
        cmocka_unit_test(test_fused_world2),  cmocka_unit_test(test_fused_world3),
        cmocka_unit_test(test_weights_follow_expert), cmocka_unit_test(test_routing_inputs),
        cmocka_unit_test(test_check_shape),   cmocka_unit_test(test_catalog),
        cmocka_unit_test(test_bad_ids),       cmocka_unit_test(test_plans),
        cmocka_unit_test_teardown(test_serial_late_rank, on_time),
        cmocka_unit_test_teardown(test_fused_late_rank, on_time),
        cmocka_unit_test(test_scratch_grows), cmocka_unit_test(test_fused_refuses_outside_domain),
        cmocka_unit_test(test_fused_names_a_bad_peer),
        cmocka_unit_test(test_fused_final_barrier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
