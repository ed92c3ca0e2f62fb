/* test_kernels_cpu.c - the cpu variants of collective.allreduce_residual_rmsnorm on lanes of
 * 1, 2 and 4 forked processes over shared memory, against the float64 reference; and the
 * diagnostic variants (slowed asks for its wait, corrupt is caught, crash aborts, lazy skips
 * its timed calls, mutate sets one input element; the edges of their parameters).
 *
 * Error bound, per element. residual_out: the reference rounds the exact sum to bf16
 * once; a kernel's fp32 sum may round to the neighbouring bf16 value (one ulp,
 * <= 2^-7 relative) where it crosses a rounding boundary: exact or one ulp, and at
 * most 1% of elements one ulp off. out: in a row whose residual_out matches the
 * reference bit for bit, only the final bf16 rounding (<= 2^-8 relative) plus fp32
 * slack: |got - ref| <= (2^-8 + 1e-5)|ref| + 1e-6; in a row with a one-ulp
 * residual_out (which also moves the row's rms), |got - ref| <= 2^-6 |ref| + 1e-5,
 * as 2^-7 + 2^-8 < 2^-6, with an absolute floor for fp32 accumulation error near
 * zero. Seeds come from the clock and are printed (BK_TEST_SEED=... replays one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "runner/rng.h"
#include "shm_fixture.h"
#include "tests/cuda_half.h"

#define RTOL 0x1p-6
#define ATOL 1e-5
#define MAXW SHM_FIXTURE_MAXW /* lane ranks at most */
#define NSH 15

static const bk_shape k_shapes[NSH] = {
    { .tokens = 1, .hidden = 8 },    { .tokens = 7, .hidden = 8 },
    { .tokens = 32, .hidden = 8 },   { .tokens = 64, .hidden = 8 },
    { .tokens = 1, .hidden = 64 },   { .tokens = 7, .hidden = 64 },
    { .tokens = 32, .hidden = 64 },  { .tokens = 64, .hidden = 64 },
    { .tokens = 1, .hidden = 4096 }, { .tokens = 7, .hidden = 4096 },
    { .tokens = 32, .hidden = 4096 }, { .tokens = 64, .hidden = 4096 },
    /* outside the one-shot's domain (hidden not a multiple of 8): uneven chunks */
    { .tokens = 3, .hidden = 10 },   { .tokens = 5, .hidden = 13 },
    { .tokens = 1, .hidden = 5 }, /* on 4 ranks, chunks of 2, 2, 1 and none */
};

/* Children's results, in a MAP_SHARED region made before fork. */
typedef struct shared {
    int code[MAXW][NSH];
    int inputs_changed[MAXW][NSH];
    int reps_differ[MAXW][NSH]; /* the second call's outputs are not the first's bits */
    char msg[MAXW][512];
    long completed; /* crash test: last iteration that returned */
    size_t off[NSH + 1];
    uint16_t data[]; /* [rank][shape][out | residual_out] */
} shared;

static shared *g;
static uint64_t g_seed;
static int g_pid; /* the test process's, also in forked children */
static int g_late; /* the lane's last rank sleeps this many ms before each call */
static uint64_t g_seed_run; /* the seed printed at the start, which final_barrier varies */
static const bk_target *g_t;

/* a late test's teardown: a failed one leaves no late rank to the tests after it */
static int on_time(void **state)
{
    (void)state;
    g_late = 0;
    return 0;
}

/* final_barrier's teardown: the tests after it run on the printed seed even if it failed */
static int seed_back(void **state)
{
    (void)state;
    g_seed = g_seed_run;
    return 0;
}

static uint16_t *out_of(int rank, int si, int which)
{
    size_t n = k_shapes[si].tokens * k_shapes[si].hidden;
    return g->data + (size_t)rank * 2 * g->off[NSH] + 2 * g->off[si] + (size_t)which * n;
}

/* ---- one rank: allocate, seed, poison, call, report ---- */

typedef struct rank_ctx {
    bk_tensor t[BK_AR_NT];
    bk_call call;
} rank_ctx;

static int setup_tensors(rank_ctx *c, const bk_shape *s, int si, int rank, int world)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < BK_AR_NT; i++) {
        c->t[i].name = g_t->tensor_names[i];
        c->t[i].output = g_t->tensor_is_output[i];
        c->t[i].elems = g_t->tensor_elems(s, world, i);
        c->t[i].elem_bytes = g_t->tensor_elem_bytes(i);
        c->t[i].data = malloc(c->t[i].elems * 2);
        if (!c->t[i].data)
            return -1;
        if (c->t[i].output)
            for (size_t k = 0; k < c->t[i].elems; k++)
                ((uint16_t *)c->t[i].data)[k] = BK_BF16_POISON;
    }
    g_t->init_inputs(c->t, s, g_seed, si, rank, world);
    c->call = (bk_call){ .shape = s, .shape_index = si, .iter = -1, .rank = rank,
                         .world = world, .t = c->t, .nt = BK_AR_NT, .timeout_s = 20.0 };
    return 0;
}

static void free_tensors(rank_ctx *c)
{
    for (int i = 0; i < BK_AR_NT; i++)
        free(c->t[i].data);
}

