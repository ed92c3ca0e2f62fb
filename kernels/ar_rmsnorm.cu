/* ar_rmsnorm.cu - allreduce + residual + RMSNorm on GPUs: the incumbent's residual+RMSNorm
 * epilogue kernel, the one-shot and two-shot fused kernels over CUDA IPC peer memory, and
 * the copy kernel the benchmarks measure bandwidth against. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>

#include "collectives/cuda_ipc_dev.cuh"
#include "kernels/ar_rmsnorm_dev.cuh"
#include "kernels/cuda_variants.h"

/* ---------------------------------------------------------------- device helpers (IPC) */

/* acc = every rank's row at vector offset off of its payload half (rank
 * order 0..world-1, two ranks per round trip), then the residual row, summed
 * from the first term on. */
template <int VPT>
__device__ __forceinline__ void bk__add_peers(float (&acc)[VPT][8], const bk_ipc_dev &v,
                                              size_t base, size_t off,
                                              const uint4 *__restrict__ residual, int nvec)
{
#define BK_PEER(p) ((const uint4 *)((const char *)v.data[p] + base) + off)
    if (v.world == 1) { /* residual via L2 too: harmless */
        const uint4 *const rows[2] = {BK_PEER(0), residual + off};
        bk__add_rows<VPT, 2, true, false, true>(acc, rows, nvec);
        return;
    }
    {
        const uint4 *const rows[2] = {BK_PEER(0), BK_PEER(1)};
        bk__add_rows<VPT, 2, true, false, true>(acc, rows, nvec);
    }
    int p = 2;
    for (; p + 1 < v.world; p += 2) {
        const uint4 *const rows[2] = {BK_PEER(p), BK_PEER(p + 1)};
        bk__add_rows<VPT, 2, true>(acc, rows, nvec);
    }
    if (p < v.world) {
        const uint4 *const rows[2] = {BK_PEER(p), residual + off};
        bk__add_rows<VPT, 2, true>(acc, rows, nvec);
    } else {
        const uint4 *const rows[1] = {residual + off};
        bk__add_rows<VPT, 1, false>(acc, rows, nvec);
    }
#undef BK_PEER
}

__device__ __forceinline__ void bk__copy_row(uint4 *dst, const uint4 *src, int nvec, bool cg)
{
    for (int i = threadIdx.x; i < nvec; i += blockDim.x)
        dst[i] = cg ? __ldcg(src + i) : src[i];
}

/* ---------------------------------------------------------------- kernels */

/* One block per row (grid = tokens): s = sum + residual, then the epilogue.
 * STREAM: evict-first loads and stores (large shapes that never fit in L2). */
template <int VPT, bool STREAM>
__global__ void __launch_bounds__(BK_MAX_ROW_THREADS) bk_residual_rmsnorm_kernel(
    const uint4 *sum, const uint4 *__restrict__ residual, const uint4 *__restrict__ gamma,
    uint4 *residual_out, uint4 *__restrict__ out, int hidden, float eps, int split)
{
    (void)split; /* one block per row (bk__check_split) */
    const int nvec = hidden / 8;
    const float rh = bk__inv_hidden(hidden);
    bk__pdl_wait();
    bk__pdl_launch();
    uint4 gv[VPT];
    bk__load_gamma(gv, gamma, nvec);
    const size_t off = (size_t)blockIdx.x * nvec;
    float acc[VPT][8];
    const uint4 *const rows[2] = {sum + off, residual + off};
    bk__add_rows<VPT, 2, false, STREAM, true>(acc, rows, nvec);
    uint4 *ro1 = residual_out, *o1 = out;
    bk__epilogue<VPT, STREAM>(acc, nvec, rh, gv, eps, &ro1, &o1, 1, off, 0);
}

/* LEAN: `split` blocks per row (grid = tokens x split; cfg->split). Loads as the row kernel (all of a
 * row's loads before the first use), then each vector's s = sum + residual is
 * rounded to bf16, stored as residual_out at once and kept packed (4 registers
 * a vector, not 8 floats). EARLY: gamma is loaded with the row (its latency
 * hidden behind the row's, 4 more registers a vector: small shapes, where one
 * block's latency is the time); else after the reduction (fewer registers, more
 * blocks per SM). The arithmetic and its order are the row kernel's: the same
 * bits. */
template <int VPT, bool STREAM, bool EARLY, int MAXT, int MINB, bool SPLIT = false>
__global__ void __launch_bounds__(MAXT, MINB) bk_residual_rmsnorm_lean_kernel(
    const uint4 *sum, const uint4 *__restrict__ residual, const uint4 *__restrict__ gamma,
    uint4 *residual_out, uint4 *__restrict__ out, int hidden, float eps, int split)
{
    const int nvec = hidden / 8;
    /* SPLIT: `split` (a power of two) blocks per row, this block's share of the row's
     * vectors [lo, hi); else the whole row, and the code is the one-block kernel's (a
     * runtime split there cost 3-8 registers and 0.2-0.4 us at small shapes, H200) */
    const int sh = SPLIT ? 31 - __clz(split) : 0;
    const int part = SPLIT ? (int)(blockIdx.x & (unsigned)(split - 1)) : 0;
    const int lo = SPLIT ? (part * nvec) >> sh : 0;
    const int hi = SPLIT ? ((part + 1) * nvec) >> sh : nvec;
    const size_t off = (size_t)(SPLIT ? blockIdx.x >> sh : blockIdx.x) * nvec;
#define BK_MINE(i) (SPLIT ? (i) >= lo && (i) < hi : (i) < nvec) /* this block stores i */
    const float rh = bk__inv_hidden(hidden);
    uint4 r[VPT], gv[VPT]; /* gv: EARLY only */
    float ss = 0.f;
    bk__pdl_wait();
    bk__pdl_launch();
    {
        uint4 a[VPT], b[VPT];
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            const size_t at = off + (i < nvec ? i : 0);
            a[k] = STREAM ? __ldcs(sum + at) : sum[at];
            b[k] = STREAM ? __ldcs(residual + at) : residual[at];
            if (EARLY)
                gv[k] = __ldg(gamma + (BK_MINE(i) ? i : lo));
        }
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < nvec) {
                float f[8], q[8];
                bk__unpack(f, a[k]);
                bk__unpack_add(f, b[k]);
                r[k] = bk__pack(f);
                bk__unpack(q, r[k]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    ss += q[j] * q[j];
                if (BK_MINE(i))
                    bk__st<STREAM>(residual_out + off + i, r[k]);
            }
        }
    }
    const float inv = rsqrtf(bk__block_sum(ss, 0) * rh + eps);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        const int i = threadIdx.x + k * blockDim.x;
        if (BK_MINE(i)) {
            float q[8], g[8];
            bk__unpack(q, r[k]);
            bk__unpack(g, EARLY ? gv[k] : __ldg(gamma + i));
#pragma unroll
            for (int j = 0; j < 8; j++)
                g[j] = q[j] * inv * g[j];
            bk__st<STREAM>(out + off + i, bk__pack(g));
        }
    }
}

