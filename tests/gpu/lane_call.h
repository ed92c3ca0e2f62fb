/* lane_call.h - GPU test helper: one rank's device tensors for allreduce + residual +
 * RMSNorm, one variant call (eager or graph replay) and its check against float64. */
#ifndef BK_LANE_CALL_H
#define BK_LANE_CALL_H

#include "gpu_lane.h"
#include "kernels/catalog.h"
#include "kernels/cuda_variants.h"

typedef struct lane_tensors {
    int64_t tokens, hidden;
    bk_shape shape;
    bk_tensor t[5];
    uint16_t *host; /* tokens x hidden */
    double *ref_ro, *ref_out;
    double *slack_ro, *slack_out; /* a bf16 sum's roundings (lane_reference_slack) */
    cudaStream_t stream;
    cudaGraphExec_t exec;
} lane_tensors;

#define LT_CUDA(call, what)                                                           \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess)                                                        \
            return BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e_)); \
    } while (0)

static inline bk_status lt_alloc(lane_tensors *lt, int64_t tokens, int64_t hidden, bk_err *err)
{
    static const char *names[5] = {"x", "residual", "gamma", "residual_out", "out"};
    memset(lt, 0, sizeof(*lt));
    lt->tokens = tokens;
    lt->hidden = hidden;
    lt->shape.tokens = tokens;
    lt->shape.hidden = hidden;
    lt->shape.weight = 1;
    const size_t n = (size_t)tokens * hidden;
    for (int i = 0; i < 5; i++) {
        lt->t[i].name = names[i];
        lt->t[i].output = i >= 3;
        lt->t[i].elems = i == 2 ? (size_t)hidden : n;
        lt->t[i].elem_bytes = 2;
        LT_CUDA(cudaMalloc(&lt->t[i].data, lt->t[i].elems * 2), "cudaMalloc");
    }
    lt->host = malloc(n * 2);
    lt->ref_ro = malloc(n * sizeof(double));
    lt->ref_out = malloc(n * sizeof(double));
    lt->slack_ro = malloc(n * sizeof(double));
    lt->slack_out = malloc(n * sizeof(double));
    if (!lt->host || !lt->ref_ro || !lt->ref_out || !lt->slack_ro || !lt->slack_out)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of host memory");
    LT_CUDA(cudaStreamCreateWithFlags(&lt->stream, cudaStreamNonBlocking), "stream");
    return BK_OK;
}

static inline void lt_free(lane_tensors *lt)
{
    for (int i = 0; i < 5; i++)
        if (lt->t[i].data)
            cudaFree(lt->t[i].data);
    if (lt->exec)
        cudaGraphExecDestroy(lt->exec);
    if (lt->stream)
        cudaStreamDestroy(lt->stream);
    free(lt->host);
    free(lt->ref_ro);
    free(lt->ref_out);
    free(lt->slack_ro);
    free(lt->slack_out);
}

/* Upload this rank's inputs for `seed`, poison the outputs, compute the reference. */
static inline bk_status lt_inputs(lane_tensors *lt, uint64_t seed, int rank, int world, bk_err *err)
{
    const size_t n = (size_t)lt->tokens * lt->hidden;
    for (int which = 0; which < 3; which++) {
        size_t m = which == 2 ? (size_t)lt->hidden : n;
        lane_fill(lt->host, m, seed, which, rank);
        LT_CUDA(cudaMemcpy(lt->t[which].data, lt->host, m * 2, cudaMemcpyHostToDevice), "upload");
    }
    for (int i = 3; i < 5; i++)
        LT_CUDA(cudaMemset(lt->t[i].data, 0xFF, n * 2), "poison");
    /* cudaMemcpy/cudaMemset above ran on the legacy stream, which does not
     * order our non-blocking stream: finish them before any call. */
    LT_CUDA(cudaDeviceSynchronize(), "sync");
    lane_reference_slack(seed, world, lt->tokens, lt->hidden, lt->ref_ro, lt->ref_out,
                         lt->slack_ro, lt->slack_out);
    return BK_OK;
}

