/* cuda_gate.cu - the host-released gate of cuda_gate.h. */
#include <cuda_runtime.h>

#include "collectives/cuda_gate.h"

/* One thread: spin (sleeping between looks) on the host word until it reaches
 * `want`, or the global timer passes `deadline_ns`. */
__global__ void bk_gate_kernel(const volatile uint32_t *word, uint32_t want,
                               uint64_t bound_ns, uint32_t *timeouts)
{
    uint64_t t0, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        if ((int32_t)(*word - want) >= 0)
            return;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - t0 > bound_ns) {
            atomicAdd_system(timeouts, 1u);
            return;
        }
        __nanosleep(256);
    }
}

extern "C" bk_status bk_cuda_gate_init(bk_cuda_gate *g, bk_err *err)
{
    void *h = NULL, *d = NULL;
    g->host = NULL;
    g->dev = NULL;
    g->epoch = 0;
    cudaError_t e = cudaHostAlloc(&h, 2 * sizeof(uint32_t), cudaHostAllocMapped);
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "gate: cudaHostAlloc: %s", cudaGetErrorString(e));
    ((volatile uint32_t *)h)[0] = 0;
    ((volatile uint32_t *)h)[1] = 0;
    e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
        (void)cudaFreeHost(h);
        return BK_FAIL(err, BK_ERR_SYSTEM, "gate: cudaHostGetDevicePointer: %s",
                       cudaGetErrorString(e));
    }
    g->host = (volatile uint32_t *)h;
    g->dev = (uint32_t *)d;
    return BK_OK;
}

extern "C" void bk_cuda_gate_free(bk_cuda_gate *g)
{
    if (g->host)
        (void)cudaFreeHost((void *)g->host);
    g->host = NULL;
    g->dev = NULL;
}

extern "C" bk_status bk_cuda_gate_close(bk_cuda_gate *g, void *stream, double bound_s,
                                        bk_err *err)
{
    g->epoch++;
    bk_gate_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(g->dev, g->epoch,
                                                      (uint64_t)(bound_s * 1e9), g->dev + 1);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "gate launch: %s", cudaGetErrorString(e));
    return BK_OK;
}

extern "C" void bk_cuda_gate_open(bk_cuda_gate *g)
{
    __atomic_store_n((uint32_t *)g->host, g->epoch, __ATOMIC_RELEASE);
}

extern "C" int bk_cuda_gate_timeouts(const bk_cuda_gate *g)
{
    return (int)__atomic_load_n((const uint32_t *)g->host + 1, __ATOMIC_ACQUIRE);
}