#undef BK_MINE

/* One-shot: copy our rows into peer memory (half chosen by the epoch's
 * parity, so a peer still reading the last call's half is never
 * overwritten), barrier, every rank reduces every row in rank order. */
template <int VPT>
__global__ void __launch_bounds__(BK_MAX_ROW_THREADS) bk_oneshot_kernel(
    bk_ipc_dev v, const uint4 *__restrict__ x, const uint4 *__restrict__ residual,
    const uint4 *__restrict__ gamma, uint4 *__restrict__ residual_out, uint4 *__restrict__ out,
    int tokens, int hidden, size_t half, float eps)
{
    const int nvec = hidden / 8;
    const float rh = bk__inv_hidden(hidden);
    bk__pdl_wait(); /* before the epoch and every load: g_pdl */
    bk__pdl_launch();
    const size_t base = (bk_ipc_epoch(v, blockIdx.x) & 1u) ? half : 0;
    uint4 *mine = (uint4 *)((char *)v.data[v.rank] + base);
    uint4 gv[VPT];
    bk__load_gamma(gv, gamma, nvec);
    for (int row = blockIdx.x; row < tokens; row += gridDim.x)
        bk__copy_row(mine + (size_t)row * nvec, x + (size_t)row * nvec, nvec, false);
    bk_ipc_block_barrier(v, blockIdx.x);
    for (int row = blockIdx.x, call = 0; row < tokens; row += gridDim.x, call++) {
        const size_t off = (size_t)row * nvec;
        float acc[VPT][8];
        bk__add_peers(acc, v, base, off, residual, nvec);
        uint4 *ro1 = residual_out, *o1 = out;
        bk__epilogue(acc, nvec, rh, gv, eps, &ro1, &o1, 1, off, call);
    }
}

/* Two-shot: rank r owns rows [r*seg, (r+1)*seg). Block b handles the rows
 * whose index inside their segment is b mod grid, in every phase, so its
 * barriers with the peers' block b cover exactly the rows it touches.
 * Peer memory half: [input rows][residual_out rows][out rows]. */
template <int VPT>
__global__ void __launch_bounds__(BK_MAX_ROW_THREADS) bk_twoshot_kernel(
    bk_ipc_dev v, const uint4 *__restrict__ x, const uint4 *__restrict__ residual,
    const uint4 *__restrict__ gamma, uint4 *__restrict__ residual_out, uint4 *__restrict__ out,
    int tokens, int hidden, size_t half, float eps)
{
    const int nvec = hidden / 8;
    const size_t plane = (size_t)tokens * nvec; /* vectors of one [tokens x hidden] */
    bk__pdl_wait(); /* before the epoch and every load: g_pdl */
    bk__pdl_launch();
    const size_t base = (bk_ipc_epoch(v, blockIdx.x) & 1u) ? half : 0;
    const int seg = (tokens + v.world - 1) / v.world;
    const float rh = bk__inv_hidden(hidden);
    uint4 *mine = (uint4 *)((char *)v.data[v.rank] + base);
    uint4 gv[VPT];
    bk__load_gamma(gv, gamma, nvec);
    for (int s = 0; s < v.world; s++)
        for (int i = blockIdx.x; i < seg && s * seg + i < tokens; i += gridDim.x) {
            const size_t off = (size_t)(s * seg + i) * nvec;
            bk__copy_row(mine + off, x + off, nvec, false);
        }
    /* Destinations of our rows: our outputs, then every peer's result planes. */
    uint4 *dro[BK_IPC_MAX_WORLD], *dout[BK_IPC_MAX_WORLD];
    for (int p = 0, d = 1; p < v.world; p++) {
        uint4 *peer = (uint4 *)((char *)v.data[p] + base);
        if (p == v.rank) {
            dro[0] = residual_out;
            dout[0] = out;
        } else {
            dro[d] = peer + plane;
            dout[d++] = peer + 2 * plane;
        }
    }
    bk_ipc_block_barrier(v, blockIdx.x);
    for (int i = blockIdx.x, call = 0; i < seg && v.rank * seg + i < tokens;
         i += gridDim.x, call++) {
        const size_t off = (size_t)(v.rank * seg + i) * nvec;
        float acc[VPT][8];
        bk__add_peers(acc, v, base, off, residual, nvec);
        bk__epilogue(acc, nvec, rh, gv, eps, dro, dout, v.world, off, call);
    }
    bk_ipc_block_barrier(v, blockIdx.x);
    for (int s = 0; s < v.world; s++) {
        if (s == v.rank)
            continue;
        for (int i = blockIdx.x; i < seg && s * seg + i < tokens; i += gridDim.x) {
            const size_t off = (size_t)(s * seg + i) * nvec;
            bk__copy_row(residual_out + off, mine + plane + off, nvec, true);
            bk__copy_row(out + off, mine + 2 * plane + off, nvec, true);
        }
    }
}

/* Each block copies one contiguous chunk of 4 x blockDim vectors; a thread's
 * four loads are all in flight before its stores. */
__global__ void bk_copy_kernel_impl(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                    size_t n)
{
    const size_t base = (size_t)blockIdx.x * blockDim.x * 4 + threadIdx.x;
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const size_t i = base + (size_t)k * blockDim.x;
        if (i < n)
            v[k] = src[i];
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const size_t i = base + (size_t)k * blockDim.x;
        if (i < n)
            dst[i] = v[k];
    }
}

/* ---------------------------------------------------------------- launchers */

/* Programmatic dependent launch of the default rule and the IPC kernels (bk_cuda_pdl_set).
 * The IPC kernels, so launched, may each be scheduled while the kernel before it on the
 * stream finishes, and wait for it (bk__pdl_wait) before they touch their epoch, the peer
 * memory or any input. */
static int g_pdl = 1;

