/* test_rmsnorm_cuda.c - every launch configuration of the residual + RMSNorm kernels (the
 * row kernel, the lean row kernel and the persistent TMA-pipelined one,
 * kernels/ar_rmsnorm*.cu) and the default launch rule at awkward shapes
 * against a float64 reference: outputs poisoned (bf16 NaN) first so a row or vector never
 * written fails, every row scaled differently so a row normalised with another row's sum of
 * squares fails, inputs unchanged afterwards, residual_out bitwise equal across all
 * configurations, the pipelined kernel bitwise equal to the row kernel at the same threads
 * per block, in place (sum == residual_out, how the incumbent calls it) and as a captured
 * graph; configurations a shape cannot take are refused with BK_ERR_INPUT; with programmatic
 * dependent launch (cfg.pdl), every kernel waits for a kernel before it that writes the
 * inputs late. Exit 77 (skipped) without a usable GPU. */
#ifndef BK_HAVE_CUDA
#include <stdio.h>
int main(void)
{
    printf("test_rmsnorm_cuda: SKIP: built without the cuda backend\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/bf16.h"
#include "kernels/cuda_variants.h"
#include "pdl_writer.h"
#include "test_filter.h"

#define CK(call) assert_int_equal((int)(call), (int)cudaSuccess)
#define ATOL 1e-3
#define RTOL 8e-3 /* one bf16 rounding of an fp32 result, plus fp32 sum order */
#define BIG_ELEMS (8u << 20) /* above this many elements: the pruned configuration list */

static uint64_t g_seed;
static cudaStream_t g_stream;
static int g_sm90;

static const int64_t k_tokens[] = { 1, 3, 131, 1000, 5000 };
static const int64_t k_hidden[] = { 8, 1024, 4104, 6144, 7168, 8192, 16384 };
#define NT (int)(sizeof k_tokens / sizeof k_tokens[0])
#define NH (int)(sizeof k_hidden / sizeof k_hidden[0])

/* ---------------------------------------------------------------- configurations */

#define MAX_CFGS 64

/* Every configuration for a shape: the row kernel's full set; the pipelined kernel at
 * every stage count (1..4, auto) x blocks per SM (auto, 1: many rows per block, the
 * refill path) x 256/512/1024 threads, hints on at auto settings, and 32/128 threads; the
 * lean kernel at 32..1024 threads x hints x gamma early.
 * Shapes above BIG_ELEMS keep stages 2 and auto only. */
static int make_cfgs(bk_rmsnorm_cfg *c, int64_t tokens, int64_t hidden)
{
    static const int row_threads[] = { 32, 128, 256, 512 };
    static const int pipe_threads[] = { 256, 512, 1024 };
    const int big = (uint64_t)tokens * (uint64_t)hidden > BIG_ELEMS;
    int n = 0;
    for (int t = 0; t < 4; t++)
        for (int h = 0; h < 2; h++)
            c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_ROW, row_threads[t], h, 0, 0, 0, 0, 0 };
    for (int t = 0; t < 3; t++) {
        for (int s = 0; s <= 4; s++) {
            if (big && s != 0 && s != 2)
                continue;
            for (int b = 0; b < 2; b++)
                c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_PIPE, pipe_threads[t], 0, s, b, 0, 0, 0 };
        }
        c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_PIPE, pipe_threads[t], 1, 0, 0, 0, 0, 0 };
    }
    for (int t = 0; t < 5; t++)
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 2; e++)
                c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_LEAN,
                                           (int[]){ 32, 128, 256, 512, 1024 }[t], h, 0, 0, e, 0,
                                           0 };
    c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_PIPE, 32, 0, 2, 1, 0, 0, 0 };
    c[n++] = (bk_rmsnorm_cfg){ BK_RMSNORM_PIPE, 128, 1, 3, 2, 0, 0, 0 };
    assert_true(n <= MAX_CFGS);
    return n;
}

/* Threads per block the launcher's rule gives (kernels/ar_rmsnorm_dev.cuh, bk__row_config),
 * or 0 when the configuration cannot run at this hidden: more than 8 vectors per thread;
 * the lean kernel with more than 2 above 512 threads or with gamma early;
 * the pipelined kernel above 512 threads with more than 2, or with more shared memory
 * than an H100/H200 block may take (227 KB less the barriers' room). */
