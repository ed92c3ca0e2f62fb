/* moe_cpu.c - cpu variants of moe.fused_experts_reduce over POSIX shared memory
 * (collectives/collectives.h): the incumbent `moe_serial` and the candidate
 * `moe_fused_combine`.
 *
 * Both run the same expert stage on this rank's experts: permute the (token, k)
 * assignments by local expert (stable: slot, then token, then k), gather x, GEMM1 (fp32
 * accumulation), silu(gate) * up rounded to bf16, GEMM2 (fp32 accumulation) rounded to
 * bf16 - one row y per local assignment. They differ in what follows:
 *   moe_serial: un-permute with the top-k weighted sum into an fp32 [T, H] partial, then
 *     a two-pass allreduce of the partials (reduce-scatter in rank order, all-gather),
 *     then the residual add; each stage ends (a lane barrier) before the next begins.
 *   moe_fused_combine: publish y and the row of each assignment; one barrier; every rank
 *     reads each token's K rows straight from their owners' peer memory, weights and sums
 *     them in k order, adds the residual and rounds: the top-k sum is the reduction, and
 *     y is read once. No [T, H] partial is written.
 * Every rank of a lane gets the same bits from either variant; the two variants differ
 * by fp32 summation order only. Layout: bk__moe_layout_of (kernels/moe_internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/collectives.h"
#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"

#define FUSED_MAX_TOKENS 4096

/* Scratch buffers, each grown (never shrunk) to the largest shape seen. */
enum { B_ROWS, B_ROW_OF, B_OFF, B_XP, B_ACT, B_Y, B_GU, B_ACC, B_GATHER, B_N };

typedef struct moe_state {
    const char *name;
    void *buf[B_N];
    size_t cap[B_N]; /* bytes */
} moe_state;

/* ---- state ---- */

static bk_status moe_create_named(const char *name, const json_t *params, bk_backend backend,
                                  void **state, bk_err *err)
{
    const char *key;
    json_t *val;
    *state = NULL;
    json_object_foreach((json_t *)params, key, val) {
        (void)val;
        return BK_FAIL(err, BK_ERR_INPUT, "params.%s: unknown parameter (%s takes no parameters)",
                       key, name);
    }
    if (backend != BK_BACKEND_CPU)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s: runs on the cpu backend only", name);
    moe_state *s = calloc(1, sizeof *s);
    if (!s)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", name);
    s->name = name;
    *state = s;
    return BK_OK;
}

static void moe_destroy(void *state)
{
    moe_state *s = state;
    if (!s)
        return;
    for (int i = 0; i < B_N; i++)
        free(s->buf[i]);
    free(s);
}

/* Size every scratch buffer for the shape:
 * rows, row_of [T*K] int32: the assignment (t*K + k) of each permuted row, and the
 *   permuted row of each assignment (-1: another rank's expert);
 * off [E_local + 1] int64: first row of each local expert;
 * xp [T*K, H] bf16 gathered x; act [T*K, I] bf16; y [T*K, H] bf16 (moe_serial only:
 * fused writes y into peer memory); gu [2I] fp32 one GEMM1 row; acc [H] fp32;
 * gather [T*H] fp32 (moe_serial's all-gathered sums). */
static bk_status reserve(moe_state *s, const bk_shape *sh, int world, bk_err *err)
{
    size_t tk = (size_t)(sh->tokens * sh->topk), h = (size_t)sh->hidden;
    size_t in = (size_t)sh->intermediate, el = (size_t)bk__moe_local_experts(sh->experts, world);
    size_t want[B_N] = { tk * 4, tk * 4, (el + 1) * 8, tk * h * 2, tk * in * 2, tk * h * 2,
                         2 * in * 4, h * 4, (size_t)sh->tokens * h * 4 };
    for (int i = 0; i < B_N; i++) {
        if (want[i] <= s->cap[i] && s->buf[i])
            continue;
        void *q = realloc(s->buf[i], want[i] ? want[i] : 1);
        if (!q)
            return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory (%zu bytes of scratch %d)",
                           s->name, want[i], i);
        s->buf[i] = q;
        s->cap[i] = want[i];
    }
    return BK_OK;
}

/* ---- the expert stage, shared by both variants ---- */

