/* moe.c - the moe.fused_experts_reduce target: tensors, seeded inputs, the float64 reference,
 * bytes moved and the peer-memory layout its cpu variants share.
 *
 * Math, per token t of T, hidden size H, top-k K, intermediate size I:
 *   g = W1[e][0:I] . x[t],  u = W1[e][I:2I] . x[t]          (gate and up, [I] each)
 *   expert_e(x[t]) = W2[e] . (silu(g) * u)                  ([H]; silu(v) = v / (1 + e^-v))
 *   out[t] = bf16( sum_{k<K} w[t,k] * expert_{ids[t,k]}(x[t]) + residual[t] )
 * Tensors: x [T,H] bf16, topk_ids [T,K] int32, topk_w [T,K] fp32 (a router's softmax
 * output kept in fp32, as vLLM and SGLang pass it), w1 [E_local,2I,H] bf16, w2
 * [E_local,H,I] bf16, residual [T,H] bf16, out [T,H] bf16.
 *
 * Sharding (expert parallel over the whole lane, TP x EP ranks): rank r owns the experts
 * e with e % world == r, in local slot e / world; E_local = ceil(E / world), a slot past
 * the last expert is zero and unused. x, ids, w and residual are the same on every rank;
 * each rank computes its experts' share of every token and the lane sums the shares, so
 * `out` is the same on every rank. (Tensor parallelism inside an expert, I sharded, has
 * the same reduction and is not modelled separately on the cpu backend.)
 *
 * Rounding points a variant may use: fp32 accumulation in both GEMMs; the GEMM1 outputs
 * (gate, up) stored as bf16 (cuBLAS bf16 output; the cpu variants keep them fp32); the
 * activation silu(g)*u stored as bf16 (the GEMM2 operand); each expert's GEMM2 output
 * stored as bf16; the rank's top-k partial stored as bf16 (the operand of a bf16
 * allreduce; moe_serial_cuda does this, and every cuda variant at world > 1) or kept fp32;
 * a bf16 allreduce's own roundings of partial sums over ranks (up to world - 1 per
 * element in NCCL's ring; the cuda variants at world > 1, whose fused ones carry the
 * residual in rank 0's partial); sums in fp32; one final rounding to bf16. The reference
 * is exact float64 math on the bf16 / fp32 inputs with no rounding at all (outs[0] is
 * not rounded to bf16).
 *
 * Error bound of a variant against the reference, per element j of token t (u = 2^-8,
 * one bf16 ulp at 1; each bf16 rounding errs by at most u/2 relative):
 *   |out - ref| <= u/2 |ref| + u/2 sum_k w_k (|y_kj| + sum_i |W2_ji| |a_i| (1 + 2 c_i))
 *                  + u/2 |partial_j| + u/2 sum_s |s_j| + O(fp32)
 * (c_i: the relative sensitivity of a_i to its gate/up inputs, about 1, when those are
 * rounded; the partial term only for a variant that rounds its partial; s: the partial
 * sums over ranks a bf16 allreduce rounds, world - 1 of them at most)
 * With these inputs (|x| < 1, |W1| < sqrt(3/H), |W2| < sqrt(3/I), weights summing to 1)
 * the second term stays below about 0.01 in practice; tests/test_moe_cpu.c checks
 * |out - ref| <= 2^-8 (1 + |ref|), and plans use rtol = atol = 1e-2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"

#define MOE_ALIGN 64
#define MOE_MAX_ELEMS (1ll << 36) /* per tensor: far above any GPU's memory */

static size_t align_up(size_t v) { return (v + MOE_ALIGN - 1) / MOE_ALIGN * MOE_ALIGN; }

bk__moe_layout bk__moe_layout_of(const bk_shape *s, int world)
{
    bk__moe_layout l = { 0 };
    if (world < 1)
        world = 1;
    size_t tk = (size_t)s->tokens * (size_t)s->topk;
    l.n = (size_t)s->tokens * (size_t)s->hidden;
    l.chunk = (l.n + (size_t)world - 1) / (size_t)world;
    l.idx_off = 0;
    l.y_off = align_up(tk * sizeof(int32_t));
    l.part_off = l.y_off + align_up(tk * (size_t)s->hidden * 2);
    l.red_off = l.part_off + align_up(l.n * sizeof(float));
    l.bytes = l.red_off + align_up(l.chunk * sizeof(float));
    return l;
}