static int expect_threads(const bk_rmsnorm_cfg *c, int64_t hidden)
{
    const int nvec = (int)(hidden / 8);
    int k = (nvec + c->threads - 1) / c->threads;
    k = k < 1 ? 1 : k;
    const int t = ((nvec + k - 1) / k + 31) / 32 * 32;
    if (k > 8)
        return 0;
    if (c->kernel == BK_RMSNORM_LEAN && (t > 512 || c->gamma_early) && k > 2)
        return 0;
    if (c->kernel == BK_RMSNORM_PIPE) {
        if (t > 512 && k > 2)
            return 0;
        if (c->stages > 0 && 128 + (int64_t)c->stages * 4 * hidden > 227 * 1024 - 256)
            return 0;
    }
    return t;
}

static void cfg_name(const bk_rmsnorm_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s threads %d hint %d stages %d blocks/SM %d gamma early %d",
             c->kernel == BK_RMSNORM_PIPE ? "pipe" : c->kernel == BK_RMSNORM_LEAN ? "lean" : "row",
             c->threads, c->stream_hint, c->stages, c->blocks_per_sm, c->gamma_early);
}

/* ---------------------------------------------------------------- one shape */

typedef struct shape_data {
    int64_t tokens, hidden;
    size_t n;
    uint16_t *x, *res, *gamma; /* host inputs */
    double *ref_ro, *ref_out;  /* float64 reference */
    void *dx, *dres, *dgamma, *dro, *dout;
    uint16_t *ro, *out;         /* host copies of the outputs of the last run */
    uint16_t *canon_ro;         /* residual_out of the first configuration that ran */
    uint16_t *canon_out[1025];  /* out of the first configuration per threads per block */
} shape_data;

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Inputs: uniform in [-1, 1] times a per-row scale (sum and residual scaled differently,
 * 13 and 7 distinct scales), so no two nearby rows share a sum of squares. */
static void shape_make(shape_data *d, int64_t tokens, int64_t hidden, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->tokens = tokens;
    d->hidden = hidden;
    d->n = (size_t)tokens * (size_t)hidden;
    const size_t b = d->n * 2;
    d->x = malloc(b);
    d->res = malloc(b);
    d->gamma = malloc((size_t)hidden * 2);
    d->ro = malloc(b);
    d->out = malloc(b);
    d->ref_ro = malloc(d->n * sizeof(double));
    d->ref_out = malloc(d->n * sizeof(double));
    assert_true(d->x && d->res && d->gamma && d->ro && d->out && d->ref_ro && d->ref_out);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t t = 0; t < tokens; t++) {
        const double sx = 0.25 * (1 + t % 13), sr = 0.5 * (1 + t % 7);
        for (int64_t h = 0; h < hidden; h++) {
            const double u = (double)(rng(&s) >> 11) / 9007199254740992.0 * 2 - 1;
            const double v = (double)(rng(&s) >> 11) / 9007199254740992.0 * 2 - 1;
            d->x[t * hidden + h] = bk_bf16_from_f32((float)(sx * u));
            d->res[t * hidden + h] = bk_bf16_from_f32((float)(sr * v));
        }
    }
    for (int64_t h = 0; h < hidden; h++)
        d->gamma[h] = bk_bf16_from_f32((float)(0.5 + (double)(rng(&s) >> 11) / 9007199254740992.0));
    for (int64_t t = 0; t < tokens; t++) {
        double ss = 0;
        for (int64_t h = 0; h < hidden; h++) {
            const size_t i = (size_t)t * hidden + h;
            const double sum = (double)bk_bf16_to_f32(d->x[i]) + bk_bf16_to_f32(d->res[i]);
            /* the norm reads residual_out as stored: bf16 of the fp32 sum */
            const double r = bk_bf16_to_f32(bk_bf16_from_f32((float)sum));
            d->ref_ro[i] = sum;
            ss += r * r;
        }
        const double inv = 1.0 / sqrt(ss / (double)hidden + (double)BK_RMSNORM_EPS);
        for (int64_t h = 0; h < hidden; h++) {
            const size_t i = (size_t)t * hidden + h;
            const double r = bk_bf16_to_f32(bk_bf16_from_f32((float)d->ref_ro[i]));
            d->ref_out[i] = r * inv * bk_bf16_to_f32(d->gamma[h]);
        }
    }
    CK(cudaMalloc(&d->dx, b));
    CK(cudaMalloc(&d->dres, b));
    CK(cudaMalloc(&d->dgamma, (size_t)hidden * 2));
    CK(cudaMalloc(&d->dro, b));
    CK(cudaMalloc(&d->dout, b));
    CK(cudaMemcpy(d->dx, d->x, b, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->dres, d->res, b, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d->dgamma, d->gamma, (size_t)hidden * 2, cudaMemcpyHostToDevice));
    /* cudaMemcpy runs on the legacy stream, which does not order g_stream (non-blocking),
     * and may return before a pageable upload has landed: finish it before any launch */
    CK(cudaDeviceSynchronize());
}

