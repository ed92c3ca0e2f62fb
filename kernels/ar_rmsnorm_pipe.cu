/* ar_rmsnorm_pipe.cu - the persistent, software-pipelined residual + RMSNorm kernel: each
 * block walks rows blockIdx.x, +grid, ... and keeps the next `stages` rows of sum and
 * residual in flight into shared memory with Hopper TMA bulk copies (cp.async.bulk,
 * completing on one mbarrier per stage) while it reduces and stores the current row.
 * Same numerics as the row kernel (kernels/ar_rmsnorm.cu): the shared epilogue. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

#include "kernels/ar_rmsnorm_dev.cuh"
#include "kernels/cuda_variants.h"

#define BK_PIPE_MAX_THREADS 1024
#define BK_PIPE_MAX_STAGES 4
#define BK_PIPE_BAR_BYTES 128       /* the mbarriers' room before the stage buffers */
#define BK_PIPE_AUTO_BYTES (100 << 10) /* automatic stages fill about this much */
#define BK_PIPE_MAX_DEVICES 64

/* ---------------------------------------------------------------- TMA and mbarrier (sm_90) */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BK_PIPE_TMA 1
#endif

__device__ __forceinline__ uint32_t bk__smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

#ifdef BK_PIPE_TMA
/* One arrival (the issuing thread's arrive.expect_tx) completes a phase once
 * the bytes it announced have landed. */
__device__ __forceinline__ void bk__mbar_init(uint64_t *bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bk__smem_addr(bar)) : "memory");
}

/* Make the initialised barriers visible to the async proxy (the copy engine)
 * and, after the __syncthreads that follows, to every thread. */
__device__ __forceinline__ void bk__mbar_init_fence(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Copy both input rows (bytes each) into one stage; the stage's barrier
 * completes its current phase when all 2 x bytes have arrived. */
template <bool STREAM>
__device__ __forceinline__ void bk__stage_fill(uint64_t *bar, void *dst_sum, void *dst_res,
                                               const void *src_sum, const void *src_res,
                                               uint32_t bytes)
{
    const uint32_t b = bk__smem_addr(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b),
                 "r"(2 * bytes)
                 : "memory");
    if (STREAM) {
        uint64_t policy;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     ".L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(bk__smem_addr(dst_sum)),
                     "l"(src_sum), "r"(bytes), "r"(b), "l"(policy)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     ".L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(bk__smem_addr(dst_res)),
                     "l"(src_res), "r"(bytes), "r"(b), "l"(policy)
                     : "memory");
    } else {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1], %2, [%3];" ::"r"(bk__smem_addr(dst_sum)),
                     "l"(src_sum), "r"(bytes), "r"(b)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1], %2, [%3];" ::"r"(bk__smem_addr(dst_res)),
                     "l"(src_res), "r"(bytes), "r"(b)
                     : "memory");
    }
}

/* Wait until the barrier's phase with this parity has completed. */
__device__ __forceinline__ void bk__mbar_wait(uint64_t *bar, uint32_t parity)
{
    const uint32_t b = bk__smem_addr(bar);
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(b), "r"(parity)
                     : "memory");
    } while (!done);
}
#endif /* BK_PIPE_TMA */

/* ---------------------------------------------------------------- kernel */

/* Dynamic shared memory: `stages` mbarriers (in the first BK_PIPE_BAR_BYTES),
 * then per stage the sum row and the residual row (nvec vectors each).
 * Block b owns rows b, b + grid, ...: its it-th row lives in stage
 * it % stages, whose barrier completes phase it / stages for it (parity
 * (it / stages) & 1). Thread 0 issues the copies: rows 0..stages-1 before the
 * loop, and row it + stages into stage it % stages once every thread has read
 * that stage (after the block reduction's barrier). Only rows the block will
 * consume are ever issued, so no copy is in flight when the block exits.
 * MAXT: the launch bound (512 keeps the row kernel's 128-register cap). */
