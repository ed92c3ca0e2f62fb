/* ar_rmsnorm.c - the collective.allreduce_residual_rmsnorm target: tensors, seeded inputs,
 * the float64 reference, bytes moved and the peer-memory layout its variants share.
 *
 * Math, per rank of a lane of n ranks, all tensors bf16:
 *   residual_out = bf16( sum_{r=0..n-1} x_r + residual )          (fp32 accumulation)
 *   out          = bf16( residual_out * gamma / sqrt(mean_row(residual_out^2) + 1e-6) )
 * The definition chosen: the norm is computed from residual_out AS STORED (rounded
 * to bf16), so `out` is a pure function of the residual_out a consumer sees (the
 * next layer's residual), as in serving stacks that keep the residual in bf16.
 * The reference follows it in float64: the exact sum rounded once to bf16 gives
 * residual_out, and `out` is computed from it in float64 without a final rounding.
 * A kernel may differ from it by one bf16 ulp of residual_out where its fp32 sum
 * rounds across a bf16 boundary, plus the rounding of `out`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"

#define BK_AR_ALIGN 64

static size_t align_up(size_t v) { return (v + BK_AR_ALIGN - 1) / BK_AR_ALIGN * BK_AR_ALIGN; }

bk__ar_layout bk__ar_layout_of(const bk_shape *s, int world)
{
    bk__ar_layout l = { 0 };
    if (world < 1)
        world = 1;
    l.n = (size_t)s->tokens * (size_t)s->hidden;
    l.chunk = (l.n + (size_t)world - 1) / (size_t)world;
    l.x_off = 0;
    l.red_off = align_up(l.n * 2);
    l.bytes = l.red_off + align_up(l.chunk * sizeof(float));
    return l;
}

static size_t ar_tensor_elems(const bk_shape *s, int world, int idx)
{
    (void)world;
    if (idx == BK_AR_GAMMA)
        return (size_t)s->hidden;
    return (size_t)s->tokens * (size_t)s->hidden;
}

static size_t ar_tensor_elem_bytes(int idx)
{
    (void)idx;
    return 2;
}

/* x in [-1, 1) (rank's own), residual in [-1, 1) and gamma in [0.5, 1.5)
 * (rank-independent); each rounded to bf16 and kept inside its interval. */
static void fill_x_like(uint16_t *dst, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t b = bk_bf16_from_f32(2.0f * bk__stream_unit(key, i) - 1.0f);
        dst[i] = bk_bf16_to_f32(b) >= 1.0f ? (uint16_t)0x3F7F : b; /* 0.99609375 */
    }
}

static void fill_gamma(uint16_t *dst, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t b = bk_bf16_from_f32(0.5f + bk__stream_unit(key, i));
        dst[i] = bk_bf16_to_f32(b) >= 1.5f ? (uint16_t)0x3FBF : b; /* 1.4921875 */
    }
}

static void ar_init_inputs(bk_tensor *t, const bk_shape *s, uint64_t seed, int shape_index,
                           int rank, int world)
{
    size_t n = (size_t)s->tokens * (size_t)s->hidden;
    (void)world;
    if (t[BK_AR_X].data)
        fill_x_like(t[BK_AR_X].data, n, bk__stream_key(seed, shape_index, rank, BK_AR_X));
    if (t[BK_AR_RESIDUAL].data)
        fill_x_like(t[BK_AR_RESIDUAL].data, n,
                    bk__stream_key(seed, shape_index, 0, BK_AR_RESIDUAL));
    if (t[BK_AR_GAMMA].data)
        fill_gamma(t[BK_AR_GAMMA].data, (size_t)s->hidden,
                   bk__stream_key(seed, shape_index, 0, BK_AR_GAMMA));
}

/* outs[0] = out, outs[1] = residual_out (the output tensors in order). Every
 * rank's outputs are the same; `rank` is accepted for the contract. */