static void shape_free(shape_data *d)
{
    free(d->x);
    free(d->res);
    free(d->gamma);
    free(d->ro);
    free(d->out);
    free(d->ref_ro);
    free(d->ref_out);
    free(d->canon_ro);
    for (int i = 0; i <= 1024; i++)
        free(d->canon_out[i]);
    (void)cudaFree(d->dx);
    (void)cudaFree(d->dres);
    (void)cudaFree(d->dgamma);
    (void)cudaFree(d->dro);
    (void)cudaFree(d->dout);
}

static void poison(shape_data *d)
{
    CK(cudaMemsetAsync(d->dro, 0xFF, d->n * 2, g_stream));
    CK(cudaMemsetAsync(d->dout, 0xFF, d->n * 2, g_stream));
}

/* The last run's outputs against the float64 reference; fails naming the first bad
 * element and how many are bad: of those, how many still hold the poison's bits (0xFFFF, an
 * element never written) and how many other NaNs (0x7FFF and the like: computed from a NaN,
 * an input read before it was written), which tells the two ways to fail apart. */
static void check_ref(const shape_data *d, const uint16_t *ro, const uint16_t *out,
                      const char *what)
{
    size_t bad = 0, first = 0, unwritten = 0, nan = 0;
    for (size_t i = 0; i < d->n; i++) {
        const double a = bk_bf16_to_f32(ro[i]), b = bk_bf16_to_f32(out[i]);
        const double ea = ATOL + RTOL * fabs(d->ref_ro[i]), eb = ATOL + RTOL * fabs(d->ref_out[i]);
        if (fabs(a - d->ref_ro[i]) <= ea && fabs(b - d->ref_out[i]) <= eb)
            continue;
        if (bad++ == 0)
            first = i;
        unwritten += (ro[i] == 0xFFFFu) + (out[i] == 0xFFFFu);
        nan += (ro[i] != 0xFFFFu && isnan(a)) + (out[i] != 0xFFFFu && isnan(b));
    }
    if (bad)
        fail_msg("%s: T %lld H %lld row %zu col %zu: residual_out %g (ref %.9g), out %g "
                 "(ref %.9g); %zu of %zu elements off, their outputs %zu still poisoned "
                 "(never written), %zu other NaN (seed %llu)", what, (long long)d->tokens,
                 (long long)d->hidden, first / (size_t)d->hidden, first % (size_t)d->hidden,
                 bk_bf16_to_f32(ro[first]), d->ref_ro[first], bk_bf16_to_f32(out[first]),
                 d->ref_out[first], bad, d->n, unwritten, nan, (unsigned long long)g_seed);
}

static void fetch(shape_data *d)
{
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(d->ro, d->dro, d->n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(d->out, d->dout, d->n * 2, cudaMemcpyDeviceToHost));
}

/* The fetched outputs: residual_out bitwise equal to the first configuration's; out
 * bitwise equal to the first configuration's at the same threads per block (same
 * reduction order), the first of each checked against float64; a configuration that
 * differs bitwise is reported and must still match float64. */
static void judge(shape_data *d, int threads, const char *what)
{
    const size_t b = d->n * 2;
    if (!d->canon_ro) {
        check_ref(d, d->ro, d->out, what);
        d->canon_ro = malloc(b);
        assert_non_null(d->canon_ro);
        memcpy(d->canon_ro, d->ro, b);
    } else if (memcmp(d->canon_ro, d->ro, b) != 0) {
        check_ref(d, d->ro, d->out, what);
        fail_msg("%s: T %lld H %lld: residual_out differs bitwise from the first "
                 "configuration's (an elementwise fp32 add + bf16 round must not)", what,
                 (long long)d->tokens, (long long)d->hidden);
    }
    if (!d->canon_out[threads]) {
        check_ref(d, d->ro, d->out, what);
        d->canon_out[threads] = malloc(b);
        assert_non_null(d->canon_out[threads]);
        memcpy(d->canon_out[threads], d->out, b);
    } else if (memcmp(d->canon_out[threads], d->out, b) != 0) {
        check_ref(d, d->ro, d->out, what);
        printf("  NOTE %s: T %lld H %lld: out within tolerance but not bitwise equal to the "
               "first configuration at %d threads\n", what, (long long)d->tokens,
               (long long)d->hidden, threads);
    }
}

static bk_status run_cfg(shape_data *d, const void *sum, const bk_rmsnorm_cfg *c, bk_err *err)
{
    return bk_residual_rmsnorm_config(sum, d->dres, d->dgamma, d->dro, d->dout, d->tokens,
                                      d->hidden, BK_RMSNORM_EPS, c, g_stream, err);
}