template <int VPT, bool STREAM, int MAXT>
__global__ void __launch_bounds__(MAXT) bk_residual_rmsnorm_pipe_kernel(
    const uint4 *sum, const uint4 *__restrict__ residual, const uint4 *__restrict__ gamma,
    uint4 *residual_out, uint4 *__restrict__ out, int tokens, int hidden, int stages, float eps)
{
#ifdef BK_PIPE_TMA
    extern __shared__ __align__(128) unsigned char bk__pipe_smem[];
    uint64_t *full = reinterpret_cast<uint64_t *>(bk__pipe_smem);
    uint4 *buf = reinterpret_cast<uint4 *>(bk__pipe_smem + BK_PIPE_BAR_BYTES);
    const int nvec = hidden / 8;
    const uint32_t row_bytes = (uint32_t)nvec * 16u;
    const int grid = (int)gridDim.x;
    const int rows = (int)blockIdx.x < tokens ? (tokens - 1 - (int)blockIdx.x) / grid + 1 : 0;
    bk__pdl_wait();
    bk__pdl_launch();

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++)
            bk__mbar_init(&full[s]);
        bk__mbar_init_fence();
        for (int it = 0; it < stages && it < rows; it++) {
            const size_t off = (size_t)((int)blockIdx.x + it * grid) * nvec;
            uint4 *st = buf + (size_t)it * 2 * nvec;
            bk__stage_fill<STREAM>(&full[it], st, st + nvec, sum + off, residual + off,
                                   row_bytes);
        }
    }
    __syncthreads();
    const float rh = bk__inv_hidden(hidden);
    uint4 gv[VPT];
    bk__load_gamma(gv, gamma, nvec);

    for (int it = 0; it < rows; it++) {
        const int s = it % stages;
        const size_t off = (size_t)((int)blockIdx.x + it * grid) * nvec;
        const uint4 *st = buf + (size_t)s * 2 * nvec;
        bk__mbar_wait(&full[s], (uint32_t)(it / stages) & 1u);
        float acc[VPT][8];
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nvec) {
                bk__unpack(acc[k], st[i]);            /* sum first, then residual: */
                bk__unpack_add(acc[k], st[nvec + i]); /* the row kernel's fp32 order */
            } else {
                bk__zero8(acc[k]); /* past the row: 0, for bk__round_sumsq */
            }
        }
        const float inv = rsqrtf(bk__block_sum(bk__round_sumsq(acc), it) * rh + eps);
        /* every thread has read stage s (bk__block_sum's barrier): refill it */
        if (threadIdx.x == 0 && it + stages < rows) {
            const size_t noff = (size_t)((int)blockIdx.x + (it + stages) * grid) * nvec;
            bk__stage_fill<STREAM>(&full[s], (uint4 *)st, (uint4 *)st + nvec, sum + noff,
                                   residual + noff, row_bytes);
        }
        uint4 *ro1 = residual_out, *o1 = out;
        bk__store_norm<VPT, STREAM>(acc, nvec, inv, gv, &ro1, &o1, 1, off);
    }
#else
    /* built for an architecture without TMA: the launcher refuses such devices */
    __trap();
#endif
}

/* ---------------------------------------------------------------- launcher */

typedef void (*bk__pipe_fn)(const uint4 *, const uint4 *, const uint4 *, uint4 *, uint4 *, int,
                            int, int, float);

/* The instantiation for (vectors per thread, hint, threads > 512); NULL when
 * none exists (more than 2 vectors per thread above 512 threads: the 64-register
 * cap of a 1024-thread bound would spill them). */
static bk__pipe_fn bk__pipe_pick(int vpt, int stream_hint, int big)
{
#define P(K, S, M) return bk_residual_rmsnorm_pipe_kernel<K, S, M>
#define BOTH(K, M)        \
    if (stream_hint)      \
        P(K, true, M);    \
    else                  \
        P(K, false, M)
    if (big) {
        switch (vpt) {
        case 1: BOTH(1, 1024);
        case 2: BOTH(2, 1024);
        default: return NULL;
        }
    }
    switch (vpt) {
    case 1: BOTH(1, 512);
    case 2: BOTH(2, 512);
    case 3: BOTH(3, 512);
    case 4: BOTH(4, 512);
    case 5: BOTH(5, 512);
    case 6: BOTH(6, 512);
    case 7: BOTH(7, 512);
    default: BOTH(8, 512);
    }
#undef BOTH
#undef P
}