/* Every shape twice (buffers reused across calls), outputs copied out. */
static int child_lane(const char *rid, const char *variant, int rank, int world)
{
    const bk_variant *v = bk_catalog_variant(BK_AR_TARGET, variant);
    bk_err err = { 0 };
    void *state = NULL;
    size_t bytes = 0;
    for (int si = 0; si < NSH; si++) {
        size_t b = g_t->peer_bytes(&k_shapes[si], world);
        bytes = b > bytes ? b : bytes;
    }
    bk_shm *shm = shm_lane_seg(rid, rank, world, bytes, 20.0, &err);
    json_t *params = json_object();
    if (!shm || v->create(params, BK_BACKEND_CPU, rank, world, &state, &err) != BK_OK)
        goto fail;
    for (int si = 0; si < NSH; si++) {
        rank_ctx c, copy;
        char why[128];
        if (setup_tensors(&c, &k_shapes[si], si, rank, world) != 0 ||
            setup_tensors(&copy, &k_shapes[si], si, rank, world) != 0)
            goto fail;
        /* every rank decides alike, so a skipped shape skips its barriers on all */
        int inside = bk_domain_contains(&v->domain, &k_shapes[si], world, "bf16",
                                        BK_BACKEND_CPU, 1, why, sizeof why);
        c.call.comm = shm;
        for (int rep = 0; rep < 2; rep++) {
            bk_err_clear(&err);
            if (g_late && rank == world - 1)
                nanosleep(&(struct timespec){ .tv_nsec = g_late * 1000000L }, NULL);
            g->code[rank][si] = v->run(state, &c.call, &err);
            if (!inside)
                break; /* the code says whether the variant refused it */
            if (g->code[rank][si] != BK_OK)
                goto fail;
            if (rep == 0) { /* the first call's outputs, for the second to equal */
                memcpy(out_of(rank, si, 0), c.t[BK_AR_OUT].data, c.t[BK_AR_OUT].elems * 2);
                memcpy(out_of(rank, si, 1), c.t[BK_AR_RESIDUAL_OUT].data,
                       c.t[BK_AR_OUT].elems * 2);
            } else if (memcmp(out_of(rank, si, 0), c.t[BK_AR_OUT].data,
                              c.t[BK_AR_OUT].elems * 2) != 0 ||
                       memcmp(out_of(rank, si, 1), c.t[BK_AR_RESIDUAL_OUT].data,
                              c.t[BK_AR_OUT].elems * 2) != 0) {
                g->reps_differ[rank][si] = 1;
            }
        }
        for (int i = 0; i < BK_AR_NT; i++)
            if (!c.t[i].output && memcmp(c.t[i].data, copy.t[i].data, c.t[i].elems * 2) != 0)
                g->inputs_changed[rank][si] = 1;
        memcpy(out_of(rank, si, 0), c.t[BK_AR_OUT].data, c.t[BK_AR_OUT].elems * 2);
        memcpy(out_of(rank, si, 1), c.t[BK_AR_RESIDUAL_OUT].data, c.t[BK_AR_OUT].elems * 2);
        free_tensors(&c);
        free_tensors(&copy);
    }
    v->destroy(state);
    json_decref(params);
    bk_shm_destroy(shm);
    return 0;
fail:
    bk_strlcpy(g->msg[rank], err.msg, sizeof g->msg[rank]);
    bk_shm_destroy(shm);
    return 1;
}

static void run_lane(const char *variant, int world)
{
    char rid[64];
    pid_t pids[MAXW];
    snprintf(rid, sizeof rid, "test-kern-%d-%s-%d", g_pid, variant, world);
    memset(g->code, 0, sizeof g->code);
    memset(g->inputs_changed, 0, sizeof g->inputs_changed);
    memset(g->reps_differ, 0, sizeof g->reps_differ);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(child_lane(rid, variant, r, world));
    }
    for (int r = 0; r < world; r++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            fail_msg("%s world %d rank %d failed (status %d): %s", variant, world, r, ws,
                     g->msg[r]);
    }
}

/* Elements past the bound (NaN counts; see the top of the file). */
typedef struct verdict {
    size_t bad_out, bad_ro, ro_ulp, first_out, first_ro;
} verdict;

static verdict judge(const uint16_t *out, const uint16_t *ro, double *const ref[2],
                     const bk_shape *s)
{
    verdict v = { 0 };
    size_t h = (size_t)s->hidden;
    for (size_t row = 0; row < (size_t)s->tokens; row++) {
        int row_exact = 1;
        for (size_t i = row * h; i < (row + 1) * h; i++) {
            double x = bk_bf16_to_f32(ro[i]), r = ref[1][i];
            if (x == r)
                continue;
            row_exact = 0;
            if (fabs(x - r) <= 0x1p-7 * fabs(r) + 1e-6) {
                v.ro_ulp++;
            } else if (!v.bad_ro++) {
                v.first_ro = i;
            }
        }
        double rtol = row_exact ? 0x1p-8 + 1e-5 : RTOL, atol = row_exact ? 1e-6 : ATOL;
        for (size_t i = row * h; i < (row + 1) * h; i++) {
            double x = bk_bf16_to_f32(out[i]), r = ref[0][i];
            if (!(fabs(x - r) <= rtol * fabs(r) + atol) && !v.bad_out++)
                v.first_out = i;
        }
    }
    return v;
}