static void inputs_unchanged(shape_data *d)
{
    uint16_t *now = malloc(d->n * 2);
    assert_non_null(now);
    CK(cudaMemcpy(now, d->dx, d->n * 2, cudaMemcpyDeviceToHost));
    if (memcmp(now, d->x, d->n * 2) != 0)
        fail_msg("T %lld H %lld: input sum was modified", (long long)d->tokens,
                 (long long)d->hidden);
    CK(cudaMemcpy(now, d->dres, d->n * 2, cudaMemcpyDeviceToHost));
    if (memcmp(now, d->res, d->n * 2) != 0)
        fail_msg("T %lld H %lld: input residual was modified", (long long)d->tokens,
                 (long long)d->hidden);
    free(now);
}

/* cfg.split: a row over 2, 4 or 8 blocks of the lean kernel with gamma early (512 and 1024
 * threads, evict-first hints or not) gives bitwise the outputs of one block of the same
 * launch, and is refused in place (sum is residual_out) before anything runs. */
static void split_rows(shape_data *d)
{
    static const int splits[] = { 2, 4, 8 };
    const size_t b = d->n * 2;
    uint16_t *ro1 = malloc(b), *out1 = malloc(b);
    char what[160];
    assert_non_null(ro1);
    assert_non_null(out1);
    for (int t = 0; t < 2; t++)
        for (int e = 0; e < 2; e++) {
            bk_rmsnorm_cfg c = { BK_RMSNORM_LEAN, t ? 1024 : 512, e, 0, 0, 1, 1, 0 };
            bk_err err = { 0 };
            if (expect_threads(&c, d->hidden) == 0)
                continue;
            poison(d);
            if (run_cfg(d, d->dx, &c, &err) != BK_OK)
                fail_msg("lean %d hint %d split 1: %s", c.threads, e, err.msg);
            fetch(d);
            memcpy(ro1, d->ro, b);
            memcpy(out1, d->out, b);
            for (int k = 0; k < 3; k++) {
                c.split = splits[k];
                snprintf(what, sizeof what, "lean %d gamma early hint %d split %d", c.threads,
                         e, c.split);
                poison(d);
                if (run_cfg(d, d->dx, &c, &err) != BK_OK)
                    fail_msg("%s: T %lld H %lld: %s", what, (long long)d->tokens,
                             (long long)d->hidden, err.msg);
                fetch(d);
                check_ref(d, d->ro, d->out, what);
                if (memcmp(ro1, d->ro, b) != 0 || memcmp(out1, d->out, b) != 0)
                    fail_msg("%s: T %lld H %lld: outputs differ bitwise from one block per "
                             "row", what, (long long)d->tokens, (long long)d->hidden);
                /* in place: refused, and nothing written */
                poison(d);
                CK(cudaMemcpyAsync(d->dro, d->dx, b, cudaMemcpyDeviceToDevice, g_stream));
                if (run_cfg(d, d->dro, &c, &err) != BK_ERR_INPUT)
                    fail_msg("%s in place: not refused", what);
                fetch(d);
                if (memcmp(d->ro, d->x, b) != 0)
                    fail_msg("%s in place: refused, yet residual_out was written", what);
            }
        }
    free(ro1);
    free(out1);
}