static bk_status ar_reference(const bk_shape *s, uint64_t seed, int shape_index, int rank,
                              int world, double **outs, bk_err *err)
{
    bk_status st = BK_OK;
    size_t n = (size_t)s->tokens * (size_t)s->hidden, h = (size_t)s->hidden;
    uint16_t *buf = malloc((n ? n : 1) * sizeof *buf);
    uint16_t *gamma = malloc((h ? h : 1) * sizeof *gamma);
    double *out = malloc((n ? n : 1) * sizeof *out);
    double *ro = calloc(n ? n : 1, sizeof *ro);
    (void)rank;
    outs[0] = outs[1] = NULL;
    if (!buf || !gamma || !out || !ro) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "reference: out of memory for %zu elements", n);
        goto out;
    }
    /* Sums of at most a few hundred bf16 values of [-1, 1) are exact in float64. */
    for (int r = 0; r < world; r++) {
        fill_x_like(buf, n, bk__stream_key(seed, shape_index, r, BK_AR_X));
        for (size_t i = 0; i < n; i++)
            ro[i] += bk_bf16_to_f32(buf[i]);
    }
    fill_x_like(buf, n, bk__stream_key(seed, shape_index, 0, BK_AR_RESIDUAL));
    fill_gamma(gamma, h, bk__stream_key(seed, shape_index, 0, BK_AR_GAMMA));
    for (size_t i = 0; i < n; i++)
        ro[i] = bk_bf16_round_f64(ro[i] + bk_bf16_to_f32(buf[i]));
    for (size_t row = 0; row < (size_t)s->tokens; row++) {
        const double *v = ro + row * h;
        double ss = 0.0;
        for (size_t j = 0; j < h; j++)
            ss += v[j] * v[j];
        double inv = 1.0 / sqrt(ss / (double)h + BK_AR_EPS);
        for (size_t j = 0; j < h; j++)
            out[row * h + j] = v[j] * inv * bk_bf16_to_f32(gamma[j]);
    }
    outs[0] = out;
    outs[1] = ro;
    out = ro = NULL;
out:
    free(buf);
    free(gamma);
    free(out);
    free(ro);
    return st;
}

static size_t ar_peer_bytes(const bk_shape *s, int world)
{
    return bk__ar_layout_of(s, world).bytes;
}

#define BK_AR_MAX_ELEMS (1ll << 31)

/* 2^31 elements per tensor keeps every index and byte count far from overflow. The test
 * divides rather than multiplies, and the message gives the product in long double: a
 * product past INT64_MAX must not wrap into a small or negative number. */
static bk_status ar_check_shape(const bk_shape *s, int world, char *why, size_t why_len)
{
    (void)world;
    /* sizes this target does not take would make shapes that are one for its kernels count
     * as distinct (timed and weighted twice) */
    if (s->experts || s->topk || s->intermediate) {
        snprintf(why, why_len, "experts, topk and intermediate are sizes of MoE targets; this "
                 "one takes tokens and hidden alone (got experts %lld, topk %lld, intermediate "
                 "%lld)", (long long)s->experts, (long long)s->topk,
                 (long long)s->intermediate);
        return BK_ERR_INPUT;
    }
    if (s->tokens < 1 || s->hidden < 1) {
        snprintf(why, why_len, "tokens and hidden must be >= 1 (got tokens %lld, hidden %lld)",
                 (long long)s->tokens, (long long)s->hidden);
        return BK_ERR_INPUT;
    }
    if (s->tokens > BK_AR_MAX_ELEMS / s->hidden) {
        snprintf(why, why_len, "tokens x hidden must be at most 2^31 = %lld elements, got "
                 "%lld x %lld = %.10Lg", BK_AR_MAX_ELEMS, (long long)s->tokens,
                 (long long)s->hidden, (long double)s->tokens * (long double)s->hidden);
        return BK_ERR_INPUT;
    }
    return BK_OK;
}

