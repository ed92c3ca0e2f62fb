/* engine_cuda_priv.h - what the cuda engine's files share (runner/engine_cuda.c: timing and
 * audits; runner/engine_cuda_check.c: the contract checks of docs/variants.md). Not a
 * public header. */
#ifndef BK_ENGINE_CUDA_PRIV_H
#define BK_ENGINE_CUDA_PRIV_H
#ifdef BK_HAVE_CUDA

#include <cuda_runtime.h>

#include "collectives/cuda_gate.h"
#include "collectives/cuda_ipc.h"
#include "runner/engine.h"

struct bk_backend_ctx {
    int rank, world, device;
    cudaStream_t stream;
    bk_cuda_comm *comm;
    bk_cuda_gate gate;
    int gated;           /* graph-mode batches wait behind the gate (BK_CUDA_GATE=0: no) */
    double warm_s;       /* solo warm-up before the first shape (BK_CUDA_WARMUP_S) */
    int max_sets;        /* rotated input sets per shape at most (BK_CUDA_SETS) */
    int spread;          /* every set in 2 MiB pages of its own (BK_CUDA_SPREAD, default 1) */
    int fresh_graphs;    /* graphs captured anew every batch (BK_CUDA_FRESH_GRAPHS, default 1) */
    int settle;          /* untimed batches before a shape's timed ones (BK_CUDA_SETTLE) */
    void *flush;         /* BK_CUDA_FLUSH=1: written before every timed step (2 x L2) */
    size_t flush_bytes;
    int quiesce;         /* the last shape ended well: close meets the lane once more first */
    char pin[272];       /* "near:<cpus>" (bound near its GPU; "near:<n>cpus" when the
                          * list passes 255 bytes), "off" (BK_CUDA_PIN=0) or "inherited"
                          * (not bound: the launcher's binding) */
};

#define CUDA_TRY(call)                                                                  \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: %s: %s", ctx->rank, #call,       \
                         cudaGetErrorString(e_));                                       \
            goto out;                                                                   \
        }                                                                               \
    } while (0)

/* The device copies of one input set: every tensor of the target. */
typedef struct shape_set {
    bk_tensor t[BK_MAX_TENSORS];
    bk_call call;
    cudaGraphExec_t exec;
} shape_set;

/* The contract checks (runner/engine_cuda_check.c). Every one that meets its peers takes
 * every rank of the lane. */
/* Poison set s's outputs (0xFF bytes: bf16 NaN) on the stream. */
bk_status bk__cuda_poison_outputs(bk_backend_ctx *ctx, const shape_set *s, int nt, bk_err *err);
/* malloc'd host copies of set s's outputs (outputs 1) or inputs (0) into host[i]. */
bk_status bk__cuda_copy_to_host(bk_backend_ctx *ctx, const shape_set *s, int nt, int outputs,
                                void **host, bk_err *err);
void bk__cuda_free_host(void **host); /* every entry of host[BK_MAX_TENSORS], set to NULL */
/* One untimed eager call on set s after a lane barrier, waited for (bounded). */
bk_status bk__cuda_untimed_call(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s,
                                bk_err *err);
/* Set s's outputs as the last timed call left them against an untimed call's on the same
 * inputs (bk_engine_check_timed). */
bk_status bk__cuda_check_last(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s,
                              bk_err *err);
/* Set s's inputs after a call against freshly seeded ones (the job's seed), bit for bit:
 * BK_ERR_CONTRACT naming the first changed tensor. */
bk_status bk__cuda_check_inputs(bk_backend_ctx *ctx, const bk_shape_job *job, const shape_set *s,
                                bk_err *err);

#endif
#endif
