/* ar_rmsnorm_cuda.c - the cuda variants of collective.allreduce_residual_rmsnorm:
 * nccl_then_rmsnorm (incumbent), ipc_oneshot_fused and ipc_twoshot_fused (candidates). */
#ifdef BK_HAVE_CUDA

#include <string.h>

#include "collectives/cuda_nccl.h"
#include "kernels/catalog.h"
#include "kernels/cuda_variants.h"

/* Worlds 1, 2, 4 and 8 (bit w set: world w allowed). */
#define BK_WORLDS_1248 ((1u << 1) | (1u << 2) | (1u << 4) | (1u << 8))

/* The tensors of one call, found by name (the target's order is not assumed). */
typedef struct ar_tensors {
    const void *x, *residual, *gamma;
    void *residual_out, *out;
} ar_tensors;

static const bk_tensor *find(const bk_call *call, const char *const *names, int output)
{
    for (int i = 0; i < call->nt; i++)
        for (int k = 0; names[k]; k++)
            if (call->t[i].output == output && strcmp(call->t[i].name, names[k]) == 0)
                return &call->t[i];
    return NULL;
}

static bk_status get_tensors(const char *variant, const bk_call *call, ar_tensors *a,
                             bk_err *err)
{
    static const char *const nx[] = {"x", "input", NULL};
    static const char *const nres[] = {"residual", NULL};
    static const char *const ng[] = {"gamma", "weight", NULL};
    static const char *const nro[] = {"residual_out", NULL};
    static const char *const nout[] = {"out", "output", "normed", NULL};
    const char *const *names[5] = {nx, nres, ng, nro, nout};
    const bk_tensor *t[5];
    const size_t th = (size_t)call->shape->tokens * (size_t)call->shape->hidden;
    for (int k = 0; k < 5; k++) {
        t[k] = find(call, names[k], k >= 3);
        if (!t[k])
            return BK_FAIL(err, BK_ERR_INTERNAL, "%s: the call has no %s tensor named '%s'",
                           variant, k >= 3 ? "output" : "input", names[k][0]);
        const size_t want = k == 2 ? (size_t)call->shape->hidden : th;
        if (t[k]->elems != want || t[k]->elem_bytes != 2 || !t[k]->data)
            return BK_FAIL(err, BK_ERR_INTERNAL, "%s: tensor '%s' has %zu elements of %zu "
                           "bytes, expected %zu bf16", variant, t[k]->name, t[k]->elems,
                           t[k]->elem_bytes, want);
    }
    a->x = t[0]->data;
    a->residual = t[1]->data;
    a->gamma = t[2]->data;
    a->residual_out = t[3]->data;
    a->out = t[4]->data;
    return BK_OK;
}

/* No parameters: anything in params is a mistake worth naming. */
static bk_status create_noparams(const char *variant, const json_t *params, bk_backend backend,
                                 void **state, bk_err *err)
{
    const char *key;
    json_t *val;
    *state = NULL;
    if (backend != BK_BACKEND_CUDA)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s runs on the cuda backend only", variant);
    json_object_foreach((json_t *)params, key, val) {
        (void)val;
        return BK_FAIL(err, BK_ERR_INPUT, "params.%s: %s takes no parameters", key, variant);
    }
    return BK_OK;
}

static bk_status check_comm(const char *variant, const bk_call *call, bk_err *err)
{
    const bk_cuda_comm *c = (const bk_cuda_comm *)call->comm;
    if (!c)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: no cuda communicator", variant);
    if (c->world != call->world || c->rank != call->rank)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: call is rank %d of %d, comm %d of %d",
                       variant, call->rank, call->world, c->rank, c->world);
    return BK_OK;
}

/* ---------------------------------------------------------------- nccl_then_rmsnorm */

static bk_status nccl_create(const json_t *params, bk_backend backend, int rank, int world,
                             void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return create_noparams("nccl_then_rmsnorm", params, backend, state, err);
}

/* The allreduce lands in residual_out (the serving stack's in-place
 * allreduce, without growing the rotated inputs); the RMSNorm kernel then
 * reads it and writes residual_out back in place. */
static bk_status nccl_run(void *state, bk_call *call, bk_err *err)
{
    ar_tensors a;
    bk_status st;
    bk_cuda_comm *c = (bk_cuda_comm *)call->comm;
    (void)state;
    BK_TRY(check_comm("nccl_then_rmsnorm", call, err));
    BK_TRY(get_tensors("nccl_then_rmsnorm", call, &a, err));
    if (!c->nccl) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "nccl_then_rmsnorm: no NCCL communicator: %s",
                     c->nccl_why);
        goto out;
    }
    BK_TRY(bk_nccl_allreduce_bf16(c->nccl, a.x, a.residual_out,
                                  (size_t)call->shape->tokens * (size_t)call->shape->hidden,
                                  call->stream, call->timeout_s, err));
    BK_TRY(bk_residual_rmsnorm(a.residual_out, a.residual, a.gamma, a.residual_out, a.out,
                               call->shape->tokens, call->shape->hidden, BK_RMSNORM_EPS,
                               call->stream, err));