static void run_shape(int64_t tokens, int64_t hidden, uint64_t seed)
{
    shape_data d;
    bk_rmsnorm_cfg cfgs[MAX_CFGS];
    char what[160];
    int ran = 0, refused = 0;
    shape_make(&d, tokens, hidden, seed);
    const int n = make_cfgs(cfgs, tokens, hidden);
    for (int i = 0; i < n; i++) {
        bk_err err = { 0 };
        const bk_rmsnorm_cfg *c = &cfgs[i];
        const int want = expect_threads(c, hidden);
        cfg_name(c, what, sizeof what);
        if (c->kernel == BK_RMSNORM_PIPE && !g_sm90) {
            assert_int_equal(run_cfg(&d, d.dx, c, &err), BK_ERR_UNSUPPORTED);
            continue;
        }
        poison(&d);
        bk_status st = run_cfg(&d, d.dx, c, &err);
        if (want == 0) {
            if (st != BK_ERR_INPUT)
                fail_msg("%s: T %lld H %lld should be refused, got %d (%s)", what,
                         (long long)tokens, (long long)hidden, (int)st, err.msg);
            refused++;
            continue;
        }
        if (st != BK_OK)
            fail_msg("%s: T %lld H %lld: %s", what, (long long)tokens, (long long)hidden,
                     err.msg);
        fetch(&d);
        judge(&d, want, what);
        ran++;
    }
    inputs_unchanged(&d);
    /* in place, as the incumbent calls it: sum is residual_out */
    const bk_rmsnorm_cfg inplace[] = { { BK_RMSNORM_ROW, 512, 1, 0, 0, 0, 0, 0 },
                                       { BK_RMSNORM_LEAN, 512, 1, 0, 0, 0, 0, 0 },
                                       { BK_RMSNORM_LEAN, 1024, 0, 0, 0, 0, 0, 0 },
                                       { BK_RMSNORM_PIPE, 512, 0, 2, 1, 0, 0, 0 },
                                       { BK_RMSNORM_PIPE, 256, 1, 0, 0, 0, 0, 0 } };
    for (int i = 0; i < 5; i++) {
        if (inplace[i].kernel == BK_RMSNORM_PIPE && !g_sm90)
            continue;
        bk_err err = { 0 };
        const int want = expect_threads(&inplace[i], hidden);
        if (want == 0)
            continue;
        cfg_name(&inplace[i], what, sizeof what);
        strncat(what, " in place", sizeof what - strlen(what) - 1);
        poison(&d);
        CK(cudaMemcpyAsync(d.dro, d.dx, d.n * 2, cudaMemcpyDeviceToDevice, g_stream));
        if (run_cfg(&d, d.dro, &inplace[i], &err) != BK_OK)
            fail_msg("%s: %s", what, err.msg);
        fetch(&d);
        judge(&d, want, what);
    }
    split_rows(&d);
    /* the default launch rule (bk__rmsnorm_launch in kernels/ar_rmsnorm.cu) */
    {
        bk_err err = { 0 };
        poison(&d);
        if (bk_residual_rmsnorm(d.dx, d.dres, d.dgamma, d.dro, d.dout, d.tokens, d.hidden,
                                BK_RMSNORM_EPS, g_stream, &err) != BK_OK)
            fail_msg("default rule: T %lld H %lld: %s", (long long)tokens, (long long)hidden,
                     err.msg);
        fetch(&d);
        check_ref(&d, d.ro, d.out, "default rule");
        /* in place, as the incumbent calls it: one block a row (rows split over blocks
         * would read sums another block has overwritten) */
        poison(&d);
        CK(cudaMemcpyAsync(d.dro, d.dx, d.n * 2, cudaMemcpyDeviceToDevice, g_stream));
        if (bk_residual_rmsnorm(d.dro, d.dres, d.dgamma, d.dro, d.dout, d.tokens, d.hidden,
                                BK_RMSNORM_EPS, g_stream, &err) != BK_OK)
            fail_msg("default rule in place: T %lld H %lld: %s", (long long)tokens,
                     (long long)hidden, err.msg);
        fetch(&d);
        check_ref(&d, d.ro, d.out, "default rule in place");
    }
    inputs_unchanged(&d);
    printf("  T %5lld H %5lld: %d configurations ran, %d refused as expected\n",
           (long long)tokens, (long long)hidden, ran, refused);
    shape_free(&d);
}

/* ---------------------------------------------------------------- tests */

/* Runs first: a pipelined instantiation's very first call is inside a stream capture
 * (its one-time shared-memory attribute and occupancy query happen during capture);
 * the graph is replayed twice over poisoned outputs. */
static void test_graph_first_call(void **st)
{
    (void)st;
    if (!g_sm90)
        skip();
    shape_data d;
    const bk_rmsnorm_cfg c = { BK_RMSNORM_PIPE, 1024, 1, 3, 0, 0, 0, 0 };
    bk_err err = { 0 };
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    shape_make(&d, 1000, 4104, g_seed + 7);
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    bk_status rs = run_cfg(&d, d.dx, &c, &err);
    CK(cudaStreamEndCapture(g_stream, &g));
    if (rs != BK_OK)
        fail_msg("capture: %s", err.msg);
    CK(cudaGraphInstantiate(&ex, g, 0));
    for (int rep = 0; rep < 2; rep++) {
        poison(&d);
        CK(cudaGraphLaunch(ex, g_stream));
        fetch(&d);
        judge(&d, expect_threads(&c, 4104), "pipe graph");
    }
    inputs_unchanged(&d);
    (void)cudaGraphExecDestroy(ex);
    (void)cudaGraphDestroy(g);
    shape_free(&d);
}

/* cfg.pdl at one shape: the launch without pdl first (the outputs to match), then twice,
 * eagerly and captured in a graph, right after a kernel that lets it be scheduled at once
 * and only 200 us later writes x, residual and gamma over their poisoned (NaN) buffers:
 * each launch must wait for that kernel before its first load (bk__pdl_wait), or it
 * reads NaN and fails the float64 check. */