bk_status bk__ar_check_call(const bk_call *call, bk_err *err)
{
    if (call->nt != BK_AR_NT || !call->t)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: call has %d tensors, the target takes %d",
                       BK_AR_TARGET, call->nt, BK_AR_NT);
    for (int i = 0; i < BK_AR_NT; i++) {
        size_t want = ar_tensor_elems(call->shape, call->world, i);
        const bk_tensor *t = &call->t[i];
        if (!t->data || t->elems != want || t->elem_bytes != 2)
            return BK_FAIL(err, BK_ERR_INTERNAL,
                           "%s: tensor %d (%s) has %zu elements of %zu bytes at %p, "
                           "the shape needs %zu of 2",
                           BK_AR_TARGET, i, bk__ar_rmsnorm_target.tensor_names[i], t->elems,
                           t->elem_bytes, t->data, want);
    }
    return BK_OK;
}

/* bk_target.bf16_sum_excess: residual_out = bf16(s + residual), s the ranks' x summed in
 * bf16 one rank after another (a ring: world - 1 roundings of partial sums; each of up to 8
 * starting ranks replayed), against the exact sum, over a prefix of the shape's elements
 * (the same bits as init_inputs: element i of a stream depends on i alone) of about
 * budget / (world x orders) elements, at least 1024. */
static double ar_bf16_sum_excess(const bk_shape *s, uint64_t seed, int shape_index, int world,
                                 double rtol, double atol, size_t budget)
{
    if (world < 2)
        return 0.0;
    const int orders = world < 8 ? world : 8;
    size_t n = (size_t)s->tokens * (size_t)s->hidden;
    size_t m = budget / ((size_t)world * (size_t)orders);
    if (m < 1024)
        m = 1024;
    if (m > n)
        m = n;
    uint16_t *x = malloc(m * (size_t)world * sizeof *x), *res = malloc(m * sizeof *res);
    double worst = 0.0;
    if (!x || !res)
        goto out;
    for (int r = 0; r < world; r++)
        fill_x_like(x + (size_t)r * m, m, bk__stream_key(seed, shape_index, r, BK_AR_X));
    fill_x_like(res, m, bk__stream_key(seed, shape_index, 0, BK_AR_RESIDUAL));
    for (size_t i = 0; i < m; i++) {
        double exact = bk_bf16_to_f32(res[i]);
        for (int r = 0; r < world; r++)
            exact += bk_bf16_to_f32(x[(size_t)r * m + i]);
        const double bound = atol + rtol * fabs(exact);
        for (int o = 0; o < orders; o++) {
            const int first = o * world / orders;
            float sum = bk_bf16_to_f32(x[(size_t)first * m + i]);
            for (int k = 1; k < world; k++)
                sum = bk_bf16_to_f32(bk_bf16_from_f32(
                    sum + bk_bf16_to_f32(x[(size_t)((first + k) % world) * m + i])));
            const double got = bk_bf16_to_f32(bk_bf16_from_f32(sum + bk_bf16_to_f32(res[i])));
            const double e = fabs(got - exact) / bound;
            if (e > worst)
                worst = e;
        }
    }
out:
    free(x);
    free(res);
    return worst;
}

const bk_target bk__ar_rmsnorm_target = {
    .name = BK_AR_TARGET,
    .summary = "residual_out = allreduce_sum(x) + residual; out = rmsnorm(residual_out) * "
               "gamma (bf16, eps 1e-6)",
    .ntensors = BK_AR_NT,
    .tensor_names = { "x", "residual", "gamma", "out", "residual_out" },
    .tensor_is_output = { 0, 0, 0, 1, 1 },
    .tensor_elems = ar_tensor_elems,
    .tensor_elem_bytes = ar_tensor_elem_bytes,
    .init_inputs = ar_init_inputs,
    .reference = ar_reference,
    .algo_bytes = bk__allreduce_algo_bytes,
    .busbw_factor = bk__allreduce_busbw_factor,
    .peer_bytes = ar_peer_bytes,
    .check_shape = ar_check_shape,
    .bf16_sum_excess = ar_bf16_sum_excess,
    .incumbent = { [BK_BACKEND_CPU] = "shm_twopass", [BK_BACKEND_CUDA] = "nccl_then_rmsnorm" },
    .example = { .tokens = 8, .hidden = 4096, .weight = 1.0 },
};