extern "C" void bk_cuda_pdl_set(int on)
{
    g_pdl = on != 0;
}

extern "C" int bk_cuda_pdl(void)
{
    return g_pdl;
}

/* Programmatic dependent launch (cfg->pdl) in the default rule. H200, bench_rmsnorm's
 * alternated no-pdl and pdl columns (docs/bench/cuda.md, 2026-12-04): 0.3-0.5 us less a call
 * at 1-255 tokens and 0.2-0.6 us less from 512, but more at some shapes of 256-448 tokens (up
 * to 13% at hidden 5120-8192, 25% at 10240-12288), where the 512-thread launch (above hidden
 * 4096) fills about 0.55-0.9 of one wave of resident blocks (4 an SM up to hidden 6144, 3 up
 * to 12288, 2 above: waves of 528 / 396 / 264 rows on 132 SMs). Off there: hidden 4097-6144
 * at 272-463 tokens (measured slower at 5120 x 288-416 and 6144 x 288-448, faster at 256 and
 * 480), 6145-8192 at 256-351 (slower at 256-320, a tie or faster at 352), 8193-12288 at
 * 256-383 (slower at 10240 and 12288 x 256-352, a tie at 384). Hidden 4096 and 16384 gained
 * everywhere. Left on although 0.1-0.15 us slower: 12288 x 192-224 (10240 there: a tie and a
 * gain; on the H100 0.13-0.37 us slower at 12288 x 152-208, thirty-third session). Off also at
 * 15368-16384 x 160-255 (bk__rmsnorm_wide_band), for the launch the rule makes there.
 * Those bands were measured where the wave is the H200 table's (W0 rows: 528, 396, 396). On a
 * device whose wave W (occ: sms x mid) differs, the band moves with it: off from
 * max(256, 272 W / 528) to hi W / W0. H200, 2026-12-05 (bench_rmsnorm --sweep lean --each,
 * hidden sizes only the device's counts reach): at 9216 (W 528, 4 blocks an SM of 384
 * threads) pdl cost 2.0 / 0.9 us at 384 / 448 tokens (10.39 / 10.87 against 8.37 / 9.94),
 * 1.7 at 320, a tie at 512, and saved 0.4 at 256; at 4608 (W 660) it cost 0.3 at 512, 0.05
 * at 576, 0.6 at 384-448, and saved 0.3 at 320 and 0.2 at 640. Where W = W0 (every hidden
 * of the H200 table; no device) the bands are the ones above. */
/* 15368-16384 x 160-255 tokens: 1024 threads without gamma early, hints or programmatic
 * dependent launch (H100, thirty-third session, docs/bench/cuda.md: with pdl that launch lost
 * 0.05-0.36 us at 16384 x 160-208; without it, old/new/new/old, 0.81-1.07 us less at 15368 x
 * 160-255 and 0.96-1.25 at 16384, 159 and 256 unchanged). On the H200 too (thirty-fourth
 * session, old/new/new/old against bfd2247): 0.81-0.89 us less at 15368 x 160-255 and
 * 0.88-1.01 at 16384, 159 and 256 unchanged, although there pdl measured faster with the
 * older launch (gamma early, hints) at every 16384 shape. */
static int bk__rmsnorm_wide_band(int64_t tokens, int64_t hidden)
{
    return hidden >= 15368 && tokens >= 160 && tokens < 256;
}

/* The rows one wave of the 512-thread launch holds on this device, or `table` (the H200
 * table's wave) where the counts are not known. */
static int64_t bk__rmsnorm_wave_or(const bk_rmsnorm_occ *occ, int64_t table)
{
    return occ->sms > 0 && occ->mid > 0 ? (int64_t)occ->sms * occ->mid : table;
}

static int bk__rmsnorm_pdl(int64_t tokens, int64_t hidden, const bk_rmsnorm_occ *occ)
{
    if (bk__rmsnorm_wide_band(tokens, hidden))
        return 0;
    if (hidden > 11264 && hidden <= 12288) {
        /* past half the 512-thread launch's wave to 224 x W / 396 tokens: the 1024-thread
         * launch with gamma early, 2 blocks an SM, its rows 0.75-0.85 of its wave (H100,
         * thirty-sixth session: pdl cost 0.09-0.32 us at 11776-12288 x 199-224; H200: 0.1-0.15
         * at 12288 x 192-224 with the launch of that time). Before and after on the H100
         * (thirty-seventh, old/new/new/old against a11106d's rule): 0.17-0.32 us less at 12288
         * x 199-216, 0.12-0.20 at 11776 x 199-216, 0.01-0.12 at 11520; 198, 225 and 11264
         * within 0.02 */
        const int64_t w = bk__rmsnorm_wave_or(occ, 396);
        if (2 * tokens > w && 396 * tokens <= 224 * w)
            return 0;
    }
    if (hidden <= 4096 || hidden > 12288 || tokens < 256 || tokens >= 1024)
        return 1; /* the bands below are the 512-thread launch's, at 256-1023 tokens */
    const int64_t hi = hidden <= 6144 ? 464 : hidden <= 8192 ? 352 : 384;
    const int64_t w0 = hidden <= 6144 ? 528 : 396;
    const int64_t w = bk__rmsnorm_wave_or(occ, w0);
    /* tokens < 272 W / 528 and tokens >= hi W / W0, in integers */
    return 528 * tokens < 272 * w || w0 * tokens >= hi * w;
}

/* Threads per row of the IPC kernels: 256, or 512 above hidden 8192 so that
 * no thread holds more than 4 vectors (8 would spill under the 128-register
 * cap). */
static int bk__default_threads(int64_t hidden)
{
    return hidden > 8192 ? 2 * BK_ROW_THREADS : BK_ROW_THREADS;
}

/* The blocks per SM the default rule's launches at 256-1023 tokens above hidden 4096 fit on an
 * H200 (132 SMs), measured by bench_rmsnorm --sweep lean --each (bk_rmsnorm_cfg_blocks_per_sm,
 * 2026-12-04): the fallback where no device answers (the rule's CPU tests run on it), and
 * what test_rule_waves checks the compiled kernels against. A row's block has threads =
 * vectors / vectors per thread rounded up to a warp (bk__row_config), and more threads never
 * fit more blocks, so a count measured at two hiddens of one kernel (one count of vectors a thread)
 * holds between them, and one measured at a thread count holds wherever the block has it.
 * mid, 2 vectors with gamma early: 4 at 320 and 384 threads (5120, 6144), so hidden
 * 4616-6144; 3 at 448 and 512 (7168, 8192), so 6664-8192; without gamma early, 3 vectors:
 * 3 at 448 and 512 (10240, 12288), so 9992-12288; 4 vectors: 2 at 512 (16384), so
 * 15368-16384. l512, 2 vectors: 6 at 320 threads (5120: 4616-5120), 5 at 384 (6144:
 * 5640-6144), 4 at 448 and 512 (6664-8192). l256: 3 vectors, 6 at 224 and 256 threads (5120,
 * 6144: 4616-6144); 4 vectors, 5 at 224 and 256 (7168, 8192: 6152-8192). 0 elsewhere. */
