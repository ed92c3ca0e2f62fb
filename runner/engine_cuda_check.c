/* engine_cuda_check.c - the cuda engine's checks of a variant's contract (docs/variants.md):
 * the last timed call of a shape against an untimed call on the same inputs, and the inputs
 * after an audit's call against freshly seeded ones. */
#ifdef BK_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "runner/engine_cuda_priv.h"

/* Poison the outputs of set s (0xFF bytes: bf16 NaN) on the stream. */
bk_status bk__cuda_poison_outputs(bk_backend_ctx *ctx, const shape_set *s, int nt, bk_err *err)
{
    bk_status st = BK_OK;
    for (int i = 0; i < nt; i++)
        if (s->t[i].output)
            CUDA_TRY(cudaMemsetAsync(s->t[i].data, 0xFF, s->t[i].elems * s->t[i].elem_bytes,
                                     ctx->stream));
out:
    return st;
}

/* Host copies (malloc'd, into host[i]) of set s's output tensors (outputs 1) or input
 * tensors (outputs 0); the other entries are left NULL. The stream is idle or bounded. */
bk_status bk__cuda_copy_to_host(bk_backend_ctx *ctx, const shape_set *s, int nt, int outputs,
                              void **host, bk_err *err)
{
    bk_status st = BK_OK;
    for (int i = 0; i < nt; i++) {
        const size_t bytes = s->t[i].elems * s->t[i].elem_bytes;
        if (!s->t[i].output != !outputs)
            continue;
        host[i] = malloc(bytes ? bytes : 1);
        if (!host[i]) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: out of host memory for %s", ctx->rank,
                         s->t[i].name);
            goto out;
        }
        CUDA_TRY(cudaMemcpyAsync(host[i], s->t[i].data, bytes, cudaMemcpyDeviceToHost,
                                 ctx->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(ctx->stream));
out:
    return st;
}

void bk__cuda_free_host(void **host)
{
    for (int i = 0; i < BK_MAX_TENSORS; i++) {
        free(host[i]);
        host[i] = NULL;
    }
}

/* One untimed eager call on set s after a lane barrier, waited for (bounded). */
bk_status bk__cuda_untimed_call(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s,
                              bk_err *err)
{
    bk_status st = BK_OK;
    cudaEvent_t done = NULL;
    CUDA_TRY(cudaEventCreate(&done));
    s->call.iter = -1;
    BK_TRY(bk_cuda_comm_barrier(ctx->comm, ctx->stream, job->timeout_s, err));
    BK_TRY(job->variant->run(job->vstate, &s->call, err));
    CUDA_TRY(cudaEventRecord(done, ctx->stream));
    BK_TRY(bk_cuda_comm_wait(ctx->comm, done, 3 * job->timeout_s + 1, err));
out:
    if (done)
        (void)cudaEventDestroy(done);
    return st;
}

/* The outputs the last timed call left in set s (poisoned before it) against an untimed
 * eager call's on the same inputs: bk_engine_check_timed. Every rank of the lane takes
 * part (the call meets its peers). */
bk_status bk__cuda_check_last(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s,
                            bk_err *err)
{
    bk_status st = BK_OK;
    void *timed[BK_MAX_TENSORS] = {0}, *untimed[BK_MAX_TENSORS] = {0};
    const int nt = job->target->ntensors;
    BK_TRY(bk__cuda_copy_to_host(ctx, s, nt, 1, timed, err));
    BK_TRY(bk__cuda_poison_outputs(ctx, s, nt, err));
    BK_TRY(bk__cuda_untimed_call(ctx, job, s, err));
    BK_TRY(bk__cuda_copy_to_host(ctx, s, nt, 1, untimed, err));
    st = bk_engine_check_timed(job, s->t, (const void *const *)timed,
                               (const void *const *)untimed, err);
out:
    bk__cuda_free_host(timed);
    bk__cuda_free_host(untimed);
    return st;
}

/* The inputs set s holds after a call against freshly seeded ones (set 0's seed), bit for
 * bit: BK_ERR_CONTRACT naming the first changed tensor. */
bk_status bk__cuda_check_inputs(bk_backend_ctx *ctx, const bk_shape_job *job, const shape_set *s,
                              bk_err *err)
{
    bk_status st = BK_OK;
    const bk_target *tg = job->target;
    void *now[BK_MAX_TENSORS] = {0};
    bk_tensor fresh[BK_MAX_TENSORS];
    memset(fresh, 0, sizeof(fresh));
    BK_TRY(bk__cuda_copy_to_host(ctx, s, tg->ntensors, 0, now, err));
    for (int i = 0; i < tg->ntensors; i++) {
        fresh[i] = s->t[i];
        fresh[i].data = malloc(s->t[i].elems * s->t[i].elem_bytes + 16);
        if (!fresh[i].data) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: out of host memory", ctx->rank);
            goto out;
        }
    }
    tg->init_inputs(fresh, job->shape, job->seed, job->shape_index, job->rank, job->world);
    const void *seeded[BK_MAX_TENSORS];
    for (int i = 0; i < tg->ntensors; i++)
        seeded[i] = fresh[i].data;
    st = bk_engine_check_inputs(job, s->t, (const void *const *)now, seeded, err);
out:
    for (int i = 0; i < tg->ntensors; i++)
        free(fresh[i].data);
    bk__cuda_free_host(now);
    return st;
}

#else
typedef int bk__engine_cuda_check_unused; /* ISO C forbids an empty translation unit */
#endif
