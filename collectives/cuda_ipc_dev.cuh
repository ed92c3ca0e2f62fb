/* cuda_ipc_dev.cuh - device side of the IPC lane: system-scope release/acquire flags and
 * the bounded per-block barrier that every IPC kernel (and the lane barrier) uses. */
#ifndef BK_CUDA_IPC_DEV_CUH
#define BK_CUDA_IPC_DEV_CUH

#include <stdint.h>

#include "collectives/cuda_ipc.h"

__device__ __forceinline__ uint64_t bk__globaltimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void bk__st_release_sys(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t bk__ld_acquire_sys(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* The epoch this block's slot had before the kernel's first barrier. Every
 * IPC kernel runs the same grid and passes the same number of barriers on
 * every slot, so all blocks of all ranks read the same value here. */
__device__ __forceinline__ uint32_t bk_ipc_epoch(const bk_ipc_dev &v, int slot)
{
    return *(volatile uint32_t *)&v.epochs[slot];
}

/* Barrier of this block with the same block (slot) of every peer. Writes
 * before it (by any thread of the block, to any rank's memory) are visible
 * to peers' reads after it. Each waiting thread (one per peer) gives up
 * after v.timeout_ns and records the fault, or earlier when the fault word
 * holds anything (an earlier wait's time-out, or the host's END: the arm's
 * time ran out, answered ENDED with the peer waited on); the kernel then
 * runs on so the stream drains, and the host reports it. */
__device__ __forceinline__ void bk_ipc_block_barrier(const bk_ipc_dev &v, int slot)
{
    __shared__ uint32_t epoch;
    __syncthreads();
    if (threadIdx.x == 0) {
        epoch = v.epochs[slot] + 1;
        v.epochs[slot] = epoch;
    }
    __syncthreads();
    const int t = threadIdx.x;
    if (t < v.world) {
        const uint32_t e = epoch;
        __threadfence_system();
        bk__st_release_sys(v.flags[t] + slot * BK_IPC_MAX_WORLD + v.rank, e);
        const uint32_t *mine = v.flags[v.rank] + slot * BK_IPC_MAX_WORLD + t;
        uint64_t start = 0;
        uint32_t spins = 0;
        while ((int32_t)(bk__ld_acquire_sys(mine) - e) < 0) {
            if ((++spins & 1023u) != 0)
                continue;
            const uint64_t now = bk__globaltimer();
            /* A wait already this long, and an earlier one has timed out (the host has
             * not read its fault yet): the lane is broken, so this one does not wait its
             * own time-out too (a drain of 64 queued steps would otherwise take 64 of
             * them). Or the host asks every wait to give up (END: its wait reached the
             * arm's end, and the engine must report before its agent's time-out): the
             * waits that see it name the peer they wait on. Read every 1024 spins of a wait,
             * never on a barrier's fast path: the fault word is host memory. */
            const int f = v.fault[0];
            if (f != BK_IPC_FAULT_NONE) {
                if (f == BK_IPC_FAULT_END)
                    v.fault[0] = BK_IPC_FAULT_WORD(BK_IPC_FAULT_ENDED, t, slot);
                break;
            }
            if (start == 0) {
                start = now;
            } else if (now - start > v.timeout_ns) {
                v.fault[0] = BK_IPC_FAULT_WORD(BK_IPC_FAULT_TIMEOUT, t, slot);
                break;
            }
        }
    }
    __syncthreads();
}

#endif