extern "C" void bk_rmsnorm_occ_h200(int64_t hidden, bk_rmsnorm_occ *occ)
{
    occ->sms = 132;
    occ->mid = hidden >= 4616 && hidden <= 6144                                    ? 4
               : (hidden >= 6664 && hidden <= 8192) || (hidden >= 9992 && hidden <= 12288) ? 3
               : hidden >= 15368 && hidden <= 16384                                ? 2
                                                                                   : 0;
    occ->l512 = hidden >= 4616 && hidden <= 5120   ? 6
                : hidden >= 5640 && hidden <= 6144 ? 5
                : hidden >= 6664 && hidden <= 8192 ? 4
                                                   : 0;
    occ->l256 = hidden >= 4616 && hidden <= 6144 ? 6 : hidden >= 6152 && hidden <= 8192 ? 5 : 0;
}

/* The residual + RMSNorm kernel's launch, from bench_rmsnorm --sweep on an H200
 * (cold inputs, docs/bench/cuda.md, hidden 4096-8192 x tokens 1-16384; the lean sweep of
 * 2026-12-02 22:21 UTC, hints from the full sweep of 15:25 UTC): the lean row kernel with
 * gamma early. Hidden <= 4096: 512 threads per row (one vector each; the row kernel at
 * 1024-4096 tokens, where it measured best). Above 4096: 512 threads of 2 vectors below
 * 64 tokens, at 80-192 from hidden 6144 (without hints; H100, thirty-second session) and
 * from 256 tokens up to one wave of them (occ->mid blocks an SM x occ->sms;
 * to 1023 where the wave is not known), else 1024 of one
 * (below 64 tokens 2 vectors a thread beat 1; from 1024 tokens 1024 threads beat 512 by
 * 0.5-1.6% at hidden 6144-8192; past the wave, see below). Above 8192, where 512 threads
 * would hold more than 2 vectors, 1024 threads, but 512 without gamma early from 256 tokens
 * to the wave (at hidden 15368-16384 also 352-1023), and at 10760-12288 from 144 tokens to
 * half the wave; to 12288 at 160-192 tokens (where not that), 1024 without gamma early or
 * hints, and so at 15368-16384 x 160-255, there without programmatic dependent launch
 * either. Up to hidden 8192, past the wave, 512 or
 * 256 threads without gamma early or hints where the rows fill one wave of them to 15/16 or
 * more (occ->l512, occ->l256). The waves come from the device the call runs on
 * (bk_rmsnorm_occ_device: its SMs and the compiled kernels' occupancy), so they move with
 * the SM count and cover every hidden size; without a device, the H200's. Evict-first hints from
 * 64 tokens (from 16 at hidden >= 8192), but not at 80-192 x 6144-8192, 160-192 x
 * 8200-12288 where the 1024-thread launch serves them, on rows split over blocks at 16 tokens
 * or fewer (bk__rmsnorm_split), nor with the one-wave launches of 512 or 256 threads. The
 * pipelined kernel (BK_RMSNORM_PIPE) measured 2-9% slower than the lean one at every shape
 * it served and is not picked. Programmatic dependent launch: bk__rmsnorm_pdl. This is the
 * one place to switch. */
/* The fewest tokens at which the rule reads the device's wave: the 512-thread launch to half
 * the wave at hidden 10760-12288 starts here (below in bk__rmsnorm_launch), and
 * bk_rmsnorm_default_cfg asks the device from here, so that the rule sees the wave it reads. */
static const int64_t bk__half_wave_from = 144;

