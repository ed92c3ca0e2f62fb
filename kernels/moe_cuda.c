/* moe_cuda.c - cuda variants of moe.fused_experts_reduce at world 1 (one GPU, TP1 EP1,
 * where the trailing reduction is the top-k sum): the incumbent `moe_serial_cuda` and the
 * candidate `moe_fused_combine_cuda`.
 *
 * Both: route on the device (kernels/moe.cu), GEMM1 per local expert with cuBLAS
 * (bf16 in and out, fp32 compute), SiLU-and-mul, GEMM2 per expert. Then
 *   moe_serial_cuda: top-k weighted combine into `out` (bf16), then a separate residual
 *     add; each stage is its own kernel, as the serial stack runs them;
 *   moe_fused_combine_cuda: one kernel reads each token's K expert rows once, weights,
 *     adds the residual and writes `out`.
 * cuBLAS takes the per-expert row counts on the host, so each call copies topk_ids to
 * the host (a synchronous copy on a private stream) and counts the rows there; in graph
 * mode that happens once, at capture, and the counts are baked into the graph (valid
 * because a graph replays the inputs it was captured with). Lanes of more than one GPU
 * need the cuda backend's communicator and are outside these variants' domain. */
#ifdef BK_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog_internal.h"
#include "kernels/moe_cuda.h"
#include "kernels/moe_internal.h"

#define WS_CUBLAS (32u << 20)

typedef struct cuda_moe {
    const char *name;
    int fused;
    cublasHandle_t blas;
    cudaStream_t side;  /* the host copy of topk_ids */
    void *blas_ws;
    int32_t *h_ids;     /* pinned */
    size_t cap_ids, cap_tk, cap_xp, cap_gu, cap_el;
    int32_t *counts, *cursor, *offsets, *row_of;
    uint16_t *xp, *gu, *act, *y;
    int64_t *h_off;     /* host offsets [el + 1] */
} cuda_moe;

#define CU_TRY(call)                                                                       \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s: %s", m->name, #call,                 \
                         cudaGetErrorString(e_));                                          \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

#define BLAS_TRY(call)                                                                     \
    do {                                                                                   \
        cublasStatus_t b_ = (call);                                                        \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s: %s", m->name, #call,                 \
                         cublasGetStatusString(b_));                                       \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

/* ---- state: nothing touches the GPU before the first call (plan checks create
 * variants on machines without one) ---- */

static bk_status cm_create(const char *name, int fused, const json_t *params,
                           bk_backend backend, void **state, bk_err *err)
{
    const char *key;
    json_t *val;
    *state = NULL;
    json_object_foreach((json_t *)params, key, val) {
        (void)val;
        return BK_FAIL(err, BK_ERR_INPUT, "params.%s: unknown parameter (%s takes no parameters)",
                       key, name);
    }
    if (backend != BK_BACKEND_CUDA)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s: runs on the cuda backend only", name);
    cuda_moe *m = calloc(1, sizeof *m);
    if (!m)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", name);
    m->name = name;
    m->fused = fused;
    *state = m;
    return BK_OK;
}

static void cm_free_bufs(cuda_moe *m)
{
    void *dev[] = { m->counts, m->cursor, m->offsets, m->row_of, m->xp, m->gu, m->act, m->y };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            (void)cudaFree(dev[i]);
    m->counts = m->cursor = m->offsets = m->row_of = NULL;
    m->xp = m->gu = m->act = m->y = NULL;
    m->cap_tk = m->cap_xp = m->cap_gu = m->cap_el = 0;
}

static void cm_destroy(void *state)
{
    cuda_moe *m = state;
    if (!m)
        return;
    cm_free_bufs(m);
    if (m->blas)
        (void)cublasDestroy(m->blas);
    if (m->blas_ws)
        (void)cudaFree(m->blas_ws);
    if (m->side)
        (void)cudaStreamDestroy(m->side);
    if (m->h_ids)
        (void)cudaFreeHost(m->h_ids);
    free(m->h_off);
    free(m);
}

/* First-call setup and buffer growth, on eager calls only (never while the stream
 * is capturing). Buffers only grow, and only between shapes: the engine warms each
 * shape up eagerly before capturing it, so a graph keeps valid pointers. */
static bk_status cm_reserve(cuda_moe *m, const bk_shape *s, int64_t el, bk_err *err)
{
    bk_status st = BK_OK;
    size_t tk = (size_t)(s->tokens * s->topk), h = (size_t)s->hidden;
    size_t in = (size_t)s->intermediate;
    if (!m->blas) {
        BLAS_TRY(cublasCreate(&m->blas));
        CU_TRY(cudaMalloc(&m->blas_ws, WS_CUBLAS));
        BLAS_TRY(cublasSetWorkspace(m->blas, m->blas_ws, WS_CUBLAS));
        CU_TRY(cudaStreamCreateWithFlags(&m->side, cudaStreamNonBlocking));
    }
    if (tk > m->cap_ids) {
        if (m->h_ids)
            CU_TRY(cudaFreeHost(m->h_ids));
        m->h_ids = NULL;
        CU_TRY(cudaMallocHost((void **)&m->h_ids, tk * sizeof(int32_t)));
        m->cap_ids = tk;
    }
    if (tk > m->cap_tk || tk * h > m->cap_xp || tk * 2 * in > m->cap_gu ||
        (size_t)el + 1 > m->cap_el) {
        cm_free_bufs(m);
        CU_TRY(cudaMalloc((void **)&m->counts, ((size_t)el + 1) * 4));
        CU_TRY(cudaMalloc((void **)&m->cursor, ((size_t)el + 1) * 4));
        CU_TRY(cudaMalloc((void **)&m->offsets, ((size_t)el + 1) * 4));
        CU_TRY(cudaMalloc((void **)&m->row_of, tk * 4));
        CU_TRY(cudaMalloc((void **)&m->xp, tk * h * 2));
        CU_TRY(cudaMalloc((void **)&m->gu, tk * 2 * in * 2));
        CU_TRY(cudaMalloc((void **)&m->act, tk * in * 2));
        CU_TRY(cudaMalloc((void **)&m->y, tk * h * 2));
        int64_t *ho = realloc(m->h_off, ((size_t)el + 1) * sizeof *ho);
        if (!ho) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", m->name);
            goto out;
        }
        m->h_off = ho;
        m->cap_tk = tk;
        m->cap_xp = tk * h;
        m->cap_gu = tk * 2 * in;
        m->cap_el = (size_t)el + 1;
    }
out:
    return st;
}