/* Work queued on lt->stream right before the variant (in its graph too): lt_call_pre. */
typedef bk_status (*lt_pre_fn)(lane_tensors *lt, void *arg, bk_err *err);

/* One call: lane barrier (unless barrier == 0), then pre (when not NULL) and the variant
 * eagerly, or (graph) both captured once and replayed; waits with a bound. */
static inline bk_status lt_call_pre(lane_tensors *lt, const bk_variant *v, bk_cuda_comm *comm,
                                    int graph, int barrier, double timeout_s, lt_pre_fn pre,
                                    void *pre_arg, bk_err *err)
{
    bk_status st;
    cudaEvent_t ev;
    bk_call call = {.shape = &lt->shape, .iter = -1, .rank = comm->rank, .world = comm->world,
                    .t = lt->t, .nt = 5, .comm = comm, .stream = lt->stream,
                    .timeout_s = timeout_s};
    if (graph && !lt->exec) {
        cudaGraph_t g;
        LT_CUDA(cudaStreamBeginCapture(lt->stream, cudaStreamCaptureModeThreadLocal), "capture");
        st = pre ? pre(lt, pre_arg, err) : BK_OK;
        if (st == BK_OK)
            st = v->run(NULL, &call, err);
        cudaError_t e = cudaStreamEndCapture(lt->stream, &g);
        if (st != BK_OK) {
            if (e == cudaSuccess)
                cudaGraphDestroy(g);
            return st;
        }
        LT_CUDA(e, "end capture");
        LT_CUDA(cudaGraphInstantiate(&lt->exec, g, 0), "instantiate");
        cudaGraphDestroy(g);
    }
    if (barrier && (st = bk_cuda_comm_barrier(comm, lt->stream, timeout_s, err)) != BK_OK)
        return st;
    if (graph)
        LT_CUDA(cudaGraphLaunch(lt->exec, lt->stream), "graph launch");
    else if ((pre && (st = pre(lt, pre_arg, err)) != BK_OK) ||
             (st = v->run(NULL, &call, err)) != BK_OK)
        return st;
    LT_CUDA(cudaEventCreate(&ev), "event");
    LT_CUDA(cudaEventRecord(ev, lt->stream), "record");
    st = bk_cuda_comm_wait(comm, ev, 3 * timeout_s + 1, err);
    cudaEventDestroy(ev);
    return st;
}

static inline bk_status lt_call(lane_tensors *lt, const bk_variant *v, bk_cuda_comm *comm,
                                int graph, int barrier, double timeout_s, bk_err *err)
{
    return lt_call_pre(lt, v, comm, graph, barrier, timeout_s, NULL, NULL, err);
}

/* Compare both outputs with the reference; *hash gets their digest. bf16_sum: the variant
 * sums the ranks' x in bf16 (NCCL's allreduce), so each element may also carry that sum's
 * roundings (lane_reference_slack); the fused variants sum in fp32 and get no such slack. */
static inline bk_status lt_check(lane_tensors *lt, const char *what, double rtol, double atol,
                          int bf16_sum, uint64_t *hash, bk_err *err)
{
    const size_t n = (size_t)lt->tokens * lt->hidden;
    uint64_t h = 0;
    for (int i = 3; i < 5; i++) {
        LT_CUDA(cudaMemcpy(lt->host, lt->t[i].data, n * 2, cudaMemcpyDeviceToHost), "download");
        const double *slack = !bf16_sum ? NULL : i == 3 ? lt->slack_ro : lt->slack_out;
        double e = lane_err_slack(lt->host, i == 3 ? lt->ref_ro : lt->ref_out, slack, n, rtol,
                                  atol);
        if (e > 1.0)
            return BK_FAIL(err, BK_ERR_INTERNAL, "%s: %s off the float64 reference (worst "
                           "error %.3g of tolerance) at %lld x %lld", what, lt->t[i].name, e,
                           (long long)lt->tokens, (long long)lt->hidden);
        h = h * 31 + lane_hash(lt->host, n * 2);
    }
    *hash = h;
    return BK_OK;
}

#endif