static void check_lane(const char *variant, int world)
{
    const bk_variant *v = bk_catalog_variant(BK_AR_TARGET, variant);
    bk_err err = { 0 };
    size_t ulps = 0, elems = 0;
    run_lane(variant, world);
    for (int si = 0; si < NSH; si++) {
        const bk_shape *s = &k_shapes[si];
        char why[128];
        size_t n = s->tokens * s->hidden;
        if (!bk_domain_contains(&v->domain, s, world, "bf16", BK_BACKEND_CPU, 1, why,
                                sizeof why)) {
            for (int r = 0; r < world; r++) /* refused, never silently wrong */
                assert_int_equal(g->code[r][si], BK_ERR_UNSUPPORTED);
            continue;
        }
        double *ref[2];
        assert_int_equal(g_t->reference(s, g_seed, si, 0, world, ref, &err), BK_OK);
        for (int r = 0; r < world; r++) {
            assert_int_equal(g->code[r][si], BK_OK);
            assert_int_equal(g->inputs_changed[r][si], 0);
            if (g->reps_differ[r][si])
                fail_msg("%s world %d rank %d shape %dx%d: two calls on the same inputs gave "
                         "different bits", variant, world, r, (int)s->tokens, (int)s->hidden);
            verdict vd = judge(out_of(r, si, 0), out_of(r, si, 1), ref, s);
            if (vd.bad_out || vd.bad_ro)
                fail_msg("%s world %d rank %d shape %dx%d: %zu bad out (first [%zu] = %g, ref "
                         "%g), %zu bad residual_out (first [%zu] = %g, ref %g)", variant, world,
                         r, (int)s->tokens, (int)s->hidden, vd.bad_out, vd.first_out,
                         bk_bf16_to_f32(out_of(r, si, 0)[vd.first_out]), ref[0][vd.first_out],
                         vd.bad_ro, vd.first_ro, bk_bf16_to_f32(out_of(r, si, 1)[vd.first_ro]),
                         ref[1][vd.first_ro]);
            ulps += vd.ro_ulp;
            elems += n;
            /* every rank of the lane gets the same bits */
            assert_memory_equal(out_of(r, si, 0), out_of(0, si, 0), n * 2);
            assert_memory_equal(out_of(r, si, 1), out_of(0, si, 1), n * 2);
        }
        free(ref[0]);
        free(ref[1]);
    }
    /* a one-ulp residual_out needs an fp32 sum that rounds across a bf16 boundary */
    printf("%s world %d: %zu of %zu residual_out elements one ulp off the reference\n",
           variant, world, ulps, elems);
    assert_true(ulps * 100 <= elems);
}

static void test_twopass_w1(void **s) { (void)s; check_lane("shm_twopass", 1); }
static void test_twopass_w2(void **s) { (void)s; check_lane("shm_twopass", 2); }
static void test_twopass_w4(void **s) { (void)s; check_lane("shm_twopass", 4); }
static void test_oneshot_w1(void **s) { (void)s; check_lane("shm_oneshot_fused", 1); }
static void test_oneshot_w2(void **s) { (void)s; check_lane("shm_oneshot_fused", 2); }
static void test_oneshot_w4(void **s) { (void)s; check_lane("shm_oneshot_fused", 4); }

/* The last rank comes 20 ms late to every call: the others read its x only once it is
 * written (each variant's first barrier). Until then its segment holds the previous call's
 * x: the previous shape's for a shape's first call (or zeros), which check_lane sees as a
 * first call that differs from the second */
static void late_rank(const char *variant, int world)
{
    g_late = 20; /* on_time, the test's teardown, sets it back */
    check_lane(variant, world);
}
static void test_twopass_late_rank(void **s) { (void)s; late_rank("shm_twopass", 2); }
static void test_oneshot_late_rank(void **s) { (void)s; late_rank("shm_oneshot_fused", 4); }

/* ---- peer memory reused across calls: the final barrier ---- */

/* Lane rank 1 played by hand, keeping each variant's barriers (two a call for the
 * one-shot, three for the two-pass, whose reduce-scatter it does for its own chunk) on new
 * inputs each call (seed + c), and 200 ms late to write the x of every call after the
 * first. A rank 0 that left a call before its peers were done reading (no final barrier)
 * meets this rank one barrier early in the next call and reads its x of the call before. */
#define RECALLS 3
static void fake_rank1(const char *variant, const char *rid, const bk_shape *s, int si,
                       uint64_t seed)
{
    bk_err err = { 0 };
    const int twopass = strcmp(variant, "shm_twopass") == 0;
    const bk__ar_layout lay = bk__ar_layout_of(s, 2);
    bk_shm *shm = shm_lane_seg(rid, 1, 2, g_t->peer_bytes(s, 2), 20.0, &err);
    if (!shm)
        _exit(1);
    for (int c = 0; c < RECALLS; c++) {
        rank_ctx ctx;
        g_seed = seed + (uint64_t)c;
        if (setup_tensors(&ctx, s, si, 1, 2) != 0)
            _exit(1);
        if (c > 0)
            nanosleep(&(struct timespec){ .tv_nsec = 200000000L }, NULL);
        memcpy((char *)bk_shm_local(shm) + lay.x_off, ctx.t[BK_AR_X].data, lay.n * 2);
        if (bk_shm_barrier(shm, 20.0, &err) != BK_OK)
            _exit(2);
        if (twopass) { /* my chunk, rank 0's x then mine, as the variant sums them */
            const uint16_t *x0 = (const uint16_t *)((char *)bk_shm_peer(shm, 0) + lay.x_off);
            const uint16_t *x1 = (const uint16_t *)((char *)bk_shm_local(shm) + lay.x_off);
            float *red = (float *)((char *)bk_shm_local(shm) + lay.red_off);
            size_t hi = 2 * lay.chunk < lay.n ? 2 * lay.chunk : lay.n;
            for (size_t i = lay.chunk; i < hi; i++)
                red[i - lay.chunk] = bk_bf16_to_f32(x0[i]) + bk_bf16_to_f32(x1[i]);
            if (bk_shm_barrier(shm, 20.0, &err) != BK_OK)
                _exit(2);
        }
        if (bk_shm_barrier(shm, 20.0, &err) != BK_OK)
            _exit(2);
        free_tensors(&ctx);
    }
    bk_shm_destroy(shm);
    _exit(0);
}