/* 1 when the handle and every buffer are ready for the shape. */
static int cm_fits(const cuda_moe *m, const bk_shape *s, int64_t el)
{
    size_t tk = (size_t)(s->tokens * s->topk), h = (size_t)s->hidden;
    size_t in = (size_t)s->intermediate;
    return m->blas && tk <= m->cap_ids && tk <= m->cap_tk && tk * h <= m->cap_xp &&
           tk * 2 * in <= m->cap_gu && (size_t)el + 1 <= m->cap_el;
}

/* Host offsets of each local expert's rows, from a copy of topk_ids. */
static bk_status cm_host_offsets(cuda_moe *m, const bk_call *call, int64_t el, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_shape *s = call->shape;
    int64_t tk = s->tokens * s->topk;
    CU_TRY(cudaMemcpyAsync(m->h_ids, call->t[BK_MOE_IDS].data, (size_t)tk * 4,
                           cudaMemcpyDeviceToHost, m->side));
    CU_TRY(cudaStreamSynchronize(m->side));
    memset(m->h_off, 0, ((size_t)el + 1) * sizeof *m->h_off);
    for (int64_t a = 0; a < tk; a++) {
        int32_t e = m->h_ids[a];
        if (e < 0 || e >= s->experts) {
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: topk_ids[%lld] = %d is not an expert in "
                         "0..%lld", m->name, (long long)a, (int)e, (long long)s->experts - 1);
            goto out;
        }
        if (bk__moe_owner(e, call->world) == call->rank)
            m->h_off[bk__moe_slot(e, call->world) + 1]++;
    }
    for (int64_t j = 0; j < el; j++)
        m->h_off[j + 1] += m->h_off[j];
out:
    return st;
}

/* Row-major C[rows, n] = A[rows, k] . W[n, k]^T for each local expert's rows, as
 * column-major C^T = W . A^T (cuBLAS), bf16 in and out, fp32 compute. */