static void bk__rmsnorm_launch(int64_t tokens, int64_t hidden, const bk_rmsnorm_occ *occ,
                               bk_rmsnorm_cfg *cfg)
{
    cfg->kernel = BK_RMSNORM_LEAN;
    cfg->stages = 0;
    cfg->blocks_per_sm = 0;
    cfg->stream_hint = tokens >= (hidden >= 8192 ? 16 : 64);
    cfg->gamma_early = 1;
    cfg->split = 1;
    cfg->pdl = g_pdl && bk__rmsnorm_pdl(tokens, hidden, occ);
    if (hidden <= 4096) {
        cfg->threads = 512; /* one vector per thread from hidden 8 to 4096 */
        if (tokens >= 1024 && tokens <= 4096) {
            cfg->kernel = BK_RMSNORM_ROW;
            cfg->gamma_early = 0; /* the row kernel always loads gamma first */
        }
        return;
    }
    /* 256-1023 tokens, but past one wave of the 512-thread launch (occ->mid) its last,
     * partly filled wave costs a row's whole time: 1024 threads of one vector (two above
     * 8192), gamma early, measured faster from there to 1023 tokens (bench_rmsnorm --sweep
     * lean --each --tokens, H200, 2026-12-04 19:58 UTC, 2 graphs a configuration;
     * docs/bench/cuda.md): by 0.29-0.46 us at 544-704 x 5120/6144 and 0.01-0.14 at 768-1000
     * (6144 x 960/1000: -0.01/-0.03), 0-0.26 at 544-1000 x 7168/8192 (the 397-511 step of
     * the twenty-second session), 0.16-1.65 us at 416-1000 x 10240/12288. Below one wave
     * (288, 416 at 5120-6144) 512 threads were 0.16-0.74 us faster; one row past it (529,
     * 397) still 0.05-0.31 us faster, four (400 at 7168-12288) slower. At hidden 16384 (2
     * blocks an SM, 264 rows; 20:10 UTC) 1024 threads gamma early 0.29-0.88 us faster at
     * 265-320 tokens, 0.09 slower at 384 (the switch back at 352 is between the two, not
     * measured). Where the wave is not known (occ->mid 0: no device, and a hidden size the
     * H200 table does not cover) the older rule: 512 threads at 256-1023. */
    const int64_t wave = (int64_t)occ->sms * occ->mid;
    const int64_t end = hidden <= 12288 ? 1024 : 352; /* the 1024-thread launch up to here */
    const int mid =
        tokens >= 256 && tokens < 1024 && (wave == 0 || tokens <= wave || tokens >= end);
    if (hidden > 8192) { /* 512 threads would hold more than 2 vectors each */
        /* 144 tokens to half the wave at hidden 10760-12288: the 512-thread launch too. It
         * fits 3 blocks an SM there (3 vectors a thread), the 1024-thread launch without
         * gamma early 2 (704-768 threads; 3 x 672 at 10752 fit in 2048 threads an SM).
         * bench_rmsnorm --sweep lean --each (docs/bench/cuda.md), at 12288 on the H200: 0.23-0.29
         * us faster than the default at 160-192 (thirty-third session), 0.12-0.27 at 144-159,
         * 0.58 slower at 199 (thirty-fourth), 1.1-1.6 at 200-224; on the H100
         * (thirty-fourth) 0.19-0.52 faster at 160-198 x 11264-12288, 0.9-1.3 slower at 200-207,
         * and at 10752 (3 blocks of 672 threads) 0.18-0.25 slower at 160-192. Old/new/new/old
         * on the H200 (thirty-fourth): 0.05-0.23 us less at 160-198 x 10760-12288, 0.12-0.27
         * at 12288 x 144-159, -0.06 to +0.02 at 11264 x 144-159, a tie at 10760 x 144-159;
         * 136, 199 and hidden 10752 unchanged. On the H100 (thirty-fifth): 0.17-0.52 us
         * less at 144-198 x 10760-12288, 199 and hidden 10752 within 0.005. */
        if (!mid && wave > 0 && hidden > 10752 && hidden <= 12288 &&
            tokens >= bk__half_wave_from && 2 * tokens <= wave) {
            cfg->threads = 512;
            cfg->gamma_early = 0;
            return;
        }
        cfg->threads = mid ? 512 : 1024;
        cfg->gamma_early = !mid;
        /* 160-192 tokens to hidden 12288, but for the band above: 1024 threads without
         * gamma early or hints (thirty-third session, docs/bench/cuda.md: bench_rmsnorm
         * --sweep lean --each on the H200, 0.18-0.30 us less at 10240 x 160-192, 0.01-0.09 at
         * 12288 x 160-224; old/new/new/old on the H100, 0.31-0.45 less at 10240 x 160-192,
         * but 0.9-1.5 more at 10240 x 208-255 and 0.05-0.36 more at 16384 x 160-208, so
         * neither there; on the H200, thirty-fourth session, 0.17-0.30 less at 10240 x
         * 160-192); and at 15368-16384 x 160-255, there without pdl (bk__rmsnorm_wide_band,
         * bk__rmsnorm_pdl). And past 192 to half the wave at hidden 9992-10752, where this
         * launch fits 3 blocks an SM (672 threads or fewer) like the 512-thread one: on the
         * H100 (thirty-fifth session, bench_rmsnorm --sweep lean --each) 0.24-0.40 us faster
         * than the default (gamma early, 2 blocks an SM) at 193-198 x 9992-10752, and 0.23-0.41
         * less before and after (thirty-sixth; not yet measured on the H200); past half the
         * wave it loses (0.6-0.9 us at 10240 x 200-207, H100, thirty-fourth). */
        if ((tokens >= 160 && tokens <= 192 && hidden <= 12288) ||
            bk__rmsnorm_wide_band(tokens, hidden) ||
            (!mid && wave > 0 && hidden >= 9992 && hidden <= 10752 && tokens > 192 &&
             2 * tokens <= wave)) {
            cfg->gamma_early = 0;
            cfg->stream_hint = 0;
        }
        return;
    }
    /* Past that wave, a launch whose rows fill one wave of its own to 15/16 or more: 512
     * threads, else 256, without gamma early or hints (they fit more blocks an SM than the
     * 512-thread launch with gamma early). bench_rmsnorm --sweep lean --each, H200: 4 blocks
     * an SM of 512 at 7168 / 8192 (528 rows) 0.11-0.34 us faster than 1024 threads at 496-528
     * tokens (0.94-1.0 of the wave), a tie at 480 (0.91; 2026-12-04 21:08 UTC); 6 of 512 at
     * 5120 x 768 (792 rows) 0.21 faster, 5 at 6144 x 640 (660) 0.33, 6 of 256 at 6144 x 768
     * 0.36, 5 of 256 at 8192 x 640 0.26, 7168 x 640 a tie; at 0.89 of a wave (704 tokens)
     * 0.09-0.41 slower (19:58 UTC). */
    if (tokens >= 256 && tokens < 1024 && !mid) {
        const int per_sm[2] = {occ->l512, occ->l256}, threads[2] = {512, 256};
        for (int k = 0; k < 2; k++) {
            const int64_t rows = (int64_t)occ->sms * per_sm[k];
            if (rows > 0 && tokens <= rows && 16 * tokens >= 15 * rows) {
                cfg->threads = threads[k];
                cfg->gamma_early = 0;
                cfg->stream_hint = 0;
                return;
            }
        }
    }
    /* 80-192 tokens from hidden 6144: 512 threads of 2 vectors with gamma early and no hints
     * (H100, thirty-second session, docs/bench/cuda.md: bench_rmsnorm --sweep lean --each
     * found them 0.03-0.24 us faster than 1024 threads with the hint at 80-192 x 6144-8192, the
     * thirty-first session at 96-128 x 7168-8192; against the rule before, old/new/new/old:
     * 0.02-0.08 us less at 96-192 x 6144, 0.05-0.23 at 80-192 x 7168-8192, 64 and 208
     * unchanged; at 5120 0.02-0.04 more at 80-96 and less at 160-192, so not below 6144). At
     * 224 the sweep had them 0.5-0.7 us slower at 7168-8192. On the H200 (thirty-third
     * session, old/new/new/old with v6 against 2c040a2): 0.05-0.14 us less at 80-192 x
     * 7168-8192, 0.01-0.05 at 96-192 x 6144, 5120 unchanged. */
    if (tokens >= 80 && tokens <= 192 && hidden >= 6144) {
        cfg->threads = 512;
        cfg->stream_hint = 0;
        return;
    }
    cfg->threads = tokens < 64 || mid ? 512 : 1024;
}