static void final_barrier(const char *variant)
{
    const int si = 9; /* 7 x 4096 */
    const bk_shape *s = &k_shapes[si];
    const bk_variant *v = bk_catalog_variant(BK_AR_TARGET, variant);
    const uint64_t seed = g_seed;
    char rid[64];
    bk_err err = { 0 };
    void *state = NULL;
    snprintf(rid, sizeof rid, "test-kern-%d-final-%s", g_pid, variant);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        fake_rank1(variant, rid, s, si, seed);
    bk_shm *shm = shm_lane_seg(rid, 0, 2, g_t->peer_bytes(s, 2), 20.0, &err);
    assert_non_null(shm);
    json_t *params = json_object();
    assert_int_equal(v->create(params, BK_BACKEND_CPU, 0, 2, &state, &err), BK_OK);
    for (int c = 0; c < RECALLS; c++) {
        rank_ctx ctx;
        double *ref[2];
        g_seed = seed + (uint64_t)c;
        assert_int_equal(setup_tensors(&ctx, s, si, 0, 2), 0);
        ctx.call.comm = shm;
        if (v->run(state, &ctx.call, &err) != BK_OK)
            fail_msg("%s call %d: %s", variant, c + 1, err.msg);
        assert_int_equal(g_t->reference(s, g_seed, si, 0, 2, ref, &err), BK_OK);
        verdict vd = judge(ctx.t[BK_AR_OUT].data, ctx.t[BK_AR_RESIDUAL_OUT].data, ref, s);
        if (vd.bad_out || vd.bad_ro)
            fail_msg("%s call %d: %zu bad out, %zu bad residual_out (rank 1's x of the call "
                     "before?)", variant, c + 1, vd.bad_out, vd.bad_ro);
        free(ref[0]);
        free(ref[1]);
        free_tensors(&ctx);
    }
    int ws = 0; /* g_seed: seed_back, the test's teardown, puts it back */
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    v->destroy(state);
    json_decref(params);
    bk_shm_destroy(shm);
}
static void test_twopass_final_barrier(void **s) { (void)s; final_barrier("shm_twopass"); }
static void test_oneshot_final_barrier(void **s) { (void)s; final_barrier("shm_oneshot_fused"); }

/* ---- seeded inputs ---- */