static void pdl_shape(int64_t tokens, int64_t hidden, const bk_rmsnorm_cfg *cfg, uint64_t seed)
{
    shape_data d;
    bk_err err = { 0 };
    char what[96];
    bk_rmsnorm_cfg c = *cfg;
    shape_make(&d, tokens, hidden, seed);
    const int threads = expect_threads(&c, hidden);
    assert_true(threads > 0);
    c.pdl = 0;
    poison(&d);
    if (run_cfg(&d, d.dx, &c, &err) != BK_OK)
        fail_msg("T %lld H %lld without pdl: %s", (long long)tokens, (long long)hidden, err.msg);
    fetch(&d);
    judge(&d, threads, "without pdl");
    const size_t bytes[3] = { d.n * 2, d.n * 2, (size_t)hidden * 2 };
    void *saved[3] = { NULL, NULL, NULL }, *const dst[3] = { d.dx, d.dres, d.dgamma };
    for (int k = 0; k < 3; k++) {
        CK(cudaMalloc(&saved[k], bytes[k]));
        CK(cudaMemcpy(saved[k], dst[k], bytes[k], cudaMemcpyDeviceToDevice));
    }
    /* A device-to-device cudaMemcpy returns at once, on the legacy stream, which does not
     * order g_stream: unfinished, these copies could read the inputs after the poisoning
     * below (on g_stream) and save NaN, or the writer could copy saved buffers not yet
     * written (a freed buffer's old poison), whenever another process's kernels delayed
     * them (thirty-first session: test_pdl failed 6 of 10 runs beside bench_rmsnorm). */
    CK(cudaDeviceSynchronize());
    c.pdl = 1;
    for (int graph = 0; graph < 2; graph++) {
        cudaGraph_t g = NULL;
        cudaGraphExec_t ex = NULL;
        snprintf(what, sizeof what, "pdl %s after a late writer", graph ? "graph" : "eager");
        for (int k = 0; k < 3; k++)
            CK(cudaMemsetAsync(dst[k], 0xFF, bytes[k], g_stream));
        poison(&d);
        if (graph)
            CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
        CK(bk_test_pdl_writer((const void *const *)saved, dst, bytes, PDL_WRITER_NS, g_stream));
        const bk_status rs = run_cfg(&d, d.dx, &c, &err);
        if (graph) {
            CK(cudaStreamEndCapture(g_stream, &g));
            if (rs == BK_OK) {
                CK(cudaGraphInstantiate(&ex, g, 0));
                CK(cudaGraphLaunch(ex, g_stream));
            }
        }
        if (rs != BK_OK)
            fail_msg("%s: T %lld H %lld: %s", what, (long long)tokens, (long long)hidden,
                     err.msg);
        fetch(&d);
        judge(&d, threads, what);
        if (ex)
            (void)cudaGraphExecDestroy(ex);
        if (g)
            (void)cudaGraphDestroy(g);
    }
    for (int k = 0; k < 3; k++)
        (void)cudaFree(saved[k]);
    shape_free(&d);
}

/* cfg.pdl with every kernel the default rule picks (the lean kernel over several blocks a row,
 * one block a row, the row kernel) and the pipelined kernel on sm_90. */
static void test_pdl(void **st)
{
    (void)st;
    static const int64_t shapes[][2] = { { 3, 8192 }, { 131, 6144 }, { 1024, 4096 } };
    bk_rmsnorm_cfg c;
    int kinds = 0;
    for (int i = 0; i < 3; i++) {
        bk_rmsnorm_default_cfg(shapes[i][0], shapes[i][1], 0, &c);
        kinds |= 1 << (c.kernel == BK_RMSNORM_ROW ? 0 : c.split > 1 ? 1 : 2);
        pdl_shape(shapes[i][0], shapes[i][1], &c, g_seed + 100 + (uint64_t)i);
    }
    assert_int_equal(kinds, 7); /* the rule still picks all three here */
    if (g_sm90) {
        const bk_rmsnorm_cfg pipe = { BK_RMSNORM_PIPE, 512, 1, 2, 0, 0, 0, 1 };
        pdl_shape(1000, 4104, &pipe, g_seed + 103);
    }
}

/* BK_TEST_MAX_TOKENS=N (scripts/gpu-run.sh's racecheck, which is too slow for the 1000- and
 * 5000-token rows) leaves out the shapes of more tokens, BK_TEST_MIN_TOKENS=N those of fewer
 * (so that the slow rows can run under the tool in calls of their own), and says so. Unset
 * or empty: no bound (0); anything but a whole number from 1 is refused in main. */
static long long g_max_tokens, g_min_tokens;

/* *out = the whole number in NAME (0 when unset or empty); 0 and a message when it is not one
 * from 1 to 10^9 */