/* Per device, read once: SM count, compute capability major, the opt-in
 * shared-memory limit per block. 0 = not read yet (racing readers store the
 * same values). */
static int g_pipe_sms[BK_PIPE_MAX_DEVICES], g_pipe_major[BK_PIPE_MAX_DEVICES],
    g_pipe_smem[BK_PIPE_MAX_DEVICES];

static bk_status bk__pipe_device(int *dev, int *sms, int *major, int *smem_optin, bk_err *err)
{
    cudaError_t e = cudaGetDevice(dev);
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "residual_rmsnorm pipe: cudaGetDevice: %s",
                       cudaGetErrorString(e));
    if (*dev < 0 || *dev >= BK_PIPE_MAX_DEVICES)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "residual_rmsnorm pipe: device %d (at most %d)",
                       *dev, BK_PIPE_MAX_DEVICES);
    *sms = __atomic_load_n(&g_pipe_sms[*dev], __ATOMIC_ACQUIRE);
    if (*sms == 0) {
        int v[3];
        const cudaDeviceAttr a[3] = {cudaDevAttrComputeCapabilityMajor,
                                     cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                     cudaDevAttrMultiProcessorCount};
        for (int i = 0; i < 3; i++)
            if ((e = cudaDeviceGetAttribute(&v[i], a[i], *dev)) != cudaSuccess)
                return BK_FAIL(err, BK_ERR_SYSTEM, "residual_rmsnorm pipe: "
                               "cudaDeviceGetAttribute(%d): %s", (int)a[i],
                               cudaGetErrorString(e));
        __atomic_store_n(&g_pipe_major[*dev], v[0], __ATOMIC_RELAXED);
        __atomic_store_n(&g_pipe_smem[*dev], v[1], __ATOMIC_RELAXED);
        __atomic_store_n(&g_pipe_sms[*dev], v[2], __ATOMIC_RELEASE);
        *sms = v[2];
    }
    *major = __atomic_load_n(&g_pipe_major[*dev], __ATOMIC_RELAXED);
    *smem_optin = __atomic_load_n(&g_pipe_smem[*dev], __ATOMIC_RELAXED);
    return BK_OK;
}

/* Raise fn's dynamic shared-memory limit on this device to all it may take
 * (the opt-in limit less its static shared memory), once per (kernel, device):
 * the value is fixed, so concurrent first calls agree. */
static bk_status bk__pipe_smem_limit(bk__pipe_fn fn, int dev, int smem_optin, int *dyn_max,
                                     bk_err *err)
{
    enum { SLOTS = 64 };
    static bk__pipe_fn fns[SLOTS];
    static int done[SLOTS][BK_PIPE_MAX_DEVICES], limit[SLOTS][BK_PIPE_MAX_DEVICES];
    static int nfns;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    bk_status st = BK_OK;
    int slot = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nfns; i++)
        if (fns[i] == fn)
            slot = i;
    if (slot < 0 && nfns < SLOTS) {
        slot = nfns++;
        fns[slot] = fn;
    }
    if (slot < 0) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "residual_rmsnorm pipe: more than %d kernels", SLOTS);
    } else if (!done[slot][dev]) {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)fn);
        const int want = smem_optin - (int)fa.sharedSizeBytes;
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     want);
        if (e != cudaSuccess) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "residual_rmsnorm pipe: raising the shared-memory "
                         "limit to %d bytes: %s", want, cudaGetErrorString(e));
        } else {
            limit[slot][dev] = want;
            done[slot][dev] = 1;
        }
    }
    if (st == BK_OK)
        *dyn_max = limit[slot][dev];
    pthread_mutex_unlock(&mu);
    return st;
}

