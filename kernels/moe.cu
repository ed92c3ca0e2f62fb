/* moe.cu - moe.fused_experts_reduce on GPUs: routing (count, scan, fill + gather), the
 * SiLU-and-mul between the expert GEMMs, the top-k weighted combine (optionally fused
 * with the residual add), the separate residual add of the incumbent, and a copy kernel
 * as the bandwidth yardstick. The GEMMs themselves are cuBLAS (kernels/moe_cuda.c). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/bf16_dev.cuh"
#include "kernels/moe_cuda.h"

#define MOE_THREADS 256
#define MOE_LOADS 8 /* expert rows of a token loaded together by the combine */
#define MOE_BLOCKS_WANTED 264 /* two per multiprocessor of an H100 / H200 */

/* ---------------------------------------------------------------- device helpers */

static __device__ __forceinline__ void moe_fma8(float *acc, uint4 v, float w)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += w * f.x;
        acc[2 * j + 1] += w * f.y;
    }
}


/* ---------------------------------------------------------------- kernels */

__global__ void moe_count_kernel(const int32_t *ids, int64_t tk, int rank, int world,
                                 int32_t *counts)
{
    int64_t a = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a < tk && ids[a] % world == rank)
        atomicAdd(&counts[ids[a] / world], 1);
}

/* One thread: a few hundred local experts at most. */
__global__ void moe_scan_kernel(const int32_t *counts, int64_t el, int32_t *offsets,
                                int32_t *cursor)
{
    int32_t run = 0;
    for (int64_t j = 0; j < el; j++) {
        offsets[j] = run;
        cursor[j] = run;
        run += counts[j];
    }
    offsets[el] = run;
}

/* One block per assignment: claim a row in its expert's group, gather x. */
__global__ void moe_fill_kernel(const int32_t *ids, const uint16_t *x, int64_t topk,
                                int64_t hidden, int rank, int world, int32_t *cursor,
                                int32_t *row_of, uint16_t *xp)
{
    __shared__ int32_t row;
    const int64_t a = blockIdx.x;
    if (threadIdx.x == 0) {
        int32_t e = ids[a];
        row = e % world == rank ? atomicAdd(&cursor[e / world], 1) : -1;
        row_of[a] = row;
    }
    __syncthreads();
    if (row < 0)
        return;
    const uint4 *src = reinterpret_cast<const uint4 *>(x + (a / topk) * hidden);
    uint4 *dst = reinterpret_cast<uint4 *>(xp + (int64_t)row * hidden);
    for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x)
        dst[c] = src[c];
}

__global__ void moe_silu_mul_kernel(const __nv_bfloat16 *gu, __nv_bfloat16 *act, int64_t rows,
                                    int64_t inter)
{
    const int64_t n = rows * inter;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / inter, c = i - r * inter;
        float g = __bfloat162float(gu[r * 2 * inter + c]);
        float u = __bfloat162float(gu[r * 2 * inter + inter + c]);
        act[i] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    }
}

/* Block (t, y): token t, its y-th range of `per` 16-byte column vectors; each thread owns
 * one vector per step. The token's K rows and weights sit in shared memory (topk <= 64). */
__global__ void moe_combine_kernel(const uint16_t *y, const int32_t *row_of, const float *w,
                                   const uint16_t *residual, uint16_t *out, int64_t topk,
                                   int64_t hidden, int64_t per)
{
    __shared__ int32_t rows[64];
    __shared__ float wts[64];
    const int64_t t = blockIdx.x;
    const int64_t nv = hidden / 8;
    if (threadIdx.x < topk) {
        rows[threadIdx.x] = row_of[t * topk + threadIdx.x];
        wts[threadIdx.x] = w[t * topk + threadIdx.x];
    }
    __syncthreads();
    const int64_t c0 = (int64_t)blockIdx.y * per;
    const int64_t c1 = c0 + per < nv ? c0 + per : nv;
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float acc[8] = { 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f };
        /* MOE_LOADS rows at a time, every load issued before the first use and
         * unconditionally (a missing row reads row 0 and is skipped), so one memory
         * round trip serves them all; the sum stays in k order. */
        for (int64_t k0 = 0; k0 < topk; k0 += MOE_LOADS) {
            uint4 v[MOE_LOADS];
#pragma unroll
            for (int j = 0; j < MOE_LOADS; j++) {
                const int64_t k = k0 + j < topk ? k0 + j : k0;
                const int32_t r = rows[k] < 0 ? 0 : rows[k];
                v[j] = __ldg(reinterpret_cast<const uint4 *>(y + (int64_t)r * hidden) + c);
            }
#pragma unroll
            for (int j = 0; j < MOE_LOADS; j++)
                if (k0 + j < topk && rows[k0 + j] >= 0)
                    moe_fma8(acc, v[j], wts[k0 + j]);
        }
        if (residual)
            moe_fma8(acc, __ldg(reinterpret_cast<const uint4 *>(residual + t * hidden) + c),
                     1.0f);
        reinterpret_cast<uint4 *>(out + t * hidden)[c] = bk__pack(acc);
    }
}

__global__ void moe_add_residual_kernel(uint4 *out, const uint4 *res, size_t nv)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc[8] = { 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f };
        moe_fma8(acc, out[i], 1.0f);
        moe_fma8(acc, __ldg(&res[i]), 1.0f);
        out[i] = bk__pack(acc);
    }
}