/* Rule v6: below 64 tokens, out of place, a row over several blocks (cfg->split): each
 * block reads the whole row and stores its share, so fewer bytes pass through each SM
 * while the rows are fewer than the SMs. 4 blocks to 32 tokens (8 to 8 tokens from hidden
 * 8192), 2 below 64: at most about 128 blocks (bench_rmsnorm --sweep lean, H200, 2026-12-03
 * 16:55 UTC; against v4, old/new/new/old at 17:12: 0.07-0.19 us less at 1-16 tokens, 0-0.1
 * at 32, unchanged from 64). v5 took 8 blocks to 16 tokens from hidden 8192; at 8192 x 16
 * 4 beat it by 0.12 us on the H200 (twenty-first session) and 0.15 on the H100 (thirty-first;
 * v5 against v6: thirty-second session, docs/bench/cuda.md, 0.03-0.29 us less at 9-12 x
 * 8192-16384 but 0.04 more at 12288 x 16; on the H200, thirty-third session: 0.015-0.2 less
 * at 9-12 x 8192-16384 but 12288 x 9, 0.01 more; 12288 x 16 a tie). In place (sum
 * overlapping an output, as the incumbent calls it) one block a row, as bk__check_split
 * requires. */
static void bk__rmsnorm_split(int64_t tokens, int64_t hidden, int in_place, bk_rmsnorm_cfg *cfg)
{
    if (cfg->kernel != BK_RMSNORM_LEAN || !cfg->gamma_early || tokens >= 64 || tokens < 1 ||
        in_place)
        return;
    cfg->split = tokens <= 8 && hidden >= 8192 ? 8 : tokens <= 32 ? 4 : 2;
    /* split rows at 16 tokens or fewer without the evict-first hint (on at 16 from hidden
     * 8192; thirty-third session, docs/bench/cuda.md): bench_rmsnorm --sweep lean --each on
     * the H200 had them 0.06-0.11 us faster at 16 x 8192-16384; old/new/new/old on the H100,
     * 0.03-0.16 us less there; on the H200 (thirty-fourth session) 0.05-0.11 less. In place,
     * one block a row keeps the hint: the sweep had 1024 threads of one block a row faster
     * with it at 8192 x 16. */
    if (tokens <= 16)
        cfg->stream_hint = 0;
}

/* The row and lean kernels' common signature and launch: `split` blocks per row (1 but
 * for the lean kernel; gridDim.x takes up to 2^31 - 1 blocks: bk__check_row's bound on
 * tokens, bk__check_split's on tokens x split). */
typedef void (*bk__row_kernel)(const uint4 *, const uint4 *, const uint4 *, uint4 *, uint4 *,
                               int, float, int);

static bk_status bk__launch_rows(bk__row_kernel kernel, const char *name, const void *sum,
                                 const void *residual, const void *gamma, void *residual_out,
                                 void *out, int64_t tokens, int64_t hidden, float eps,
                                 int threads, int split, int pdl, cudaStream_t stream,
                                 bk_err *err)
{
    return bk__launch(name, kernel, (unsigned)(tokens * split), (unsigned)threads, 0, stream,
                      pdl, err, (const uint4 *)sum, (const uint4 *)residual,
                      (const uint4 *)gamma, (uint4 *)residual_out, (uint4 *)out, (int)hidden,
                      eps, split);
}

/* The row or lean kernel a configuration launches and its threads per row (the pipelined
 * kernel has its own launcher: *kernel stays NULL). */
static bk_status bk__row_kernel_of(const bk_rmsnorm_cfg *cfg, int64_t hidden,
                                   bk__row_kernel *kernel, int *threads, bk_err *err)
{
    int vpt = 0;
    *kernel = NULL;
    const bk_status st = bk__rmsnorm_shape(cfg, hidden, &vpt, threads, err);
    if (st != BK_OK || cfg->kernel == BK_RMSNORM_PIPE)
        return st;
    if (cfg->kernel == BK_RMSNORM_ROW) {
#define L(K)                                                                               \
    *kernel = cfg->stream_hint ? bk_residual_rmsnorm_kernel<K, true>                       \
                               : bk_residual_rmsnorm_kernel<K, false>
        BK_VPT_SWITCH(vpt, L);
#undef L
        return BK_OK;
    }
    /* the lean kernel: as the row kernel, up to 1024 threads (2 vectors each above 512;
     * with gamma early, at most 2 at any width) */
    const bool split = cfg->split > 1; /* gamma early only (bk__check_split) */
#define LA(K, E, M, B)                                                                     \
    *kernel = cfg->stream_hint                                                             \
                  ? (E && split ? bk_residual_rmsnorm_lean_kernel<K, true, E, M, B, E>     \
                                : bk_residual_rmsnorm_lean_kernel<K, true, E, M, B>)       \
                  : (E && split ? bk_residual_rmsnorm_lean_kernel<K, false, E, M, B, E>    \
                                : bk_residual_rmsnorm_lean_kernel<K, false, E, M, B>)
    /* blocks per SM the register cap asks for. 512 threads: 4 at one vector per thread
     * (32 registers), 3 at two (42), 2 at three (64), else 1 (no spills); gamma early
     * (at most 2 vectors, bk__rmsnorm_shape): one step down (its 4 registers a vector).
     * 1024 threads: 2 at one vector (32), else 1; gamma early: 1. bk_rmsnorm_cfg_blocks_per_sm
     * says what the compiled kernel reaches. */
#define L(K) LA(K, false, BK_MAX_ROW_THREADS, (K) == 1 ? 4 : (K) == 2 ? 3 : (K) == 3 ? 2 : 1)
    if (cfg->gamma_early) {
        if (*threads > BK_MAX_ROW_THREADS) {
            if (vpt == 1)
                LA(1, true, 1024, 1);
            else
                LA(2, true, 1024, 1);
        } else if (vpt == 1) {
            LA(1, true, BK_MAX_ROW_THREADS, 3);
        } else {
            LA(2, true, BK_MAX_ROW_THREADS, 2);
        }
    } else if (*threads > BK_MAX_ROW_THREADS) {
        if (vpt == 1)
            LA(1, false, 1024, 2);
        else
            LA(2, false, 1024, 1);
    } else {
        BK_VPT_SWITCH(vpt, L);
    }
#undef L
#undef LA
    return BK_OK;
}