static void test_inputs_are_seeded_and_rank_independent_where_shared(void **state)
{
    (void)state;
    const bk_shape *s = &k_shapes[5];
    rank_ctx a, b, c;
    assert_int_equal(setup_tensors(&a, s, 5, 0, 2), 0);
    assert_int_equal(setup_tensors(&b, s, 5, 1, 2), 0);
    assert_int_equal(setup_tensors(&c, s, 5, 1, 2), 0);
    size_t n = a.t[BK_AR_X].elems;
    assert_memory_equal(b.t[BK_AR_X].data, c.t[BK_AR_X].data, n * 2); /* same seed: same bits */
    assert_memory_not_equal(a.t[BK_AR_X].data, b.t[BK_AR_X].data, n * 2);
    assert_memory_equal(a.t[BK_AR_RESIDUAL].data, b.t[BK_AR_RESIDUAL].data, n * 2);
    assert_memory_equal(a.t[BK_AR_GAMMA].data, b.t[BK_AR_GAMMA].data, s->hidden * 2);
    for (size_t i = 0; i < n; i++) {
        float x = bk_bf16_to_f32(((uint16_t *)a.t[BK_AR_X].data)[i]);
        float r = bk_bf16_to_f32(((uint16_t *)a.t[BK_AR_RESIDUAL].data)[i]);
        assert_true(x >= -1.0f && x < 1.0f);
        assert_true(r >= -1.0f && r < 1.0f);
    }
    for (int64_t j = 0; j < s->hidden; j++) {
        float gm = bk_bf16_to_f32(((uint16_t *)a.t[BK_AR_GAMMA].data)[j]);
        assert_true(gm >= 0.5f && gm < 1.5f);
    }
    /* another shape index draws other numbers */
    rank_ctx d;
    assert_int_equal(setup_tensors(&d, s, 6, 0, 2), 0);
    assert_memory_not_equal(a.t[BK_AR_X].data, d.t[BK_AR_X].data, n * 2);
    free_tensors(&a);
    free_tensors(&b);
    free_tensors(&c);
    free_tensors(&d);
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(bk_bf16_from_f32(1.0f), 0x3F80);
    assert_int_equal(bk_bf16_from_f32(1.0f + 0x1p-8f), 0x3F80);             /* tie -> even */
    assert_int_equal(bk_bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3F82);         /* tie -> even */
    assert_int_equal(bk_bf16_from_f32(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  /* above tie */
    assert_true(bk_bf16_is_nan(bk_bf16_from_f32(NAN)));
    assert_true(bk_bf16_round_f64(1.0 + 0x1p-8) == 1.0);
    assert_true(bk_bf16_round_f64(-(1.0 + 3 * 0x1p-8)) == -(1.0 + 0x1p-6));
    assert_true(bk_bf16_round_f64(0.3) == bk_bf16_to_f32(bk_bf16_from_f32(0.3f)));
}

/* ---- diagnostic variants, world 1 ---- */

static bk_status create_named(const char *name, const char *params_json, void **state,
                              bk_err *err)
{
    json_t *p = json_loads(params_json, 0, NULL);
    assert_non_null(p);
    bk_status st = bk_catalog_variant(BK_AR_TARGET, name)->create(p, BK_BACKEND_CPU, 0, 1,
                                                                  state, err);
    json_decref(p);
    return st;
}

static bk_shm *solo_shm(const char *tag, const bk_shape *s)
{
    char rid[64], mine[BK_SHM_NAME_LEN];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    snprintf(rid, sizeof rid, "test-kern-%d-%s", g_pid, tag);
    assert_int_equal(bk_shm_create(rid, "A", 0, 1, g_t->peer_bytes(s, 1), &shm, mine, &err),
                     BK_OK);
    const char *ptrs[1] = { mine };
    assert_int_equal(bk_shm_connect(shm, ptrs, 1.0, &err), BK_OK);
    return shm;
}

/* A diagnostic variant made from its params, with shape si's tensors, on a lane of one. */
typedef struct solo_run {
    rank_ctx c;
    bk_shm *shm;
    const bk_variant *v;
    void *st;
} solo_run;

static void solo_open(solo_run *r, const char *tag, const char *name, const char *params, int si)
{
    bk_err err = { 0 };
    r->shm = solo_shm(tag, &k_shapes[si]);
    r->v = bk_catalog_variant(BK_AR_TARGET, name);
    r->st = NULL;
    assert_non_null(r->v);
    assert_int_equal(create_named(name, params, &r->st, &err), BK_OK);
    assert_int_equal(setup_tensors(&r->c, &k_shapes[si], si, 0, 1), 0);
    r->c.call.comm = r->shm;
}

/* The run's outputs match the float64 reference of shape si (world 1) within tolerance. */
static void assert_outputs_right(const solo_run *r, int si)
{
    bk_err err = { 0 };
    double *ref[2];
    assert_int_equal(g_t->reference(&k_shapes[si], g_seed, si, 0, 1, ref, &err), BK_OK);
    verdict vd = judge(r->c.t[BK_AR_OUT].data, r->c.t[BK_AR_RESIDUAL_OUT].data, ref,
                       &k_shapes[si]);
    assert_int_equal(vd.bad_out + vd.bad_ro, 0);
    free(ref[0]);
    free(ref[1]);
}

static void solo_close(solo_run *r)
{
    r->v->destroy(r->st);
    free_tensors(&r->c);
    bk_shm_destroy(r->shm);
}

/* slowed's unit: the first call's time, then the median of a steady stream (not its
 * fastest: fraction f must give a median about (1 + f) x the base's, the statistic the
 * scorer compares); a minority of long, preempted calls barely moves it (a mean would be
 * four times the typical call); and a stream of mostly stretched calls (a slowed rank
 * waiting on its peer's wait, beside busy processes) cannot carry it past twice the
 * fastest call. */
static void test_slowed_unit_step(void **state)
{
    (void)state;
    bk_diag_unit u = { 0, 0 };
    assert_true(bk__diag_unit_step(&u, 1234) == 1234.0);
    bk_rng x;
    bk_rng_seed(&x, 7);
    double unit = 0;
    memset(&u, 0, sizeof u);
    for (int i = 0; i < 4000; i++) /* uniform on [100, 200] us: median 150 */
        unit = bk__diag_unit_step(&u, 100000 + bk_rng_next(&x) % 100001);
    if (!(unit > 142000 && unit < 158000))
        fail_msg("steady [100, 200] us: unit %.0f ns (want about 150000; fastest %llu)", unit,
                 (unsigned long long)u.fastest_ns);
    memset(&u, 0, sizeof u);
    double sum = 0;
    for (int i = 0; i < 4000; i++) { /* 30% preempted at 10x on [100, 120] us */
        uint64_t b = 100000 + bk_rng_next(&x) % 20001;
        if (bk_rng_next(&x) % 10 < 3)
            b *= 10;
        sum += (double)b;
        unit = bk__diag_unit_step(&u, b);
    }
    if (!(unit > 105000 && unit < 130000))
        fail_msg("30%% of the calls preempted 10x: unit %.0f ns (want 105000-130000; the mean "
                 "is %.0f)", unit, sum / 4000);
    memset(&u, 0, sizeof u);
    for (int i = 0; i < 100; i++)
        bk__diag_unit_step(&u, 1000);
    for (int i = 0; i < 4000; i++) /* then every call stretched 10x */
        unit = bk__diag_unit_step(&u, 10000);
    if (unit != 2000.0)
        fail_msg("calls stretched from 1000 to 10000 ns: unit %.0f (want 2000, twice the "
                 "fastest; the running median is %.0f)", unit, u.median_ns);
}

static void test_slowed_asks_for_its_wait(void **state)
{
    (void)state;
    const int si = 9; /* 7 x 4096 */
    bk_err err = { 0 };
    solo_run r;
    solo_open(&r, "slowed", "slowed", "{\"fraction\": 2.0}", si);
    /* the wait is 2x bk__diag_unit_step's unit over this shape's calls, never this call's
     * own time (some call's time differs from its unit) */
    bk_diag_unit u = { 0, 0 };
    int off_unit = 0;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = bk_now_ns(), base = 0, wait = 0;
        assert_int_equal(r.v->run(r.st, &r.c.call, &err), BK_OK);
        uint64_t total = bk_now_ns() - t0;
        bk__diag_last_times(r.st, &base, &wait);
        assert_true(base > 0);
        const double unit = bk__diag_unit_step(&u, base);
        off_unit += (double)base != unit;
        assert_int_equal(wait, (uint64_t)(2.0 * unit));
        assert_true(total >= base + wait); /* the wait is spent inside the call */
    }
    assert_true(off_unit > 0);
    assert_outputs_right(&r, si);
    solo_close(&r);
}

static void test_corrupt_is_caught(void **state)
{
    (void)state;
    const int si = 6; /* 32 x 64 */
    bk_err err = { 0 };
    solo_run r;
    solo_open(&r, "corrupt", "corrupt", "{\"base\": \"shm_oneshot_fused\"}", si);
    assert_int_equal(r.v->run(r.st, &r.c.call, &err), BK_OK);
    double *ref[2];
    size_t n = r.c.t[BK_AR_OUT].elems;
    assert_int_equal(g_t->reference(&k_shapes[si], g_seed, si, 0, 1, ref, &err), BK_OK);
    verdict vd = judge(r.c.t[BK_AR_OUT].data, r.c.t[BK_AR_RESIDUAL_OUT].data, ref,
                       &k_shapes[si]);
    assert_int_equal(vd.bad_out, (n + 6) / 7);
    assert_int_equal(vd.bad_ro, 0);
    for (size_t i = 0; i < n; i += 7)
        assert_true(fabs(bk_bf16_to_f32(((uint16_t *)r.c.t[BK_AR_OUT].data)[i]) - ref[0][i] -
                         1.0) < 0.05);
    free(ref[0]);
    free(ref[1]);
    solo_close(&r);
}

/* Outside its base's domain (one-shot: hidden 13) a diagnostic runs the incumbent. */
static void test_diagnostic_routes_outside_its_base(void **state)
{
    (void)state;
    const int si = 13; /* 5 x 13 */
    bk_err err = { 0 };
    solo_run r;
    solo_open(&r, "routed", "corrupt", "{\"base\": \"shm_oneshot_fused\", \"magnitude\": 4}",
              si);
    assert_int_equal(r.v->run(r.st, &r.c.call, &err), BK_OK);
    double *ref[2];
    size_t n = r.c.t[BK_AR_OUT].elems;
    assert_int_equal(g_t->reference(&k_shapes[si], g_seed, si, 0, 1, ref, &err), BK_OK);
    verdict vd = judge(r.c.t[BK_AR_OUT].data, r.c.t[BK_AR_RESIDUAL_OUT].data, ref,
                       &k_shapes[si]);
    assert_int_equal(vd.bad_out, (n + 6) / 7);
    assert_int_equal(vd.bad_ro, 0);
    free(ref[0]);
    free(ref[1]);
    solo_close(&r);
}

static void test_crash_aborts_at_its_iteration(void **state)
{
    (void)state;
    const int si = 4;
    g->completed = -2;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = { 0, 0 };
        bk_err err = { 0 };
        void *st = NULL;
        rank_ctx c;
        setrlimit(RLIMIT_CORE, &no_core);
        bk_shm *shm = solo_shm("crash", &k_shapes[si]);
        if (create_named("crash", "{\"at_iter\": 3}", &st, &err) != BK_OK ||
            setup_tensors(&c, &k_shapes[si], si, 0, 1) != 0)
            _exit(2);
        c.call.comm = shm;
        for (long it = -1; it < 10; it++) { /* a warm-up call (-1), then timed ones */
            c.call.iter = it;
            if (bk_catalog_variant(BK_AR_TARGET, "crash")->run(st, &c.call, &err) != BK_OK)
                _exit(3);
            g->completed = it;
        }
        _exit(0);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws));
    assert_int_equal(WTERMSIG(ws), SIGABRT);
    assert_int_equal(g->completed, 2);
    char rid[64], name[BK_SHM_NAME_LEN];
    bk_err err = { 0 };
    snprintf(rid, sizeof rid, "test-kern-%d-crash", g_pid);
    bk_shm_name(rid, "A", 0, name);
    assert_int_equal(bk_shm_unlink_name(name, &err), BK_OK); /* what the agent does */
}