static int env_tokens(const char *name, long long *out)
{
    const char *env = getenv(name);
    *out = 0;
    if (!env || !*env)
        return 1;
    char *end = NULL;
    const long long v = strtoll(env, &end, 10);
    if (*end || end == env || v < 1 || v > 1000000000) {
        printf("test_rmsnorm_cuda: %s=%s: want a whole number of tokens from 1, or unset\n",
               name, env);
        return 0;
    }
    *out = v;
    return 1;
}

static void test_all_configs(void **st)
{
    (void)st;
    const long long max = g_max_tokens, min = g_min_tokens;
    int left_out = 0;
    for (int ti = 0; ti < NT; ti++)
        for (int hi = 0; hi < NH; hi++) {
            if ((max > 0 && k_tokens[ti] > max) || k_tokens[ti] < min) {
                left_out++;
                continue;
            }
            run_shape(k_tokens[ti], k_hidden[hi], g_seed + (uint64_t)(ti * NH + hi));
        }
    char bounds[96]; /* only the bounds that are set (%.0lld prints nothing for 0) */
    snprintf(bounds, sizeof bounds, "%s%.0lld%s%s%.0lld", min ? "BK_TEST_MIN_TOKENS=" : "", min,
             min && max ? " " : "", max ? "BK_TEST_MAX_TOKENS=" : "", max);
    if (left_out == NT * NH)
        fail_msg("test_all_configs: %s leaves out every shape (tokens run %lld to %lld)", bounds,
                 (long long)k_tokens[0], (long long)k_tokens[NT - 1]);
    if (left_out)
        printf("test_all_configs: %s: %d of %d shapes LEFT OUT (fewer or more tokens): this run "
               "does not cover them\n", bounds, left_out, NT * NH);
}

/* The default rule's waves come from this device (bk_rmsnorm_occ_device): its SM count and
 * the blocks per SM of the launches the rule weighs, which must be the compiled kernels' own
 * (bk_rmsnorm_cfg_blocks_per_sm of the very configurations the rule picks), and the default
 * must be the rule on them. Switches: 512 threads at one wave of the mid launch, one row past
 * it 1024 (or a one-wave launch); at a full wave of 512 without gamma early, that launch. On
 * an sm_90 GPU of 132 SMs (H200, H100 SXM) the counts must also be the H200 table the rule
 * falls back to without a device (bk_rmsnorm_occ_h200); elsewhere that is said, not checked. */
