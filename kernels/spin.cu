/* spin.cu - a kernel that keeps the stream busy for a given time: the device-side wait of
 * the `slowed` diagnostic on the cuda backend (kernels/diagnostic.c), so the delay sits on
 * the stream between the base's kernels and is captured into a CUDA graph with them. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda_variants.h"

__device__ __forceinline__ uint64_t bk__globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One thread reads the GPU's nanosecond clock until ns have passed. */
__global__ void bk_spin_kernel(uint64_t ns)
{
    const uint64_t t0 = bk__globaltimer();
    while (bk__globaltimer() - t0 < ns) {
    }
}

extern "C" bk_status bk_cuda_spin_ns(uint64_t ns, void *stream, bk_err *err)
{
    bk_spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ns);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "bk_spin_kernel launch: %s", cudaGetErrorString(e));
    return BK_OK;
}
