/* ar_rmsnorm_dev.cuh - the pieces the residual + RMSNorm kernel files share
 * (kernels/ar_rmsnorm.cu, kernels/ar_rmsnorm_pipe.cu): 16-byte bf16 vector math, the block
 * reduction, the epilogue, the row configuration and the host-side checks. Include from .cu
 * files only. */
#ifndef BK_AR_RMSNORM_DEV_CUH
#define BK_AR_RMSNORM_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/bf16_dev.cuh"
#include "kernels/cuda_variants.h"

#define BK_MAX_VPT 8  /* 16-byte vectors per thread: 8 x 8 x 256 threads = 16384 */
#define BK_ROW_THREADS 256      /* default threads per row */
#define BK_MAX_ROW_THREADS 512  /* the tuning sweep goes up to here */

/* ---------------------------------------------------------------- device helpers */

__device__ __forceinline__ float bk__warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block, the same order on every rank (bitwise reproducible), in one
 * barrier: every warp sums the warps' partial sums itself (the xor butterfly leaves the
 * same bits in every lane of every warp, a + b being b + a). `call` counts this block's
 * calls (a row loop's iteration): consecutive calls use the two halves of the partial
 * sums in turn, so a warp already in the next call never overwrites a half a slower
 * warp is still reading (by the call after that, every warp has passed the barrier
 * between). */
__device__ __forceinline__ float bk__block_sum(float v, int call)
{
    __shared__ float part[2][32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = bk__warp_sum(v);
    if (lane == 0)
        part[call & 1][w] = v;
    __syncthreads();
    return bk__warp_sum(lane < (int)(blockDim.x >> 5) ? part[call & 1][lane] : 0.f);
}

/* Programmatic dependent launch (sm_90, cfg->pdl): a kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may be scheduled while the kernel before
 * it on the stream is still running. bk__pdl_wait() returns once that kernel has completed
 * and its writes are visible (at once when the kernel was launched without the attribute),
 * so it comes before the first load of any input: the kernel before may have written any of
 * them, gamma included. bk__pdl_launch() lets the kernel after this one be scheduled once
 * every block of this grid has called it (or exited); that kernel waits in its own
 * bk__pdl_wait() for this grid to complete, so calling it first thing is safe: it only
 * moves the next kernel's launch earlier. */
__device__ __forceinline__ void bk__pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void bk__pdl_launch(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* 1 / hidden, correctly rounded: the mean of squares is their sum times this (a
 * multiply after the reduction instead of a division; the same bits when hidden is a
 * power of two, at most 1 ulp apart otherwise). Compute it before the row's loads
 * return, off the reduction's path. */
__device__ __forceinline__ float bk__inv_hidden(int hidden)
{
    return __frcp_rn((float)hidden);
}

/* Load this thread's gamma vectors early (before the row's reduction), so
 * their latency overlaps the row loads instead of following them. */
template <int VPT>
__device__ __forceinline__ void bk__load_gamma(uint4 (&gv)[VPT], const uint4 *__restrict__ gamma,
                                               int nvec)
{
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nvec)
            gv[k] = __ldg(gamma + i);
    }
}

/* Round acc (s, fp32) to bf16 in place (r = residual_out as stored) and return
 * this thread's sum of r^2. */
template <int VPT>
__device__ __forceinline__ float bk__round_sumsq(float (&acc)[VPT][8])
{
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < VPT; k++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            acc[k][j] = __bfloat162float(__float2bfloat16_rn(acc[k][j]));
            ss += acc[k][j] * acc[k][j];
        }
    return ss;
}

/* *p = v; STREAM: an evict-first store. */
template <bool STREAM>
__device__ __forceinline__ void bk__st(uint4 *p, uint4 v)
{
    if (STREAM)
        __stcs(p, v);
    else
        *p = v;
}

/* acc holds r (rounded): store residual_out = r and out = bf16(r * inv * gamma)
 * at vector offset `off` of every destination pair (ndst of them). STREAM:
 * evict-first stores. */
template <int VPT, bool STREAM>
__device__ __forceinline__ void bk__store_norm(const float (&acc)[VPT][8], int nvec, float inv,
                                               const uint4 (&gv)[VPT], uint4 *const *ro,
                                               uint4 *const *o, int ndst, size_t off)
{
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < nvec) {
            float g[8];
            bk__unpack(g, gv[k]);
            const uint4 r = bk__pack(acc[k]);
#pragma unroll
            for (int j = 0; j < 8; j++)
                g[j] = acc[k][j] * inv * g[j];
            const uint4 y = bk__pack(g);
            for (int d = 0; d < ndst; d++) {
                bk__st<STREAM>(ro[d] + off + i, r);
                bk__st<STREAM>(o[d] + off + i, y);
            }
        }
    }
}