static size_t moe_tensor_elems(const bk_shape *s, int world, int idx)
{
    size_t t = (size_t)s->tokens, h = (size_t)s->hidden, k = (size_t)s->topk;
    size_t el = (size_t)bk__moe_local_experts(s->experts, world), i = (size_t)s->intermediate;
    switch (idx) {
    case BK_MOE_IDS:
    case BK_MOE_W: return t * k;
    case BK_MOE_W1: return el * 2 * i * h;
    case BK_MOE_W2: return el * h * i;
    default: return t * h;
    }
}

static size_t moe_tensor_elem_bytes(int idx)
{
    return idx == BK_MOE_IDS || idx == BK_MOE_W ? 4 : 2;
}

/* ---- seeded inputs ---- */

/* Uniform in [-a, a) rounded to bf16, kept inside the interval. */
static void fill_sym(uint16_t *dst, size_t n, uint64_t key, uint64_t first, float a)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t b = bk_bf16_from_f32(a * (2.0f * bk__stream_unit(key, first + i) - 1.0f));
        if (fabsf(bk_bf16_to_f32(b)) >= a)
            b = bk_bf16_from_f32(0.0f);
        dst[i] = b;
    }
}

void bk__moe_fill_w1(uint16_t *dst, const bk_shape *s, uint64_t seed, int shape_index,
                     int64_t expert)
{
    size_t n = 2 * (size_t)s->intermediate * (size_t)s->hidden;
    fill_sym(dst, n, bk__stream_key(seed, shape_index, 0, BK_MOE_W1), (uint64_t)expert * n,
             sqrtf(3.0f / (float)s->hidden));
}

void bk__moe_fill_w2(uint16_t *dst, const bk_shape *s, uint64_t seed, int shape_index,
                     int64_t expert)
{
    size_t n = (size_t)s->hidden * (size_t)s->intermediate;
    fill_sym(dst, n, bk__stream_key(seed, shape_index, 0, BK_MOE_W2), (uint64_t)expert * n,
             sqrtf(3.0f / (float)s->intermediate));
}

/* K distinct experts per token (a partial Fisher-Yates shuffle of 0..E-1), and
 * weights 0.25 + U[0,1) normalised to sum 1 in fp32. perm holds E ints. */
static void fill_route(int32_t *ids, float *w, int *perm, const bk_shape *s, uint64_t seed,
                       int shape_index)
{
    uint64_t kid = bk__stream_key(seed, shape_index, 0, BK_MOE_IDS);
    uint64_t kw = bk__stream_key(seed, shape_index, 0, BK_MOE_W);
    int64_t e = s->experts, k = s->topk;
    for (int64_t t = 0; t < s->tokens; t++) {
        for (int64_t j = 0; j < e; j++)
            perm[j] = (int)j;
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            uint64_t r = bk__splitmix64(kid + (uint64_t)(t * k + j)) % (uint64_t)(e - j);
            int pick = perm[j + (int64_t)r];
            perm[j + (int64_t)r] = perm[j];
            perm[j] = pick;
            if (ids)
                ids[t * k + j] = pick;
            float u = 0.25f + bk__stream_unit(kw, (uint64_t)(t * k + j));
            if (w)
                w[t * k + j] = u;
            sum += u;
        }
        for (int64_t j = 0; w && j < k; j++)
            w[t * k + j] /= sum;
    }
}

/* x and residual in [-1, 1), as the allreduce target's x. */
static void fill_act(uint16_t *dst, size_t n, uint64_t key)
{
    fill_sym(dst, n, key, 0, 1.0f);
}

static void moe_init_inputs(bk_tensor *t, const bk_shape *s, uint64_t seed, int shape_index,
                            int rank, int world)
{
    size_t n = (size_t)s->tokens * (size_t)s->hidden;
    size_t n1 = 2 * (size_t)s->intermediate * (size_t)s->hidden;
    size_t n2 = (size_t)s->hidden * (size_t)s->intermediate;
    int64_t el = bk__moe_local_experts(s->experts, world);
    if (t[BK_MOE_X].data)
        fill_act(t[BK_MOE_X].data, n, bk__stream_key(seed, shape_index, 0, BK_MOE_X));
    if (t[BK_MOE_RESIDUAL].data)
        fill_act(t[BK_MOE_RESIDUAL].data, n,
                 bk__stream_key(seed, shape_index, 0, BK_MOE_RESIDUAL));
    int *perm = malloc((size_t)s->experts * sizeof *perm);
    if (perm) /* init_inputs cannot fail: without memory the ids stay as they were */
        fill_route(t[BK_MOE_IDS].data, t[BK_MOE_W].data, perm, s, seed, shape_index);
    free(perm);
    for (int64_t j = 0; j < el; j++) {
        int64_t e = j * world + rank;
        uint16_t *w1 = t[BK_MOE_W1].data, *w2 = t[BK_MOE_W2].data;
        if (w1 && e < s->experts)
            bk__moe_fill_w1(w1 + (size_t)j * n1, s, seed, shape_index, e);
        else if (w1)
            memset(w1 + (size_t)j * n1, 0, n1 * 2);
        if (w2 && e < s->experts)
            bk__moe_fill_w2(w2 + (size_t)j * n2, s, seed, shape_index, e);
        else if (w2)
            memset(w2 + (size_t)j * n2, 0, n2 * 2);
    }
}