out:
    return st;
}

static void no_destroy(void *state)
{
    (void)state;
}

/* ---------------------------------------------------------------- IPC candidates */

static bk_status oneshot_create(const json_t *params, bk_backend backend, int rank, int world,
                                void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return create_noparams("ipc_oneshot_fused", params, backend, state, err);
}

static bk_status twoshot_create(const json_t *params, bk_backend backend, int rank, int world,
                                void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return create_noparams("ipc_twoshot_fused", params, backend, state, err);
}

static bk_status ipc_run(const char *variant, int twoshot, bk_call *call, bk_err *err)
{
    ar_tensors a;
    bk_status st;
    bk_cuda_comm *c = (bk_cuda_comm *)call->comm;
    BK_TRY(check_comm(variant, call, err));
    BK_TRY(get_tensors(variant, call, &a, err));
    bk_cuda_comm_set_timeout(c, call->timeout_s);
    if (twoshot)
        BK_TRY(bk_ipc_twoshot_rmsnorm(c, a.x, a.residual, a.gamma, a.residual_out, a.out,
                                      call->shape->tokens, call->shape->hidden, BK_RMSNORM_EPS,
                                      call->stream, err));
    else
        BK_TRY(bk_ipc_oneshot_rmsnorm(c, a.x, a.residual, a.gamma, a.residual_out, a.out,
                                      call->shape->tokens, call->shape->hidden, BK_RMSNORM_EPS,
                                      call->stream, err));
out:
    return st;
}

static bk_status oneshot_run(void *state, bk_call *call, bk_err *err)
{
    (void)state;
    return ipc_run("ipc_oneshot_fused", 0, call, err);
}

static bk_status twoshot_run(void *state, bk_call *call, bk_err *err)
{
    (void)state;
    return ipc_run("ipc_twoshot_fused", 1, call, err);
}

/* ---------------------------------------------------------------- tables */

/* Token ranges are provisional: measured crossovers need several GPUs
 * (docs/bench/cuda.md). One-shot moves world x the bytes of two-shot per
 * rank and wins while latency dominates (decode); two-shot takes over above. */
static size_t cuda_peer_bytes(const bk_shape *s, int world)
{
    (void)world;
    return bk_ar_rmsnorm_cuda_peer_bytes(s->tokens, s->hidden);
}

const bk_variant bk_variant_nccl_then_rmsnorm = {
    .name = "nccl_then_rmsnorm",
    .target = "collective.allreduce_residual_rmsnorm",
    .backends = BK_BK_CUDA,
    .summary = "ncclAllReduce (bf16 sum), then one fused residual + RMSNorm kernel",
    .domain = {.backends = BK_BK_CUDA, .dtypes = "bf16", .worlds = 0, .min_tokens = 1,
               .max_tokens = 0, .min_hidden = 8, .max_hidden = 16384, .hidden_multiple = 8,
               .needs_p2p = 0},
    .create = nccl_create,
    .run = nccl_run,
    .destroy = no_destroy,
    .peer_bytes = cuda_peer_bytes,
    .bf16_sum = 1,
    .nccl = 1,
};

const bk_variant bk_variant_ipc_oneshot_fused = {
    .name = "ipc_oneshot_fused",
    .target = "collective.allreduce_residual_rmsnorm",
    .backends = BK_BK_CUDA,
    .summary = "one kernel over CUDA IPC: every rank reduces all rows (fixed rank order), "
               "adds the residual, normalises",
    .domain = {.backends = BK_BK_CUDA, .dtypes = "bf16", .worlds = BK_WORLDS_1248,
               .min_tokens = 1, .max_tokens = 128, .min_hidden = 8, .max_hidden = 16384,
               .hidden_multiple = 8, .needs_p2p = 1},
    .create = oneshot_create,
    .run = oneshot_run,
    .destroy = no_destroy,
    .peer_bytes = cuda_peer_bytes,
};

const bk_variant bk_variant_ipc_twoshot_fused = {
    .name = "ipc_twoshot_fused",
    .target = "collective.allreduce_residual_rmsnorm",
    .backends = BK_BK_CUDA,
    .summary = "one kernel over CUDA IPC: rows split across ranks, each reduces and "
               "normalises its rows and pushes them to every peer",
    .domain = {.backends = BK_BK_CUDA, .dtypes = "bf16", .worlds = BK_WORLDS_1248,
               .min_tokens = 1, .max_tokens = 8192, .min_hidden = 8, .max_hidden = 16384,
               .hidden_multiple = 8, .needs_p2p = 1},
    .create = twoshot_create,
    .run = twoshot_run,
    .destroy = no_destroy,
    .peer_bytes = cuda_peer_bytes,
};

#else
typedef int bk__ar_rmsnorm_cuda_unused; /* ISO C forbids an empty translation unit */
#endif
