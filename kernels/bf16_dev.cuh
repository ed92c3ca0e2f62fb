/* bf16_dev.cuh - 16-byte bf16 vectors (8 values) on the device: unpack-and-add into fp32
 * and pack with round-to-nearest-even. Shared by the .cu kernels; include from .cu files
 * only. */
#ifndef BK_BF16_DEV_CUH
#define BK_BF16_DEV_CUH

#include <cuda_bf16.h>
#include <stdint.h>

/* f[0..7] = the 8 bf16 values of v (exact in fp32). A sum that starts here, at its first
 * term, saves the 8 adds of starting from 0 (0 + x is x for every x but -0, so the
 * compiler keeps them). */
__device__ __forceinline__ void bk__unpack(float *f, uint4 v)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 x = __bfloat1622float2(h[j]);
        f[2 * j] = x.x;
        f[2 * j + 1] = x.y;
    }
}

/* acc[0..7] += the 8 bf16 values of v, in order. */
__device__ __forceinline__ void bk__unpack_add(float *acc, uint4 v)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += f.x;
        acc[2 * j + 1] += f.y;
    }
}

/* The 8 floats rounded to bf16 (nearest, ties to even) in one vector. */
__device__ __forceinline__ uint4 bk__pack(const float *f)
{
    uint4 v;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
    for (int j = 0; j < 4; j++)
        h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
    return v;
}

#endif