/* The row and lean kernels' launch. */
static bk_status bk__rmsnorm_rows(const void *sum, const void *residual, const void *gamma,
                                  void *residual_out, void *out, int64_t tokens, int64_t hidden,
                                  float eps, const bk_rmsnorm_cfg *cfg, cudaStream_t stream,
                                  bk_err *err)
{
    int threads = 0;
    bk__row_kernel kernel = NULL;
    const bk_status st = bk__row_kernel_of(cfg, hidden, &kernel, &threads, err);
    if (st != BK_OK)
        return st;
    const int lean = cfg->kernel == BK_RMSNORM_LEAN;
    return bk__launch_rows(kernel,
                           lean ? "bk_residual_rmsnorm_lean_kernel" : "bk_residual_rmsnorm_kernel",
                           sum, residual, gamma, residual_out, out, tokens, hidden, eps, threads,
                           lean && cfg->split > 1 ? cfg->split : 1, cfg->pdl, stream, err);
}

extern "C" bk_status bk_residual_rmsnorm_config(const void *sum, const void *residual,
                                                const void *gamma, void *residual_out,
                                                void *out, int64_t tokens, int64_t hidden,
                                                float eps, const bk_rmsnorm_cfg *cfg,
                                                void *stream, bk_err *err)
{
    bk_status st = bk__check_row("residual_rmsnorm", tokens, hidden, err);
    if (st == BK_OK)
        st = bk__check_split(cfg, sum, residual_out, out, tokens, hidden, err);
    if (st != BK_OK || tokens == 0)
        return st;
    switch (cfg->kernel) {
    case BK_RMSNORM_ROW:
    case BK_RMSNORM_LEAN:
        return bk__rmsnorm_rows(sum, residual, gamma, residual_out, out, tokens, hidden, eps,
                                cfg, (cudaStream_t)stream, err);
    case BK_RMSNORM_PIPE:
        return bk__rmsnorm_pipe(sum, residual, gamma, residual_out, out, tokens, hidden, eps,
                                cfg, (cudaStream_t)stream, err);
    }
    return BK_FAIL(err, BK_ERR_INPUT, "residual_rmsnorm: unknown kernel %d", (int)cfg->kernel);
}

extern "C" int bk_rmsnorm_cfg_threads(const bk_rmsnorm_cfg *cfg, int64_t hidden)
{
    int vpt = 0, threads = 0;
    return bk__rmsnorm_shape(cfg, hidden, &vpt, &threads, NULL) == BK_OK ? threads : 0;
}

extern "C" int bk_rmsnorm_cfg_blocks_per_sm(const bk_rmsnorm_cfg *cfg, int64_t hidden)
{
    int threads = 0, n = 0;
    bk__row_kernel kernel = NULL;
    if (bk__row_kernel_of(cfg, hidden, &kernel, &threads, NULL) != BK_OK || !kernel ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error for the caller's next check */
        return 0;
    }
    return n;
}

extern "C" void bk_rmsnorm_rule_cfg(int64_t tokens, int64_t hidden, int in_place,
                                    const bk_rmsnorm_occ *occ, bk_rmsnorm_cfg *cfg)
{
    bk_rmsnorm_occ h200;
    if (!occ) {
        bk_rmsnorm_occ_h200(hidden, &h200);
        occ = &h200;
    }
    bk__rmsnorm_launch(tokens, hidden, occ, cfg);
    bk__rmsnorm_split(tokens, hidden, in_place, cfg);
}

/* The blocks per SM of the default rule's launches on the current device, kept per device
 * and hidden size in a small table: a multiplicative hash of both picks a home slot, and an
 * entry may sit in any of the BK_OCC_WAYS slots from it (a process calls with few hiddens,
 * often 2048 apart, which a slot per hidden / 8 modulo the table would put together). */
#define BK_OCC_SLOTS 64
#define BK_OCC_WAYS 4
static_assert(BK_OCC_SLOTS == 64, "the hash below takes the top 6 bits");
static struct {
    int device1; /* the device + 1; 0: empty (as the table starts) */
    int64_t hidden;
    bk_rmsnorm_occ occ;
} g_occ[BK_OCC_SLOTS];
static pthread_mutex_t g_occ_mu = PTHREAD_MUTEX_INITIALIZER;

extern "C" int bk_rmsnorm_occ_device(int64_t hidden, bk_rmsnorm_occ *occ)
{
    int device = -1, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms < 1) {
        (void)cudaGetLastError(); /* not sticky: leave no error for the caller's next check */
        bk_rmsnorm_occ_h200(hidden, occ);
        return 0;
    }
    const uint32_t key = (uint32_t)(hidden / 8) * 64u + (uint32_t)device;
    const int home = (int)((key * 2654435761u) >> 26); /* the top 6 bits: 0..63 */
    int slot = home;
    pthread_mutex_lock(&g_occ_mu);
    for (int w = 0; w < BK_OCC_WAYS; w++) {
        const int i = (home + w) % BK_OCC_SLOTS;
        if (g_occ[i].device1 == device + 1 && g_occ[i].hidden == hidden) {
            *occ = g_occ[i].occ;
            pthread_mutex_unlock(&g_occ_mu);
            return 1;
        }
        if (g_occ[i].device1 == 0 && slot == home && g_occ[home].device1 != 0)
            slot = i; /* the first free way, should this hidden be kept */
    }
    pthread_mutex_unlock(&g_occ_mu);
    /* {kernel, threads, stream_hint, stages, blocks_per_sm, gamma_early, split, pdl} */
    const bk_rmsnorm_cfg mid = {BK_RMSNORM_LEAN, 512, 1, 0, 0, hidden <= 8192, 1, 0};
    const bk_rmsnorm_cfg l512 = {BK_RMSNORM_LEAN, 512, 0, 0, 0, 0, 1, 0};
    const bk_rmsnorm_cfg l256 = {BK_RMSNORM_LEAN, 256, 0, 0, 0, 0, 1, 0};
    /* only what the rule weighs: mid above hidden 4096, the one-wave launches up to 8192. The
     * first call at a hidden may come while this thread captures a graph (the launch being
     * captured asks for its configuration): the queries enqueue nothing, and the relaxed
     * capture mode keeps a stricter one from counting them against the capture. */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const int swapped = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    occ->sms = sms;
    occ->mid = hidden > 4096 ? bk_rmsnorm_cfg_blocks_per_sm(&mid, hidden) : 0;
    occ->l512 = hidden > 4096 && hidden <= 8192 ? bk_rmsnorm_cfg_blocks_per_sm(&l512, hidden) : 0;
    occ->l256 = hidden > 4096 && hidden <= 8192 ? bk_rmsnorm_cfg_blocks_per_sm(&l256, hidden) : 0;
    if (swapped)
        (void)cudaThreadExchangeStreamCaptureMode(&mode); /* back to the thread's own */
    const int known = hidden <= 4096 || (occ->mid > 0 && (hidden > 8192 ||
                                                           (occ->l512 > 0 && occ->l256 > 0)));
    if (!known)
        return 1; /* a query failed: asked again next time, not kept */
    pthread_mutex_lock(&g_occ_mu);
    g_occ[slot].device1 = device + 1;
    g_occ[slot].hidden = hidden;
    g_occ[slot].occ = *occ;
    pthread_mutex_unlock(&g_occ_mu);
    return 1;
}

