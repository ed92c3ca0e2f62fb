/* pdl_writer.cu - the kernel before the one under test in test_rmsnorm_cuda's test_pdl and
 * test_cuda_ipc's test_pdl_world1/2 (pdl_writer.h): it lets the next kernel on the stream be
 * scheduled at once (griddepcontrol.launch_dependents first thing, in every block), spins ns
 * nanoseconds of the GPU clock, and only then copies its sources over the destinations. A
 * kernel launched after it with programmatic dependent launch that loads an input before its
 * griddepcontrol.wait reads the destination's old contents. */
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ar_rmsnorm_dev.cuh"
#include "pdl_writer.h"

typedef struct pdl_copies {
    const uint4 *src[3];
    uint4 *dst[3];
    size_t nvec[3];
} pdl_copies;

__global__ void pdl_writer_kernel(pdl_copies c, uint64_t ns)
{
    bk__pdl_launch();
    if (threadIdx.x == 0) {
        uint64_t t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        while (t - t0 < ns);
    }
    __syncthreads();
    const size_t step = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < 3; k++)
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < c.nvec[k]; i += step)
            c.dst[k][i] = c.src[k][i];
}

int bk_test_pdl_writer(const void *const src[3], void *const dst[3],
                                  const size_t bytes[3], uint64_t ns, void *stream)
{
    pdl_copies c;
    for (int k = 0; k < 3; k++) {
        c.src[k] = (const uint4 *)src[k];
        c.dst[k] = (uint4 *)dst[k];
        c.nvec[k] = bytes[k] / 16;
    }
    pdl_writer_kernel<<<8, 256, 0, (cudaStream_t)stream>>>(c, ns);
    return (int)cudaGetLastError();
}