/* acc holds s (fp32) for this thread's vectors of one row; store
 * residual_out = bf16(s) and out = bf16(r * inv_rms(r) * gamma), where r is
 * residual_out as stored (the target's definition, kernels/ar_rmsnorm.c), at
 * vector offset `off` of every destination pair (ndst of them). inv_hidden:
 * bk__inv_hidden; call: bk__block_sum's. */
template <int VPT, bool STREAM = false>
__device__ __forceinline__ void bk__epilogue(float (&acc)[VPT][8], int nvec, float inv_hidden,
                                             const uint4 (&gv)[VPT], float eps,
                                             uint4 *const *ro, uint4 *const *o, int ndst,
                                             size_t off, int call)
{
    const float inv = rsqrtf(bk__block_sum(bk__round_sumsq(acc), call) * inv_hidden + eps);
    bk__store_norm<VPT, STREAM>(acc, nvec, inv, gv, ro, o, ndst, off);
}

__device__ __forceinline__ void bk__zero8(float *f)
{
#pragma unroll
    for (int j = 0; j < 8; j++)
        f[j] = 0.f;
}

/* acc += N bf16 rows, in order rows[0], rows[1], ... (the fp32 sum order is
 * part of the result); FIRST: acc = rows[0] + rows[1] + ..., the sum starting at
 * its first term (acc's old values unused; the result differs from 0 + ... only
 * in the sign of a zero). Every load of the N rows is issued before the first
 * use, unconditionally (an index past the row reads vector 0 and is then
 * ignored), so one memory round trip serves them all. CG reads through L2
 * only (peer memory); CS streams (evict first). */
template <int VPT, int N, bool CG, bool CS = false, bool FIRST = false>
__device__ __forceinline__ void bk__add_rows(float (&acc)[VPT][8], const uint4 *const (&rows)[N],
                                             int nvec)
{
    uint4 v[N][VPT];
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            const uint4 *a = rows[n] + (i < nvec ? i : 0);
            v[n][k] = CG ? __ldcg(a) : CS ? __ldcs(a) : *a;
        }
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int k = 0; k < VPT; k++)
            if (threadIdx.x + k * blockDim.x < nvec) {
                if (FIRST && n == 0)
                    bk__unpack(acc[k], v[n][k]);
                else
                    bk__unpack_add(acc[k], v[n][k]);
            } else if (FIRST && n == 0) {
                bk__zero8(acc[k]); /* past the row: 0, for bk__round_sumsq */
            }
}
/* ---------------------------------------------------------------- host helpers */

/* Vectors per thread and threads per block for a row of `hidden`: about
 * `target` threads, each holding up to BK_MAX_VPT vectors. */
static inline void bk__row_config(int64_t hidden, int target, int *vpt, int *threads)
{
    const int nvec = (int)(hidden / 8);
    int k = (nvec + target - 1) / target;
    if (k < 1)
        k = 1;
    int t = (nvec + k - 1) / k;
    *vpt = k;
    *threads = (t + 31) / 32 * 32;
}

/* The block shape of cfg at hidden (bk__row_config), or BK_ERR_INPUT naming the limit:
 * about cfg->threads threads per row, 32..512 for the row kernel and 32..1024 for the lean
 * and pipelined ones; at most BK_MAX_VPT vectors per thread, and 2 above 512 threads (the
 * 1024-thread instances' register cap); gamma_early: the lean kernel only, at most 2
 * vectors per thread. Shared by the three launchers and, through
 * bk_rmsnorm_cfg_threads, by the benchmark. */
static inline bk_status bk__rmsnorm_shape(const bk_rmsnorm_cfg *cfg, int64_t hidden, int *vpt,
                                          int *threads, bk_err *err)
{
    static const char *const name[] = {"row", "pipe", "lean"};
    const char *what = (unsigned)cfg->kernel < 3 ? name[cfg->kernel] : "?";
    const int maxt = cfg->kernel == BK_RMSNORM_ROW ? BK_MAX_ROW_THREADS : 1024;
    if (cfg->threads < 32 || cfg->threads > maxt)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm %s: %d threads per row (32..%d)",
                       what, cfg->threads, maxt);
    if (cfg->gamma_early && cfg->kernel != BK_RMSNORM_LEAN)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm %s: gamma_early is the lean "
                       "kernel's", what);
    bk__row_config(hidden, cfg->threads, vpt, threads);
    if (cfg->gamma_early && *vpt > 2)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm lean: hidden %lld at about %d "
                       "threads per row needs %d vectors per thread; gamma_early takes at "
                       "most 2", (long long)hidden, cfg->threads, *vpt);
    if (*vpt > BK_MAX_VPT || *threads > maxt || (*threads > BK_MAX_ROW_THREADS && *vpt > 2))
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm %s: hidden %lld at about %d "
                       "threads per row needs %d threads x %d vectors (at most %d threads, "
                       "%d vectors each, 2 above %d threads)", what, (long long)hidden,
                       cfg->threads, *threads, *vpt, maxt, BK_MAX_VPT, BK_MAX_ROW_THREADS);
    return BK_OK;
}