static bk_status cm_grouped_gemm(cuda_moe *m, int64_t el, const uint16_t *a, const uint16_t *w,
                                 uint16_t *c, int64_t n, int64_t k, bk_err *err)
{
    bk_status st = BK_OK;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t j = 0; j < el; j++) {
        int64_t r0 = m->h_off[j], rows = m->h_off[j + 1] - r0;
        if (rows == 0)
            continue;
        BLAS_TRY(cublasGemmEx(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one,
                              w + (size_t)j * (size_t)n * (size_t)k, CUDA_R_16BF, (int)k,
                              a + (size_t)r0 * (size_t)k, CUDA_R_16BF, (int)k, &zero,
                              c + (size_t)r0 * (size_t)n, CUDA_R_16BF, (int)n,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
out:
    return st;
}

static bk_status cm_run(void *state, bk_call *call, bk_err *err)
{
    bk_status st = BK_OK;
    cuda_moe *m = state;
    cudaStream_t stream = call->stream;
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    int relaxed = 0;
    BK_TRY(bk__moe_check_call(call, err));
    const bk_shape *s = call->shape;
    if (call->world != 1 || (s->hidden % 8) != 0) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s: world %d, hidden %lld: needs world 1 and "
                     "hidden a multiple of 8 (route it to the incumbent)", m->name, call->world,
                     (long long)s->hidden);
        goto out;
    }
    int64_t el = bk__moe_local_experts(s->experts, call->world);
    int64_t h = s->hidden, in = s->intermediate, t = s->tokens, k = s->topk;
    CU_TRY(cudaStreamIsCapturing(stream, &cap));
    if (cap == cudaStreamCaptureStatusActive) {
        if (!cm_fits(m, s, el)) {
            st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s: captured before an eager call of this "
                         "shape (cuBLAS and the buffers are set up eagerly: warm up first)",
                         m->name);
            goto out;
        }
        CU_TRY(cudaThreadExchangeStreamCaptureMode(&mode)); /* for the host copy of ids */
        relaxed = 1;
    } else {
        CU_TRY(cudaStreamSynchronize(stream)); /* topk_ids may come from earlier work */
        BK_TRY(cm_reserve(m, s, el, err));
    }
    BK_TRY(cm_host_offsets(m, call, el, err));
    if (relaxed) {
        CU_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
        relaxed = 0;
    }
    BLAS_TRY(cublasSetStream(m->blas, stream));
    BK_TRY(bk_moe_route(call->t[BK_MOE_IDS].data, call->t[BK_MOE_X].data, t, k, h, call->rank,
                        call->world, el, m->counts, m->cursor, m->offsets, m->row_of, m->xp,
                        stream, err));
    BK_TRY(cm_grouped_gemm(m, el, m->xp, call->t[BK_MOE_W1].data, m->gu, 2 * in, h, err));
    BK_TRY(bk_moe_silu_mul(m->gu, m->act, m->h_off[el], in, stream, err));
    BK_TRY(cm_grouped_gemm(m, el, m->act, call->t[BK_MOE_W2].data, m->y, h, in, err));
    uint16_t *out = call->t[BK_MOE_OUT].data;
    const uint16_t *res = call->t[BK_MOE_RESIDUAL].data;
    if (m->fused) {
        BK_TRY(bk_moe_combine(m->y, m->row_of, call->t[BK_MOE_W].data, res, out, t, k, h,
                              stream, err));
    } else {
        BK_TRY(bk_moe_combine(m->y, m->row_of, call->t[BK_MOE_W].data, NULL, out, t, k, h,
                              stream, err));
        BK_TRY(bk_moe_add_residual(out, res, (size_t)(t * h), stream, err));
    }
out:
    if (relaxed)
        (void)cudaThreadExchangeStreamCaptureMode(&mode);
    return st;
}

static bk_status serial_cuda_create(const json_t *params, bk_backend backend, int rank,
                                    int world, void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return cm_create("moe_serial_cuda", 0, params, backend, state, err);
}

static bk_status fused_cuda_create(const json_t *params, bk_backend backend, int rank,
                                   int world, void **state, bk_err *err)
{
    (void)rank;
    (void)world;
    return cm_create("moe_fused_combine_cuda", 1, params, backend, state, err);
}

#define CUDA_MOE_DOMAIN                                                                  \
    {                                                                                    \
        .backends = BK_BK_CUDA, .dtypes = "bf16", .worlds = 1u << 1, .min_tokens = 1,    \
        .min_hidden = 8, .hidden_multiple = 8                                            \
    }

const bk_variant bk__moe_cuda_variants[] = {
    { .name = "moe_serial_cuda",
      .target = BK_MOE_TARGET,
      .backends = BK_BK_CUDA,
      .summary = "device routing, cuBLAS GEMM1 per expert, SiLU*up, cuBLAS GEMM2 per expert, "
                 "top-k weighted combine, then a separate residual add (world 1)",
      .domain = CUDA_MOE_DOMAIN,
      .create = serial_cuda_create,
      .run = cm_run,
      .destroy = cm_destroy },
    /* Domain: every shape of world 1 - it does strictly less memory traffic than
     * the incumbent (one [T, H] read and write and one launch fewer); to revisit
     * with tests/bench/bench_moe.cu on the device. */
    { .name = "moe_fused_combine_cuda",
      .target = BK_MOE_TARGET,
      .backends = BK_BK_CUDA,
      .summary = "as moe_serial_cuda, with the residual add fused into the top-k combine: "
                 "expert rows read once, out written once (world 1)",
      .domain = CUDA_MOE_DOMAIN,
      .create = fused_cuda_create,
      .run = cm_run,
      .destroy = cm_destroy },
    { .name = NULL },
};

#endif /* BK_HAVE_CUDA */