/* ---- reference ---- */

/* acc[t] += w * expert_e(x[t]) in float64 for every token routed to expert e. */
static void ref_expert(const bk_shape *s, int64_t e, const uint16_t *x, const int32_t *ids,
                       const float *w, const uint16_t *w1, const uint16_t *w2, double *a,
                       double *acc)
{
    int64_t h = s->hidden, in = s->intermediate, k = s->topk;
    for (int64_t t = 0; t < s->tokens; t++)
        for (int64_t j = 0; j < k; j++) {
            if (ids[t * k + j] != e)
                continue;
            const uint16_t *xt = x + t * h;
            for (int64_t i = 0; i < in; i++) {
                double g = 0.0, u = 0.0;
                const uint16_t *rg = w1 + i * h, *ru = w1 + (in + i) * h;
                for (int64_t c = 0; c < h; c++) {
                    double xv = bk_bf16_to_f32(xt[c]);
                    g += xv * bk_bf16_to_f32(rg[c]);
                    u += xv * bk_bf16_to_f32(ru[c]);
                }
                a[i] = g / (1.0 + exp(-g)) * u;
            }
            for (int64_t c = 0; c < h; c++) {
                double y = 0.0;
                for (int64_t i = 0; i < in; i++)
                    y += bk_bf16_to_f32(w2[c * in + i]) * a[i];
                acc[t * h + c] += (double)w[t * k + j] * y;
            }
        }
}

/* outs[0] = out, the same for every rank. One expert's weights at a time, so
 * memory stays O(T*H + I*H) whatever the expert count. */
static bk_status moe_reference(const bk_shape *s, uint64_t seed, int shape_index, int rank,
                               int world, double **outs, bk_err *err)
{
    bk_status st = BK_OK;
    size_t n = (size_t)s->tokens * (size_t)s->hidden, tk = (size_t)s->tokens * (size_t)s->topk;
    size_t n2 = (size_t)s->intermediate * (size_t)s->hidden;
    uint16_t *x = malloc(n * 2), *res = malloc(n * 2);
    uint16_t *w1 = malloc(2 * n2 * 2), *w2 = malloc(n2 * 2);
    int32_t *ids = malloc(tk * sizeof *ids);
    float *w = malloc(tk * sizeof *w);
    int *perm = malloc((size_t)s->experts * sizeof *perm);
    double *a = malloc((size_t)s->intermediate * sizeof *a);
    double *acc = calloc(n, sizeof *acc);
    char *used = calloc((size_t)s->experts, 1);
    (void)rank;
    (void)world;
    outs[0] = NULL;
    if (!x || !res || !w1 || !w2 || !ids || !w || !perm || !a || !acc || !used) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s reference: out of memory", BK_MOE_TARGET);
        goto out;
    }
    fill_act(x, n, bk__stream_key(seed, shape_index, 0, BK_MOE_X));
    fill_act(res, n, bk__stream_key(seed, shape_index, 0, BK_MOE_RESIDUAL));
    fill_route(ids, w, perm, s, seed, shape_index);
    for (size_t i = 0; i < tk; i++)
        used[ids[i]] = 1;
    for (int64_t e = 0; e < s->experts; e++) {
        if (!used[e])
            continue;
        bk__moe_fill_w1(w1, s, seed, shape_index, e);
        bk__moe_fill_w2(w2, s, seed, shape_index, e);
        ref_expert(s, e, x, ids, w, w1, w2, a, acc);
    }
    for (size_t i = 0; i < n; i++)
        acc[i] += bk_bf16_to_f32(res[i]);
    outs[0] = acc;
    acc = NULL;