static int bk__misaligned(const void *p) { return ((uintptr_t)p & 15u) != 0; }

bk_status bk__rmsnorm_pipe(const void *sum, const void *residual, const void *gamma,
                           void *residual_out, void *out, int64_t tokens, int64_t hidden,
                           float eps, const bk_rmsnorm_cfg *cfg, cudaStream_t stream,
                           bk_err *err)
{
    int vpt = 0, threads = 0, dev = 0, sms = 0, major = 0, smem_optin = 0, dyn_max = 0;
    int per_sm = cfg->blocks_per_sm;
    if (bk__misaligned(sum) || bk__misaligned(residual) || bk__misaligned(gamma) ||
        bk__misaligned(residual_out) || bk__misaligned(out))
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm pipe: every pointer must be 16-byte "
                       "aligned (sum %p residual %p gamma %p residual_out %p out %p)", sum,
                       residual, gamma, residual_out, out);
    if (cfg->stages < 0 || cfg->stages > BK_PIPE_MAX_STAGES)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm pipe: %d stages (1..%d, 0 = auto)",
                       cfg->stages, BK_PIPE_MAX_STAGES);
    if (per_sm < 0 || per_sm > 8)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm pipe: %d blocks per SM (1..8, "
                       "0 = auto)", per_sm);
    bk_status st = bk__rmsnorm_shape(cfg, hidden, &vpt, &threads, err);
    if (st != BK_OK)
        return st;
    const bk__pipe_fn fn = bk__pipe_pick(vpt, cfg->stream_hint, threads > BK_MAX_ROW_THREADS);
    if (fn == NULL)
        return BK_FAIL(err, BK_ERR_INTERNAL, "residual_rmsnorm pipe: no instance for %d "
                       "threads x %d vectors", threads, vpt);
    st = bk__pipe_device(&dev, &sms, &major, &smem_optin, err);
    if (st != BK_OK)
        return st;
    if (major < 9)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "residual_rmsnorm pipe: needs TMA bulk copies "
                       "(compute capability 9.0 or later), device %d is %d.x", dev, major);
    const size_t stage_bytes = 2 * (size_t)hidden * 2; /* sum row + residual row */
    int stages = cfg->stages;
    if (stages == 0) {
        stages = (int)(BK_PIPE_AUTO_BYTES / stage_bytes);
        stages = stages < 2 ? 2 : stages > BK_PIPE_MAX_STAGES ? BK_PIPE_MAX_STAGES : stages;
    }
    const size_t smem = BK_PIPE_BAR_BYTES + (size_t)stages * stage_bytes;
    if ((st = bk__pipe_smem_limit(fn, dev, smem_optin, &dyn_max, err)) != BK_OK)
        return st;
    if (smem > (size_t)dyn_max)
        return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm pipe: hidden %lld at %d stages "
                       "needs %zu bytes of shared memory per block, device %d allows %d",
                       (long long)hidden, stages, smem, dev, dyn_max);
    if (per_sm == 0) {
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem);
        if (e != cudaSuccess)
            return BK_FAIL(err, BK_ERR_SYSTEM, "residual_rmsnorm pipe: occupancy: %s",
                           cudaGetErrorString(e));
        if (per_sm < 1)
            return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm pipe: %d threads with %zu bytes "
                           "of shared memory fit no block on an SM", threads, smem);
    }
    const int64_t cap = (int64_t)per_sm * sms;
    const int grid = (int)(tokens < cap ? tokens : cap);
    return bk__launch("bk_residual_rmsnorm_pipe_kernel", fn, (unsigned)grid, (unsigned)threads,
                      smem, stream, cfg->pdl, err, (const uint4 *)sum, (const uint4 *)residual,
                      (const uint4 *)gamma, (uint4 *)residual_out, (uint4 *)out, (int)tokens,
                      (int)hidden, stages, eps);
}