/* cfg->split: 0 or 1, or 2, 4 ... BK_MAX_SPLIT blocks per row of the lean kernel with
 * gamma early, tokens x split blocks in all; refused when sum overlaps an output (in place: a row's blocks would
 * read the sum another block of the row has already overwritten). */
#define BK_MAX_SPLIT 8
static inline int bk__overlap(const void *a, const void *b, size_t bytes)
{
    const char *x = (const char *)a, *y = (const char *)b;
    return x < y + bytes && y < x + bytes;
}

/* The call is in place: sum overlaps residual_out or out (tokens x hidden bf16 each). */
static inline int bk__in_place(const void *sum, const void *residual_out, const void *out,
                               int64_t tokens, int64_t hidden)
{
    const size_t bytes = tokens > 0 && hidden > 0 ? (size_t)tokens * (size_t)hidden * 2 : 0;
    return bk__overlap(sum, residual_out, bytes) || bk__overlap(sum, out, bytes);
}

static inline bk_status bk__check_split(const bk_rmsnorm_cfg *cfg, const void *sum,
                                        const void *residual_out, const void *out,
                                        int64_t tokens, int64_t hidden, bk_err *err)
{
    if (cfg->split <= 1) {
        if (cfg->split < 0)
            return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm: split %d (0..%d)", cfg->split,
                           BK_MAX_SPLIT);
        return BK_OK;
    }
    if (cfg->kernel != BK_RMSNORM_LEAN || !cfg->gamma_early || cfg->split > BK_MAX_SPLIT ||
        (cfg->split & (cfg->split - 1)))
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm: split %d: the lean kernel's with "
                       "gamma early, 2, 4 or %d blocks per row", cfg->split, BK_MAX_SPLIT);
    if (tokens > 0x7fffffff / cfg->split)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm: %lld tokens x split %d blocks "
                       "exceed the grid's 2^31 - 1", (long long)tokens, cfg->split);
    if (bk__in_place(sum, residual_out, out, tokens, hidden))
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm: split %d cannot run in place "
                       "(sum overlaps an output)", cfg->split);
    return BK_OK;
}

static inline bk_status bk__check_row(const char *what, int64_t tokens, int64_t hidden, bk_err *err)
{
    if (hidden <= 0 || hidden % 8 != 0 || hidden > 8 * BK_MAX_VPT * BK_ROW_THREADS)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: hidden %lld must be a positive multiple of 8 "
                       "up to %d", what, (long long)hidden, 8 * BK_MAX_VPT * BK_ROW_THREADS);
    if (tokens < 0 || tokens > 0x7fffffff)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: tokens %lld out of range", what,
                       (long long)tokens);
    return BK_OK;
}

static inline bk_status bk__launched(const char *what, bk_err *err)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s launch: %s", what, cudaGetErrorString(e));
    return BK_OK;
}

/* kernel<<<grid, threads, smem, stream>>>(args...), with programmatic stream serialization
 * when pdl (bk__pdl_wait); the launch's error, or the last one, named by what. */
template <typename... P, typename... A>
static inline bk_status bk__launch(const char *what, void (*kernel)(P...), unsigned grid,
                                   unsigned threads, size_t smem, cudaStream_t stream, int pdl,
                                   bk_err *err, A... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(grid);
    c.blockDim = dim3(threads);
    c.dynamicSmemBytes = smem;
    c.stream = stream;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    const cudaError_t e = cudaLaunchKernelEx(&c, kernel, args...);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* a launch error is not sticky: clear it */
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s launch: %s", what, cudaGetErrorString(e));
    }
    return bk__launched(what, err);
}

#define BK_VPT_SWITCH(vpt, LAUNCH) \
    switch (vpt) {                 \
    case 1: LAUNCH(1); break;      \
    case 2: LAUNCH(2); break;      \
    case 3: LAUNCH(3); break;      \
    case 4: LAUNCH(4); break;      \
    case 5: LAUNCH(5); break;      \
    case 6: LAUNCH(6); break;      \
    case 7: LAUNCH(7); break;      \
    default: LAUNCH(8); break;     \
    }


/* The pipelined kernel's launcher (kernels/ar_rmsnorm_pipe.cu); cfg->kernel is
 * BK_RMSNORM_PIPE; arguments as bk_residual_rmsnorm_config. */
bk_status bk__rmsnorm_pipe(const void *sum, const void *residual, const void *gamma,
                           void *residual_out, void *out, int64_t tokens, int64_t hidden,
                           float eps, const bk_rmsnorm_cfg *cfg, cudaStream_t stream,
                           bk_err *err);

#endif