out:
    free(x);
    free(res);
    free(w1);
    free(w2);
    free(ids);
    free(w);
    free(perm);
    free(a);
    free(acc);
    free(used);
    return st;
}

/* ---- bytes, peer memory, shape checks ---- */

static size_t moe_peer_bytes(const bk_shape *s, int world)
{
    return bk__moe_layout_of(s, world).bytes;
}

static bk_status moe_check_shape(const bk_shape *s, int world, char *why, size_t why_len)
{
    if (s->tokens < 1 || s->hidden < 1 || s->experts < 1 || s->topk < 1 ||
        s->intermediate < 1) {
        snprintf(why, why_len, "%s needs tokens, hidden, experts, topk and intermediate >= 1 "
                 "(got %lld, %lld, %lld, %lld, %lld)", BK_MOE_TARGET, (long long)s->tokens,
                 (long long)s->hidden, (long long)s->experts, (long long)s->topk,
                 (long long)s->intermediate);
        return BK_ERR_INPUT;
    }
    if (s->topk > s->experts) {
        snprintf(why, why_len, "topk %lld > experts %lld (a token's experts are distinct)",
                 (long long)s->topk, (long long)s->experts);
        return BK_ERR_INPUT;
    }
    if (s->experts > (1ll << 20) || s->topk > 64 || s->hidden > (1ll << 20) ||
        s->intermediate > (1ll << 20) || s->tokens > (1ll << 30)) {
        snprintf(why, why_len, "a size is out of range (experts <= 2^20, topk <= 64, hidden "
                 "and intermediate <= 2^20, tokens <= 2^30)");
        return BK_ERR_INPUT;
    }
    for (int i = 0; i < BK_MOE_NT; i++)
        if ((long long)moe_tensor_elems(s, world, i) > MOE_MAX_ELEMS) {
            snprintf(why, why_len, "tensor %d holds %zu elements per rank, over 2^36", i,
                     moe_tensor_elems(s, world, i));
            return BK_ERR_INPUT;
        }
    return BK_OK;
}

bk_status bk__moe_check_call(const bk_call *call, bk_err *err)
{
    if (call->nt != BK_MOE_NT || !call->t)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: call has %d tensors, the target takes %d",
                       BK_MOE_TARGET, call->nt, BK_MOE_NT);
    char why[256];
    if (moe_check_shape(call->shape, call->world, why, sizeof why) != BK_OK)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: %s", BK_MOE_TARGET, why);
    for (int i = 0; i < BK_MOE_NT; i++) {
        size_t want = moe_tensor_elems(call->shape, call->world, i);
        size_t eb = moe_tensor_elem_bytes(i);
        const bk_tensor *t = &call->t[i];
        if (!t->data || t->elems != want || t->elem_bytes != eb)
            return BK_FAIL(err, BK_ERR_INTERNAL,
                           "%s: tensor %d (%s) has %zu elements of %zu bytes at %p, "
                           "the shape needs %zu of %zu",
                           BK_MOE_TARGET, i, bk__moe_target.tensor_names[i], t->elems,
                           t->elem_bytes, t->data, want, eb);
    }
    return BK_OK;
}

const bk_target bk__moe_target = {
    .name = BK_MOE_TARGET,
    .summary = "out = allreduce_sum(sum_k w_k * expert_k(x)) + residual; experts SiLU-gated "
               "(W1 gate|up, W2), sharded expert-parallel (e % world), bf16",
    .ntensors = BK_MOE_NT,
    .tensor_names = { "x", "topk_ids", "topk_w", "w1", "w2", "residual", "out" },
    .tensor_is_output = { 0, 0, 0, 0, 0, 0, 1 },
    .tensor_elems = moe_tensor_elems,
    .tensor_elem_bytes = moe_tensor_elem_bytes,
    .init_inputs = moe_init_inputs,
    .reference = moe_reference,
    .algo_bytes = bk__allreduce_algo_bytes,
    .busbw_factor = bk__allreduce_busbw_factor,
    .peer_bytes = moe_peer_bytes,
    .check_shape = moe_check_shape,
    .incumbent = { [BK_BACKEND_CPU] = "moe_serial", [BK_BACKEND_CUDA] = "moe_serial_cuda" },
    /* small enough for the float64 reference of every probe to take seconds on one core */
    .example = { .tokens = 4, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 64,
                 .weight = 1.0 },
};