__global__ void moe_copy_kernel(const uint4 *src, uint4 *dst, size_t nv)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __ldg(&src[i]);
}

/* ---------------------------------------------------------------- launchers */

static bk_status moe_launched(const char *what, bk_err *err)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: launch failed: %s", what, cudaGetErrorString(e));
    return BK_OK;
}

/* Enough blocks to fill the GPU for a grid-stride loop over n items. */
static unsigned moe_blocks(size_t n)
{
    size_t b = (n + MOE_THREADS - 1) / MOE_THREADS;
    return b < 1 ? 1u : b > 132 * 16 ? 132u * 16u : (unsigned)b;
}

extern "C" bk_status bk_moe_route(const int32_t *ids, const uint16_t *x, int64_t tokens,
                                  int64_t topk, int64_t hidden, int rank, int world,
                                  int64_t local_experts, int32_t *counts, int32_t *cursor,
                                  int32_t *offsets, int32_t *row_of, uint16_t *xp,
                                  void *stream, bk_err *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t tk = tokens * topk;
    if (hidden % 8 != 0 || tk < 1 || local_experts < 1)
        return BK_FAIL(err, BK_ERR_INPUT, "bk_moe_route: hidden %lld must be a multiple of 8, "
                       "tokens x topk %lld and local experts %lld >= 1", (long long)hidden,
                       (long long)tk, (long long)local_experts);
    cudaError_t e = cudaMemsetAsync(counts, 0, (size_t)local_experts * sizeof(int32_t), s);
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "bk_moe_route: memset: %s", cudaGetErrorString(e));
    moe_count_kernel<<<(unsigned)((tk + MOE_THREADS - 1) / MOE_THREADS), MOE_THREADS, 0, s>>>(
        ids, tk, rank, world, counts);
    moe_scan_kernel<<<1, 1, 0, s>>>(counts, local_experts, offsets, cursor);
    int threads = hidden / 8 < 128 ? 64 : 128;
    moe_fill_kernel<<<(unsigned)tk, threads, 0, s>>>(ids, x, topk, hidden, rank, world, cursor,
                                                     row_of, xp);
    return moe_launched("bk_moe_route", err);
}

extern "C" bk_status bk_moe_silu_mul(const uint16_t *gu, uint16_t *act, int64_t rows,
                                     int64_t inter, void *stream, bk_err *err)
{
    if (rows < 1)
        return BK_OK;
    moe_silu_mul_kernel<<<moe_blocks((size_t)(rows * inter)), MOE_THREADS, 0,
                          (cudaStream_t)stream>>>((const __nv_bfloat16 *)gu,
                                                  (__nv_bfloat16 *)act, rows, inter);
    return moe_launched("bk_moe_silu_mul", err);
}

extern "C" bk_status bk_moe_combine(const uint16_t *y, const int32_t *row_of, const float *w,
                                    const uint16_t *residual, uint16_t *out, int64_t tokens,
                                    int64_t topk, int64_t hidden, void *stream, bk_err *err)
{
    if (hidden % 8 != 0 || topk < 1 || topk > 64 || tokens < 1)
        return BK_FAIL(err, BK_ERR_INPUT, "bk_moe_combine: hidden %lld must be a multiple of 8, "
                       "topk %lld in 1..64, tokens %lld >= 1", (long long)hidden,
                       (long long)topk, (long long)tokens);
    /* Few tokens: split each row over several blocks so that about two blocks per
     * multiprocessor run; never fewer than 64 vectors a block. */
    const int64_t nv = hidden / 8;
    int64_t ys = (MOE_BLOCKS_WANTED + tokens - 1) / tokens;
    ys = ys > nv / 64 ? nv / 64 : ys;
    ys = ys < 1 ? 1 : ys;
    const int64_t per = (nv + ys - 1) / ys;
    const int64_t steps = (per + MOE_THREADS - 1) / MOE_THREADS;
    int64_t threads = (per + steps - 1) / steps;
    threads = (threads + 31) / 32 * 32;
    threads = threads < topk ? (topk + 31) / 32 * 32 : threads;
    dim3 grid((unsigned)tokens, (unsigned)ys);
    moe_combine_kernel<<<grid, (unsigned)threads, 0, (cudaStream_t)stream>>>(
        y, row_of, w, residual, out, topk, hidden, per);
    return moe_launched("bk_moe_combine", err);
}

extern "C" bk_status bk_moe_add_residual(uint16_t *out, const uint16_t *residual, size_t n,
                                         void *stream, bk_err *err)
{
    if (n % 8 != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "bk_moe_add_residual: %zu elements, not a multiple "
                       "of 8", n);
    moe_add_residual_kernel<<<moe_blocks(n / 8), MOE_THREADS, 0, (cudaStream_t)stream>>>(
        reinterpret_cast<uint4 *>(out), reinterpret_cast<const uint4 *>(residual), n / 8);
    return moe_launched("bk_moe_add_residual", err);
}

extern "C" bk_status bk_moe_copy(const void *src, void *dst, size_t bytes, void *stream,
                                 bk_err *err)
{
    if (bytes % 16 != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "bk_moe_copy: %zu bytes, not a multiple of 16", bytes);
    moe_copy_kernel<<<moe_blocks(bytes / 16), MOE_THREADS, 0, (cudaStream_t)stream>>>(
        reinterpret_cast<const uint4 *>(src), reinterpret_cast<uint4 *>(dst), bytes / 16);
    return moe_launched("bk_moe_copy", err);
}