extern "C" void bk_rmsnorm_default_cfg(int64_t tokens, int64_t hidden, int in_place,
                                       bk_rmsnorm_cfg *cfg)
{
    /* the rule reads the counts only from bk__half_wave_from to 1023 tokens above hidden
     * 4096 (bk__rmsnorm_launch): no device query on the path of any other call */
    bk_rmsnorm_occ occ = {0, 0, 0, 0};
    if (hidden > 4096 && tokens >= bk__half_wave_from && tokens < 1024)
        (void)bk_rmsnorm_occ_device(hidden, &occ);
    bk_rmsnorm_rule_cfg(tokens, hidden, in_place, &occ, cfg);
}

extern "C" void bk_rmsnorm_call_cfg(const void *sum, const void *residual_out, const void *out,
                                    int64_t tokens, int64_t hidden, bk_rmsnorm_cfg *cfg)
{
    bk_rmsnorm_default_cfg(tokens, hidden, bk__in_place(sum, residual_out, out, tokens, hidden),
                           cfg);
}

extern "C" bk_status bk_residual_rmsnorm(const void *sum, const void *residual,
                                         const void *gamma, void *residual_out, void *out,
                                         int64_t tokens, int64_t hidden, float eps,
                                         void *stream, bk_err *err)
{
    bk_rmsnorm_cfg cfg;
    bk_rmsnorm_call_cfg(sum, residual_out, out, tokens, hidden, &cfg);
    return bk_residual_rmsnorm_config(sum, residual, gamma, residual_out, out, tokens, hidden,
                                      eps, &cfg, stream, err);
}

extern "C" size_t bk_ar_rmsnorm_cuda_peer_bytes(int64_t tokens, int64_t hidden)
{
    return 2 * 3 * (size_t)tokens * (size_t)hidden * 2;
}

/* The half of peer memory one call may use, after checking it holds `need`. */
static bk_status bk__ipc_half(const bk_cuda_comm *c, const char *what, size_t need,
                              size_t *half, bk_err *err)
{
    if (!c->have_p2p)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s needs peer access: %s", what, c->p2p_why);
    *half = c->dev.bytes / 2 / 16 * 16;
    if (need > *half)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: peer memory holds %zu bytes per rank, the shape "
                       "needs %zu (2 x %zu)", what, c->dev.bytes, 2 * need, need);
    return BK_OK;
}

extern "C" bk_status bk_ipc_oneshot_rmsnorm(bk_cuda_comm *c, const void *x, const void *residual,
                                            const void *gamma, void *residual_out, void *out,
                                            int64_t tokens, int64_t hidden, float eps,
                                            void *stream, bk_err *err)
{
    int vpt = 0, threads = 0;
    size_t half = 0;
    bk_status st = bk__check_row("ipc_oneshot", tokens, hidden, err);
    if (st == BK_OK)
        st = bk__ipc_half(c, "ipc_oneshot", (size_t)tokens * hidden * 2, &half, err);
    if (st != BK_OK)
        return st;
    bk__row_config(hidden, bk__default_threads(hidden), &vpt, &threads);
#define L(K)                                                                               \
    st = bk__launch("bk_oneshot_kernel", bk_oneshot_kernel<K>, (unsigned)c->grid,             \
                    (unsigned)threads, 0, (cudaStream_t)stream, g_pdl, err, c->dev,         \
                    (const uint4 *)x, (const uint4 *)residual, (const uint4 *)gamma,        \
                    (uint4 *)residual_out, (uint4 *)out, (int)tokens, (int)hidden, half, eps)
    BK_VPT_SWITCH(vpt, L);
#undef L
    return st;
}

extern "C" bk_status bk_ipc_twoshot_rmsnorm(bk_cuda_comm *c, const void *x, const void *residual,
                                            const void *gamma, void *residual_out, void *out,
                                            int64_t tokens, int64_t hidden, float eps,
                                            void *stream, bk_err *err)
{
    int vpt = 0, threads = 0;
    size_t half = 0;
    bk_status st = bk__check_row("ipc_twoshot", tokens, hidden, err);
    if (st == BK_OK)
        st = bk__ipc_half(c, "ipc_twoshot", 3 * (size_t)tokens * hidden * 2, &half, err);
    if (st != BK_OK)
        return st;
    bk__row_config(hidden, bk__default_threads(hidden), &vpt, &threads);
#define L(K)                                                                               \
    st = bk__launch("bk_twoshot_kernel", bk_twoshot_kernel<K>, (unsigned)c->grid,             \
                    (unsigned)threads, 0, (cudaStream_t)stream, g_pdl, err, c->dev,         \
                    (const uint4 *)x, (const uint4 *)residual, (const uint4 *)gamma,        \
                    (uint4 *)residual_out, (uint4 *)out, (int)tokens, (int)hidden, half, eps)
    BK_VPT_SWITCH(vpt, L);
#undef L
    return st;
}

extern "C" bk_status bk_copy_kernel(const void *src, void *dst, size_t bytes, void *stream,
                                    bk_err *err)
{
    if (bytes % 16 != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "copy kernel: %zu bytes is not a multiple of 16",
                       bytes);
    const size_t n = bytes / 16;
    const size_t blocks = (n + 1023) / 1024;
    if (blocks == 0)
        return BK_OK;
    if (blocks > 0x7fffffffu)
        return BK_FAIL(err, BK_ERR_INPUT, "copy kernel: %zu bytes is too large", bytes);
    bk_copy_kernel_impl<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
        (const uint4 *)src, (uint4 *)dst, n);
    return bk__launched("bk_copy_kernel", err);
}