/* Dot product of two bf16 rows with fp32 accumulation in eight lanes. */
static float dot_bf16(const uint16_t *a, const uint16_t *b, int64_t n)
{
    float part[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            part[k] += bk_bf16_to_f32(a[i + k]) * bk_bf16_to_f32(b[i + k]);
    for (; i < n; i++)
        part[0] += bk_bf16_to_f32(a[i]) * bk_bf16_to_f32(b[i]);
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

/* Permute: count this rank's assignments per local expert, lay them out by slot
 * (stable in t, then k), gather x. Returns the number of rows M. */
static int64_t permute(moe_state *s, const bk_call *call)
{
    const bk_shape *sh = call->shape;
    int world = call->world, me = call->rank;
    int64_t tk = sh->tokens * sh->topk, h = sh->hidden;
    int64_t el = bk__moe_local_experts(sh->experts, world);
    const int32_t *ids = call->t[BK_MOE_IDS].data;
    const uint16_t *x = call->t[BK_MOE_X].data;
    int32_t *rows = s->buf[B_ROWS], *row_of = s->buf[B_ROW_OF];
    int64_t *off = s->buf[B_OFF];
    uint16_t *xp = s->buf[B_XP];
    memset(off, 0, (size_t)(el + 1) * sizeof *off);
    for (int64_t a = 0; a < tk; a++)
        if (bk__moe_owner(ids[a], world) == me)
            off[bk__moe_slot(ids[a], world) + 1]++;
    for (int64_t j = 0; j < el; j++)
        off[j + 1] += off[j];
    /* fill in slot order with a running cursor per slot (off[j] advanced, then restored) */
    for (int64_t a = 0; a < tk; a++) {
        row_of[a] = -1;
        if (bk__moe_owner(ids[a], world) != me)
            continue;
        int64_t r = off[bk__moe_slot(ids[a], world)]++;
        rows[r] = (int32_t)a;
        row_of[a] = (int32_t)r;
        memcpy(xp + r * h, x + (a / sh->topk) * h, (size_t)h * 2);
    }
    for (int64_t j = el; j > 0; j--)
        off[j] = off[j - 1];
    off[0] = 0;
    return off[el];
}

/* GEMM1, silu(gate) * up, GEMM2 per local expert group; y [M, H] bf16. */
static void experts(moe_state *s, const bk_call *call, uint16_t *y)
{
    const bk_shape *sh = call->shape;
    int64_t h = sh->hidden, in = sh->intermediate;
    int64_t el = bk__moe_local_experts(sh->experts, call->world);
    const int64_t *off = s->buf[B_OFF];
    const uint16_t *xp = s->buf[B_XP];
    uint16_t *act = s->buf[B_ACT];
    float *gu = s->buf[B_GU];
    const uint16_t *w1 = call->t[BK_MOE_W1].data, *w2 = call->t[BK_MOE_W2].data;
    for (int64_t j = 0; j < el; j++) {
        const uint16_t *w1e = w1 + (size_t)j * 2 * (size_t)in * (size_t)h;
        const uint16_t *w2e = w2 + (size_t)j * (size_t)h * (size_t)in;
        for (int64_t r = off[j]; r < off[j + 1]; r++) {
            for (int64_t i = 0; i < 2 * in; i++)
                gu[i] = dot_bf16(xp + r * h, w1e + i * h, h);
            for (int64_t i = 0; i < in; i++) {
                float g = gu[i];
                act[r * in + i] = bk_bf16_from_f32(g / (1.0f + expf(-g)) * gu[in + i]);
            }
        }
        for (int64_t r = off[j]; r < off[j + 1]; r++)
            for (int64_t c = 0; c < h; c++)
                y[r * h + c] = bk_bf16_from_f32(dot_bf16(act + r * in, w2e + c * in, in));
    }
}

/* The call's shm communicator, checked against the call and the layout. */
static bk_status moe_comm(const moe_state *s, const bk_call *call, bk__moe_layout *lay,
                          bk_shm **shm, bk_err *err)
{
    bk_status st = bk__moe_check_call(call, err);
    if (st != BK_OK)
        return st;
    *lay = bk__moe_layout_of(call->shape, call->world);
    st = bk__cpu_lane_shm(s->name, call, lay->bytes, shm, err);
    if (st != BK_OK)
        return st;
    const int32_t *ids = call->t[BK_MOE_IDS].data;
    for (int64_t a = 0; a < call->shape->tokens * call->shape->topk; a++)
        if (ids[a] < 0 || ids[a] >= call->shape->experts)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: topk_ids[%lld] = %d is not an expert in "
                           "0..%lld", s->name, (long long)a, (int)ids[a],
                           (long long)call->shape->experts - 1);
    return BK_OK;
}

static void *peer_at(bk_shm *shm, int r, size_t off)
{
    return (char *)bk_shm_peer(shm, r) + off;
}

/* ---- moe_serial: experts, un-permute, two-pass allreduce, residual ---- */

static bk_status serial_create(const json_t *params, bk_backend backend, int rank, int world,
                               void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return moe_create_named("moe_serial", params, backend, state, err);
}

static bk_status serial_run(void *state, bk_call *call, bk_err *err)
{
    bk_status st = BK_OK;
    moe_state *s = state;
    bk_shm *shm;
    bk__moe_layout lay;
    BK_TRY(moe_comm(s, call, &lay, &shm, err));
    BK_TRY(reserve(s, call->shape, call->world, err));
    const bk_shape *sh = call->shape;
    int n = call->world, me = call->rank;
    int64_t h = sh->hidden, k = sh->topk;
    const uint16_t *y = s->buf[B_Y];
    const int32_t *row_of = s->buf[B_ROW_OF];
    const float *w = call->t[BK_MOE_W].data;
    permute(s, call);
    experts(s, call, s->buf[B_Y]);

    /* un-permute: this rank's top-k weighted partial of every token */
    float *part = peer_at(shm, me, lay.part_off);
    for (int64_t t = 0; t < sh->tokens; t++) {
        float *p = part + t * h;
        memset(p, 0, (size_t)h * sizeof *p);
        for (int64_t j = 0; j < k; j++) {
            int64_t r = row_of[t * k + j];
            if (r < 0)
                continue;
            float wt = w[t * k + j];
            for (int64_t c = 0; c < h; c++)
                p[c] += wt * bk_bf16_to_f32(y[r * h + c]);
        }
    }
    BK_TRY(bk_shm_barrier(shm, bk__call_timeout(call), err));

    /* reduce-scatter: my chunk, summed over the ranks in rank order */
    size_t lo = (size_t)me * lay.chunk, hi = lo + lay.chunk;
    hi = hi > lay.n ? lay.n : hi;
    lo = lo > hi ? hi : lo;
    float *red = peer_at(shm, me, lay.red_off);
    const float *p0 = peer_at(shm, 0, lay.part_off);
    for (size_t i = lo; i < hi; i++)
        red[i - lo] = p0[i];
    for (int p = 1; p < n; p++) {
        const float *pp = peer_at(shm, p, lay.part_off);
        for (size_t i = lo; i < hi; i++)
            red[i - lo] += pp[i];
    }
    BK_TRY(bk_shm_barrier(shm, bk__call_timeout(call), err));

    /* all-gather, then the residual add. The next call writes `part` and `red`
     * only after its own first barrier, when every rank has left this gather. */
    float *g = s->buf[B_GATHER];
    for (int q = 0; q < n; q++) {
        size_t qlo = (size_t)q * lay.chunk, qhi = qlo + lay.chunk;
        qhi = qhi > lay.n ? lay.n : qhi;
        if (qlo < qhi)
            memcpy(g + qlo, peer_at(shm, q, lay.red_off), (qhi - qlo) * sizeof(float));
    }
    const uint16_t *res = call->t[BK_MOE_RESIDUAL].data;
    uint16_t *out = call->t[BK_MOE_OUT].data;
    for (size_t i = 0; i < lay.n; i++)
        out[i] = bk_bf16_from_f32(g[i] + bk_bf16_to_f32(res[i]));
out:
    return st;
}

/* ---- moe_fused_combine: the top-k weighted sum is the reduction ---- */

#define FUSED_DOMAIN                                                                     \
    {                                                                                    \
        .backends = BK_BK_CPU, .dtypes = "bf16", .min_tokens = 1,                        \
        .max_tokens = FUSED_MAX_TOKENS, .min_hidden = 1                                  \
    }
static const bk_domain k_fused_domain = FUSED_DOMAIN;

static bk_status fused_create(const json_t *params, bk_backend backend, int rank, int world,
                              void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return moe_create_named("moe_fused_combine", params, backend, state, err);
}

static bk_status fused_run(void *state, bk_call *call, bk_err *err)
{
    bk_status st = BK_OK;
    moe_state *s = state;
    bk_shm *shm;
    bk__moe_layout lay;
    char why[160];
    BK_TRY(moe_comm(s, call, &lay, &shm, err));
    if (!bk_domain_contains(&k_fused_domain, call->shape, call->world, "bf16", BK_BACKEND_CPU,
                            1, why, sizeof why)) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s: call outside the domain: %s (route it to "
                     "the incumbent)", s->name, why);
        goto out;
    }
    BK_TRY(reserve(s, call->shape, call->world, err));
    const bk_shape *sh = call->shape;
    int n = call->world, me = call->rank;
    int64_t h = sh->hidden, k = sh->topk, tk = sh->tokens * sh->topk;
    permute(s, call);
    experts(s, call, peer_at(shm, me, lay.y_off));
    memcpy(peer_at(shm, me, lay.idx_off), s->buf[B_ROW_OF], (size_t)tk * sizeof(int32_t));
    BK_TRY(bk_shm_barrier(shm, bk__call_timeout(call), err));

    const int32_t *ids = call->t[BK_MOE_IDS].data;
    const float *w = call->t[BK_MOE_W].data;
    const uint16_t *res = call->t[BK_MOE_RESIDUAL].data;
    uint16_t *out = call->t[BK_MOE_OUT].data;
    float *acc = s->buf[B_ACC];
    for (int64_t t = 0; t < sh->tokens; t++) {
        memset(acc, 0, (size_t)h * sizeof *acc);
        for (int64_t j = 0; j < k; j++) {
            int owner = bk__moe_owner(ids[t * k + j], n);
            int32_t r = ((const int32_t *)peer_at(shm, owner, lay.idx_off))[t * k + j];
            if (r < 0 || r >= tk) {
                st = BK_FAIL(err, BK_ERR_PEER, "%s: rank %d published row %d for token %lld "
                             "slot %lld (rows 0..%lld)", s->name, owner, (int)r, (long long)t,
                             (long long)j, (long long)tk - 1);
                goto out;
            }
            const uint16_t *yr = (const uint16_t *)peer_at(shm, owner, lay.y_off) + r * h;
            float wt = w[t * k + j];
            for (int64_t c = 0; c < h; c++)
                acc[c] += wt * bk_bf16_to_f32(yr[c]);
        }
        for (int64_t c = 0; c < h; c++)
            out[t * h + c] = bk_bf16_from_f32(acc[c] + bk_bf16_to_f32(res[t * h + c]));
    }
    /* our reads of the peers' y end before any peer's next call writes it */
    BK_TRY(bk_shm_barrier(shm, bk__call_timeout(call), err));
out:
    return st;
}

/* ---- the table ---- */

const bk_variant bk__moe_cpu_variants[] = {
    { .name = "moe_serial",
      .target = BK_MOE_TARGET,
      .backends = BK_BK_CPU,
      .summary = "permute, GEMM1, silu*up, GEMM2, un-permute weighted sum, then a two-pass "
                 "shared-memory allreduce and the residual add; each stage waits for the last",
      .domain = { .backends = BK_BK_CPU, .dtypes = "bf16", .min_tokens = 1, .min_hidden = 1 },
      .create = serial_create,
      .run = serial_run,
      .destroy = moe_destroy },
    /* The token bound: every rank reads every token's K rows, world times the
     * reads of a reduce-scatter; a first guess to revisit with measurements. */
    { .name = "moe_fused_combine",
      .target = BK_MOE_TARGET,
      .backends = BK_BK_CPU,
      .summary = "experts as moe_serial, then the top-k weighted sum fused into the "
                 "reduction: each rank reads its tokens' expert rows from their owners' "
                 "peer memory once (no [T, H] partial)",
      .domain = FUSED_DOMAIN,
      .create = fused_create,
      .run = fused_run,
      .destroy = moe_destroy },
    { .name = NULL },
};