static void test_rule_waves(void **st)
{
    (void)st;
    static const int64_t hidden[] = {4104, 4608, 4616, 5120, 5632, 5640, 6144, 6152, 6656,
                                     6664, 7168, 8192, 8200, 9216, 9992, 12288, 14848, 15368,
                                     16384};
    int sms = 0, major = 0;
    assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0),
                     cudaSuccess);
    assert_int_equal(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0),
                     cudaSuccess);
    const int h200 = sms == 132 && major == 9;
    int table_checked = 0, one_wave = 0;
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        const int64_t H = hidden[i];
        bk_rmsnorm_occ occ, tab;
        assert_int_equal(bk_rmsnorm_occ_device(H, &occ), 1);
        assert_int_equal(occ.sms, sms);
        if (occ.mid < 1)
            fail_msg("hidden %lld: the mid launch's blocks per SM unknown on this device",
                     (long long)H);
        if (H <= 8192 && (occ.l512 < 1 || occ.l256 < 1))
            fail_msg("hidden %lld: one-wave launches' blocks per SM unknown (%d, %d)",
                     (long long)H, occ.l512, occ.l256);
        bk_rmsnorm_occ_h200(H, &tab);
        if (h200) {
            const int *d[3] = {&occ.mid, &occ.l512, &occ.l256}, *t[3] = {&tab.mid, &tab.l512,
                                                                           &tab.l256};
            static const char *name[3] = {"mid", "l512", "l256"};
            for (int k = 0; k < 3; k++) {
                if (*t[k] && *d[k] != *t[k])
                    fail_msg("hidden %lld: %s fits %d blocks an SM here; the H200 table says "
                             "%d", (long long)H, name[k], *d[k], *t[k]);
                table_checked += *t[k] != 0;
            }
        }
        for (int64_t t = 1; t <= 1100; t += t < 200 ? 37 : 3) {
            bk_rmsnorm_cfg a, b;
            bk_rmsnorm_default_cfg(t, H, 0, &a);
            bk_rmsnorm_rule_cfg(t, H, 0, &occ, &b);
            if (memcmp(&a, &b, sizeof a) != 0)
                fail_msg("hidden %lld x %lld: the default is not the rule on this device",
                         (long long)H, (long long)t);
        }
        bk_rmsnorm_cfg at, past;
        bk_rmsnorm_default_cfg(256, H, 0, &at);
        assert_int_equal(at.threads, 512);
        const int bps = bk_rmsnorm_cfg_blocks_per_sm(&at, H);
        if (bps != occ.mid)
            fail_msg("hidden %lld: the mid launch fits %d blocks an SM; the rule's wave assumes "
                     "%d", (long long)H, bps, occ.mid);
        const int64_t wave = (int64_t)sms * occ.mid;
        const int64_t end = H <= 12288 ? 1024 : 352;
        if (wave >= 256 && wave + 1 < end) {
            bk_rmsnorm_default_cfg(wave, H, 0, &at);
            bk_rmsnorm_default_cfg(wave + 1, H, 0, &past);
            if (at.threads != 512 || (past.threads == 512 && past.gamma_early == at.gamma_early))
                fail_msg("hidden %lld: %d threads at one wave (%lld rows), %d (gamma early %d) "
                         "one row past it", (long long)H, at.threads, (long long)wave,
                         past.threads, past.gamma_early);
        }
        const int64_t rows = (int64_t)sms * occ.l512;
        if (H <= 8192 && rows > wave && rows >= 256 && rows < 1024) {
            bk_rmsnorm_default_cfg(rows, H, 0, &at);
            if (at.threads != 512 || at.gamma_early || at.stream_hint)
                fail_msg("hidden %lld x %lld (one wave of l512): %d threads, gamma early %d, "
                         "hint %d", (long long)H, (long long)rows, at.threads, at.gamma_early,
                         at.stream_hint);
            const int n = bk_rmsnorm_cfg_blocks_per_sm(&at, H);
            if (n != occ.l512)
                fail_msg("hidden %lld: l512 fits %d blocks an SM, the rule assumes %d",
                         (long long)H, n, occ.l512);
            one_wave++;
        }
    }
    if (h200) { /* at least the table's 4616, 5120, 5640, 6144, 6664, 7168, 8192 */
        assert_true(one_wave >= 7);
        assert_true(table_checked >= 20);
    } else
        printf("test_rule_waves: this GPU (sm_%d0, %d SMs) is not the H200 the rule's fallback "
               "table was measured on: the device's own counts checked, the table NOT "
               "checked\n", major, sms);
}

/* Misaligned pointers, bad stage counts and too much shared memory are refused clearly;
 * zero tokens is a no-op. */
static void test_refusals(void **st)
{
    (void)st;
    if (!g_sm90)
        skip();
    shape_data d;
    bk_err err = { 0 };
    shape_make(&d, 4, 16384, g_seed);
    bk_rmsnorm_cfg c = { BK_RMSNORM_PIPE, 512, 0, 2, 0, 0, 0, 0 };
    assert_int_equal(bk_residual_rmsnorm_config((const char *)d.dx + 8, d.dres, d.dgamma, d.dro,
                                                d.dout, 2, 8, BK_RMSNORM_EPS, &c, g_stream,
                                                &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "aligned"));
    c.stages = 5;
    bk_err_clear(&err);
    assert_int_equal(run_cfg(&d, d.dx, &c, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "stages"));
    c.stages = 4; /* 4 x 64 KB at hidden 16384 */
    bk_err_clear(&err);
    assert_int_equal(run_cfg(&d, d.dx, &c, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "shared memory"));
    c.stages = 0;
    bk_err_clear(&err);
    assert_int_equal(bk_residual_rmsnorm_config(d.dx, d.dres, d.dgamma, d.dro, d.dout, 0, 16384,
                                                BK_RMSNORM_EPS, &c, g_stream, &err), BK_OK);
    shape_free(&d);
}

int main(void)
{
    int n = 0, major = 0;
    if (!env_tokens("BK_TEST_MAX_TOKENS", &g_max_tokens) ||
        !env_tokens("BK_TEST_MIN_TOKENS", &g_min_tokens))
        return 1;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("test_rmsnorm_cuda: SKIP: no usable CUDA device\n");
        return 77;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess)
        return 1;
    g_sm90 = major >= 9;
    const char *env = getenv("BK_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test_rmsnorm_cuda: seed %llu (BK_TEST_SEED to repeat)%s\n",
           (unsigned long long)g_seed, g_sm90 ? "" : "; below sm_90: the pipelined kernel "
           "must refuse");
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    bk_test_filter("test_rmsnorm_cuda");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_first_call),
        cmocka_unit_test(test_all_configs),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pdl),
        cmocka_unit_test(test_rule_waves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* BK_HAVE_CUDA */