static void test_params_are_checked(void **state)
{
    (void)state;
    static const struct { const char *variant, *params, *msg_prefix; } bad[] = {
        { "slowed", "{\"fraction\": 11}", "params.fraction: must be a number in [0, 10], got 11" },
        { "slowed", "{\"fraction\": \"x\"}",
          "params.fraction: must be a number in [0, 10], got \"x\"" },
        { "slowed", "{\"fractoin\": 1}", "params.fractoin: unknown parameter" },
        { "slowed", "{\"base\": \"nope\"}", "params.base: no variant 'nope'" },
        { "slowed", "{\"base\": \"crash\"}", "params.base: 'crash' is a diagnostic" },
        { "slowed", "{\"base\": 3}", "params.base: must be" },
        { "crash", "{\"at_iter\": -1}", "params.at_iter: must be an integer >= 0, got -1" },
        { "crash", "{\"at_iter\": 1.5}", "params.at_iter: " },
        { "corrupt", "{\"magnitude\": 0}", "params.magnitude: must be a finite number > 0, got 0" },
        { "corrupt", "{\"fraction\": 1}", "params.fraction: unknown parameter" },
        { "shm_twopass", "{\"x\": 1}", "params.x: unknown parameter" },
        { "shm_oneshot_fused", "{\"tokens\": 1}", "params.tokens: unknown parameter" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bk_err err = { 0 };
        void *st = NULL;
        bk_status rc = create_named(bad[i].variant, bad[i].params, &st, &err);
        if (rc == BK_OK || strncmp(err.msg, bad[i].msg_prefix, strlen(bad[i].msg_prefix)) != 0)
            fail_msg("%s %s: status %d, message '%s'", bad[i].variant, bad[i].params, rc,
                     err.msg);
        assert_null(st);
    }
    bk_err err = { 0 };
    void *st = NULL;
    json_t *p = json_object();
    const bk_variant *v = bk_catalog_variant(BK_AR_TARGET, "shm_twopass");
    assert_int_equal(v->create(p, BK_BACKEND_CUDA, 0, 1, &st, &err), BK_ERR_UNSUPPORTED);
    /* diagnostics run on cuda too, around a base that does */
    const bk_variant *slowed = bk_catalog_variant(BK_AR_TARGET, "slowed");
    bk_err_clear(&err);
    assert_int_equal(slowed->create(p, BK_BACKEND_CUDA, 0, 1, &st, &err), BK_ERR_INPUT);
    assert_string_equal(err.msg, "params.base: required on backend cuda (no default base there "
                                 "yet)");
    json_object_set_new(p, "base", json_string("shm_twopass"));
    bk_err_clear(&err);
    assert_int_equal(slowed->create(p, BK_BACKEND_CUDA, 0, 1, &st, &err), BK_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "params.base: variant 'shm_twopass' does not support backend "
                                 "cuda");
    assert_null(st);
    bk_err_clear(&err);
    assert_int_equal(create_named("slowed", "{\"base\": \"shm_oneshot_fused\", \"fraction\": 0}",
                                  &st, &err), BK_OK);
    bk_catalog_variant(BK_AR_TARGET, "slowed")->destroy(st);
    json_decref(p);
}

/* The edges of each parameter: fraction 0 and 10, at_iter 0, element 0 and a lane rank of
 * the lane are taken; a rank past the lane, a rank for a kind other than slowed, and
 * corrupt on cuda are refused, each saying why. */
static void test_params_edges(void **state)
{
    (void)state;
    static const struct { const char *variant, *params; } good[] = {
        { "slowed", "{\"fraction\": 10}" }, { "slowed", "{\"fraction\": 0}" },
        { "slowed", "{\"rank\": 0}" },      { "crash", "{\"at_iter\": 0}" },
        { "mutate", "{\"element\": 0}" },   { "corrupt", "{\"magnitude\": 1e-3}" },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bk_err err = { 0 };
        void *st = NULL;
        if (create_named(good[i].variant, good[i].params, &st, &err) != BK_OK)
            fail_msg("%s %s refused: %s", good[i].variant, good[i].params, err.msg);
        assert_non_null(st);
        bk_catalog_variant(BK_AR_TARGET, good[i].variant)->destroy(st);
    }
    static const struct { const char *variant, *params, *msg; } bad[] = {
        { "slowed", "{\"rank\": 1}", "params.rank: must be a rank of the lane, an integer in "
                                     "0..0 (the lane has 1 rank)" },
        { "crash", "{\"rank\": 0}", "params.rank: unknown parameter (crash takes base, at_iter)" },
        { "lazy", "{\"element\": 0}", "params.element: unknown parameter (lazy takes base only)" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bk_err err = { 0 };
        void *st = NULL;
        bk_status rc = create_named(bad[i].variant, bad[i].params, &st, &err);
        if (rc != BK_ERR_INPUT || strcmp(err.msg, bad[i].msg) != 0)
            fail_msg("%s %s: status %d, '%s' (want '%s')", bad[i].variant, bad[i].params, rc,
                     err.msg, bad[i].msg);
        assert_null(st);
    }
    /* corrupt writes outputs in host memory: on cuda it is refused before any base is made
     * (a cuda base exists in a cuda build only; without one, params.base refuses first) */
    if (!bk_test_cuda_half(BK_AR_TARGET, "nccl_then_rmsnorm", __func__))
        return;
    bk_err err = { 0 };
    void *st = NULL;
    json_t *p = json_pack("{s:s}", "base", "nccl_then_rmsnorm");
    assert_non_null(p);
    assert_int_equal(bk_catalog_variant(BK_AR_TARGET, "corrupt")->create(p, BK_BACKEND_CUDA, 0, 1,
                                                                         &st, &err),
                     BK_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "corrupt: outputs outside host memory (backend cuda) are not "
                                 "supported yet");
    assert_null(st);
    json_decref(p);
}

/* What the plan check reads of crash: its at_iter, 10 when not given (2), not an integer
 * (-1); 0 for any other variant. */
static void test_crash_at(void **state)
{
    (void)state;
    const bk_variant *crash = bk_catalog_variant(BK_AR_TARGET, "crash");
    long long at = -7;
    assert_int_equal(bk__diag_crash_at(crash, NULL, &at), 2);
    assert_int_equal(at, 10);
    json_t *p = json_pack("{s:i}", "at_iter", 3);
    assert_int_equal(bk__diag_crash_at(crash, p, &at), 1);
    assert_int_equal(at, 3);
    json_decref(p);
    p = json_pack("{s:s}", "at_iter", "x");
    assert_int_equal(bk__diag_crash_at(crash, p, &at), 1);
    assert_int_equal(at, -1);
    at = -7;
    assert_int_equal(bk__diag_crash_at(bk_catalog_variant(BK_AR_TARGET, "slowed"), p, &at), 0);
    assert_int_equal(at, -7);
    json_decref(p);
}

/* slowed with "rank" naming this lane rank waits as the whole lane would (the straggler is
 * this rank, not the others). */
static void test_slowed_rank_is_slowed(void **state)
{
    (void)state;
    const int si = 4;
    bk_err err = { 0 };
    solo_run r;
    solo_open(&r, "slowed-rank", "slowed", "{\"fraction\": 1.0, \"rank\": 0}", si);
    bk_diag_unit u = { 0, 0 };
    for (int i = 0; i < 3; i++) {
        uint64_t base = 0, wait = 0;
        assert_int_equal(r.v->run(r.st, &r.c.call, &err), BK_OK);
        bk__diag_last_times(r.st, &base, &wait);
        assert_true(base > 0);
        assert_int_equal(wait, (uint64_t)bk__diag_unit_step(&u, base));
        assert_true(wait > 0);
    }
    solo_close(&r);
}

/* lazy: the base in untimed calls (iter -1: the outputs are right), nothing from the first
 * timed call on (iter 0 and later: the poisoned outputs stay poisoned). */
static void test_lazy_skips_timed_calls(void **state)
{
    (void)state;
    const int si = 6; /* 32 x 64 */
    bk_err err = { 0 };
    solo_run r;
    solo_open(&r, "lazy", "lazy", "{}", si);
    rank_ctx *c = &r.c;
    assert_int_equal(r.v->run(r.st, &c->call, &err), BK_OK);
    assert_outputs_right(&r, si);
    static const long iters[] = { 0, 1, 299 };
    for (int k = 0; k < 3; k++) {
        for (int o = BK_AR_OUT; o <= BK_AR_RESIDUAL_OUT; o++)
            for (size_t i = 0; i < c->t[o].elems; i++)
                ((uint16_t *)c->t[o].data)[i] = BK_BF16_POISON;
        c->call.iter = iters[k];
        assert_int_equal(r.v->run(r.st, &c->call, &err), BK_OK);
        for (int o = BK_AR_OUT; o <= BK_AR_RESIDUAL_OUT; o++)
            for (size_t i = 0; i < c->t[o].elems; i++)
                if (((uint16_t *)c->t[o].data)[i] != BK_BF16_POISON)
                    fail_msg("lazy at iter %ld wrote %s[%zu]", iters[k], c->t[o].name, i);
    }
    solo_close(&r);
}

/* mutate: the base's right outputs, then element `element` (mod its length) of the first
 * input x, and nothing else, becomes bf16 3.0 (0x4040). */
static void test_mutate_sets_its_input(void **state)
{
    (void)state;
    const int si = 6; /* 32 x 64 */
    bk_err err = { 0 };
    const size_t n = g_t->tensor_elems(&k_shapes[si], 1, BK_AR_X), at = 5;
    char params[64];
    snprintf(params, sizeof params, "{\"element\": %zu}", n + at); /* past the end: wraps */
    solo_run r;
    solo_open(&r, "mutate", "mutate", params, si);
    rank_ctx *c = &r.c;
    assert_int_equal(c->t[BK_AR_X].elems, n);
    uint16_t *before[BK_AR_NT];
    for (int i = 0; i < BK_AR_NT; i++) {
        before[i] = malloc(c->t[i].elems * 2);
        assert_non_null(before[i]);
        memcpy(before[i], c->t[i].data, c->t[i].elems * 2);
    }
    assert_int_equal(r.v->run(r.st, &c->call, &err), BK_OK);
    assert_outputs_right(&r, si);
    const uint16_t *x = c->t[BK_AR_X].data;
    assert_int_equal(x[at], 0x4040);
    assert_true(before[BK_AR_X][at] != 0x4040); /* the test would prove nothing otherwise */
    for (size_t i = 0; i < n; i++)
        if (i != at && x[i] != before[BK_AR_X][i])
            fail_msg("mutate changed x[%zu] too", i);
    for (int t = BK_AR_RESIDUAL; t <= BK_AR_GAMMA; t++)
        assert_memory_equal(c->t[t].data, before[t], c->t[t].elems * 2);
    for (int i = 0; i < BK_AR_NT; i++)
        free(before[i]);
    solo_close(&r);
}

int main(void)
{
    size_t total = 0, bytes;
    g_t = bk_catalog_target(BK_AR_TARGET);
    g_pid = (int)getpid();
    if (!g_t)
        return 1;
    g_seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    if (getenv("BK_TEST_SEED"))
        g_seed = strtoull(getenv("BK_TEST_SEED"), NULL, 0);
    g_seed_run = g_seed;
    printf("seed = %llu (rerun with BK_TEST_SEED=%llu)\n", (unsigned long long)g_seed,
           (unsigned long long)g_seed);
    for (int si = 0; si < NSH; si++)
        total += (size_t)(k_shapes[si].tokens * k_shapes[si].hidden);
    bytes = sizeof(shared) + (size_t)MAXW * 2 * total * 2;
    g = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        return 1;
    for (int si = 0; si <= NSH; si++)
        g->off[si] = si ? g->off[si - 1] + (size_t)(k_shapes[si - 1].tokens *
                                                    k_shapes[si - 1].hidden) : 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_inputs_are_seeded_and_rank_independent_where_shared),
        cmocka_unit_test(test_twopass_w1),
        cmocka_unit_test(test_twopass_w2),
        cmocka_unit_test(test_twopass_w4),
        cmocka_unit_test(test_oneshot_w1),
        cmocka_unit_test(test_oneshot_w2),
        cmocka_unit_test(test_oneshot_w4),
        cmocka_unit_test_teardown(test_twopass_late_rank, on_time),
        cmocka_unit_test_teardown(test_oneshot_late_rank, on_time),
        cmocka_unit_test_teardown(test_twopass_final_barrier, seed_back),
        cmocka_unit_test_teardown(test_oneshot_final_barrier, seed_back),
        cmocka_unit_test(test_slowed_unit_step),
        cmocka_unit_test(test_slowed_asks_for_its_wait),
        cmocka_unit_test(test_corrupt_is_caught),
        cmocka_unit_test(test_diagnostic_routes_outside_its_base),
        cmocka_unit_test(test_crash_aborts_at_its_iteration),
        cmocka_unit_test(test_params_are_checked),
        cmocka_unit_test(test_params_edges),
        cmocka_unit_test(test_crash_at),
        cmocka_unit_test(test_slowed_rank_is_slowed),
        cmocka_unit_test(test_lazy_skips_timed_calls),
        cmocka_unit_test(test_mutate_sets_its_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
