/* cuda_variants.h - the cuda variants of collective.allreduce_residual_rmsnorm and the
 * plain-C launchers of their kernels (kernels/ar_rmsnorm.cu). */
#ifndef BK_CUDA_VARIANTS_H
#define BK_CUDA_VARIANTS_H

#ifdef BK_HAVE_CUDA

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "collectives/cuda_ipc.h"
#include "runner/status.h"

#ifndef __cplusplus
#include "kernels/catalog.h"
/* incumbent: in-place-style ncclAllReduce (x -> residual_out), then one fused
 * residual + RMSNorm kernel reading residual_out and writing it back. */
extern const bk_variant bk_variant_nccl_then_rmsnorm;
/* candidate: every rank reads all peers (fixed order 0..world-1) in one
 * kernel, adds the residual and normalises; results bitwise equal on all ranks. */
extern const bk_variant bk_variant_ipc_oneshot_fused;
/* candidate: rows split across ranks; each reduces and normalises its rows,
 * pushes them to every peer, then a barrier. */
extern const bk_variant bk_variant_ipc_twoshot_fused;
#endif

/* The math (all three variants; bf16 storage, fp32 accumulation), the
 * target's definition (kernels/ar_rmsnorm.c):
 *   s            = sum_r x_r + residual           (fp32, per element)
 *   residual_out = bf16(s)
 *   out          = bf16(r * rsqrt(mean_row(r^2) + eps) * gamma), r = residual_out
 * The norm uses residual_out as stored (rounded). residual and gamma must be
 * the same on every rank (tensor parallelism replicates them). The
 * incumbent's NCCL sum of the x_r is rounded to bf16 before the residual is
 * added. */
#define BK_RMSNORM_EPS 1e-6f

/* Peer-memory bytes per rank the IPC variants need for a shape (two halves,
 * each holding the largest per-call region: 3 x tokens x hidden bf16). */
size_t bk_ar_rmsnorm_cuda_peer_bytes(int64_t tokens, int64_t hidden);

/* residual + RMSNorm over `tokens` rows of `hidden` bf16 (hidden % 8 == 0,
 * <= 16384): sum (bf16, may alias residual_out) + residual -> residual_out,
 * out. All pointers device memory, 16-byte aligned. Out of place, below 64 tokens, a row
 * is spread over several blocks (bk_rmsnorm_cfg.split); in place, one block a row. */
bk_status bk_residual_rmsnorm(const void *sum, const void *residual, const void *gamma,
                              void *residual_out, void *out, int64_t tokens, int64_t hidden,
                              float eps, void *stream, bk_err *err);

/* A launch configuration of the residual + RMSNorm kernels (benchmark sweeps).
 * ROW: one block per row, the row loaded straight into registers.
 * PIPE: a persistent grid (blocks_per_sm x SMs blocks, at most one per row),
 * each block walking rows blockIdx.x, +grid, ...; both input rows of the next
 * `stages` rows are brought into shared memory by TMA bulk copies while the
 * current row is reduced and stored (kernels/ar_rmsnorm_pipe.cu; sm_90).
 * LEAN: one block per row like ROW, holding only the row's bf16 result
 * between the loads and the reduction (residual_out is stored before the
 * reduction, gamma is read after it unless gamma_early), so fewer registers and
 * more blocks per SM; 32..1024 threads (at most 2 vectors per thread above 512). */
typedef enum bk_rmsnorm_kernel {
    BK_RMSNORM_ROW = 0,
    BK_RMSNORM_PIPE = 1,
    BK_RMSNORM_LEAN = 2
} bk_rmsnorm_kernel;
typedef struct bk_rmsnorm_cfg {
    bk_rmsnorm_kernel kernel;
    int threads;       /* about this many threads per row: ROW 32..512, PIPE and LEAN
                        * 32..1024 */
    int stream_hint;   /* 1: evict-first stores, and loads (ROW) or L2 evict-first bulk
                        * copies (PIPE) */
    int stages;        /* PIPE: rows in flight per block, 1..4; 0 = the most that fit in
                        * about 100 KB of shared memory (at least 2) */
    int blocks_per_sm; /* PIPE: grid = min(tokens, blocks_per_sm x SMs), 1..8; 0 = as many
                        * as the occupancy calculator says fit */
    int gamma_early;   /* LEAN: 1: gamma is loaded with the row, before the reduction (at
                        * most 2 vectors per thread); 0: after it */
    int split;         /* LEAN with gamma_early: blocks per row, 0 or 1 = one; 2, 4 or 8:
                        * each of a row's blocks loads the whole row and sums its squares in the one-block
                        * order (the same bits), then loads gamma for and stores only its
                        * share of the row: less traffic through each SM when the rows are
                        * fewer than the SMs, the row read split times from L2. Refused in
                        * place (sum overlapping an output): a block would read what
                        * another has already written. */
    int pdl;           /* 1: programmatic dependent launch (sm_90): the kernel may be
                        * scheduled while the kernel before it on the stream finishes, and
                        * waits for it (its completion and writes) before its first load;
                        * in a CUDA graph, a programmatic edge. 0: an ordinary launch */
} bk_rmsnorm_cfg;

/* The same with the launch configuration open. Errors (BK_ERR_INPUT) for a
 * configuration the shape cannot use, and for PIPE with a pointer that is not
 * 16-byte aligned; BK_ERR_UNSUPPORTED for PIPE on a device below sm_90. */
bk_status bk_residual_rmsnorm_config(const void *sum, const void *residual, const void *gamma,
                                     void *residual_out, void *out, int64_t tokens,
                                     int64_t hidden, float eps, const bk_rmsnorm_cfg *cfg,
                                     void *stream, bk_err *err);

/* Threads per block cfg launches with at hidden, or 0 when bk_residual_rmsnorm_config
 * refuses that shape for its threads or vectors per thread (pointers, stages and shared
 * memory are checked at the call). */
int bk_rmsnorm_cfg_threads(const bk_rmsnorm_cfg *cfg, int64_t hidden);

/* Blocks of cfg's kernel resident at once on one SM of the current device at hidden
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor on the compiled kernel), or 0 when
 * unknown: the pipelined kernel, a shape cfg refuses, no device. Rows a wave: this times
 * the SMs (split 1). */
int bk_rmsnorm_cfg_blocks_per_sm(const bk_rmsnorm_cfg *cfg, int64_t hidden);

/* What the default rule knows of the machine at one hidden size: the SMs, and the blocks
 * per SM of the lean launches it weighs at 256-1023 tokens above hidden 4096 (0: unknown):
 * mid, its 512-thread launch there (gamma early and evict-first hints up to hidden 8192,
 * without gamma early above); l512 and l256, 512 and 256 threads without gamma early or
 * hints (its one-wave launches, up to hidden 8192). Rows in one wave: sms x blocks per SM. */
typedef struct bk_rmsnorm_occ {
    int sms;
    int mid;
    int l512;
    int l256;
} bk_rmsnorm_occ;

/* The counts measured on an H200 (132 SMs, bench_rmsnorm --sweep --each, 2026-12-04), where
 * they were measured or follow from two measurements of one kernel (kernels/ar_rmsnorm.cu);
 * 0 elsewhere. */
void bk_rmsnorm_occ_h200(int64_t hidden, bk_rmsnorm_occ *occ);

/* The current device's (its SM count, cudaOccupancyMaxActiveBlocksPerMultiprocessor on the
 * compiled kernels; kept per device and hidden): 1. Without a device: the H200's, 0. */
int bk_rmsnorm_occ_device(int64_t hidden, bk_rmsnorm_occ *occ);

/* The default rule on the machine occ describes (bk_rmsnorm_occ_h200's when occ is NULL):
 * the configuration at tokens x hidden, in place (sum overlapping an output: one block per
 * row) or not. A pure function: the rule's tests give it the machine. */
void bk_rmsnorm_rule_cfg(int64_t tokens, int64_t hidden, int in_place,
                         const bk_rmsnorm_occ *occ, bk_rmsnorm_cfg *cfg);

/* The configuration bk_residual_rmsnorm launches at tokens x hidden on the current device
 * (bk_rmsnorm_rule_cfg with bk_rmsnorm_occ_device, asked only at the shapes where the rule
 * reads it), in place or not. */
void bk_rmsnorm_default_cfg(int64_t tokens, int64_t hidden, int in_place, bk_rmsnorm_cfg *cfg);

/* The configuration bk_residual_rmsnorm launches for this call: in place when sum overlaps
 * residual_out or out (the pointers are compared, never read). */
void bk_rmsnorm_call_cfg(const void *sum, const void *residual_out, const void *out,
                         int64_t tokens, int64_t hidden, bk_rmsnorm_cfg *cfg);

/* One-shot and two-shot fused allreduce + residual + RMSNorm over the lane's
 * peer memory (comm->have_p2p required; x, residual, gamma, outputs are this
 * rank's device tensors). Errors when the peer memory is too small. */
bk_status bk_ipc_oneshot_rmsnorm(bk_cuda_comm *comm, const void *x, const void *residual,
                                 const void *gamma, void *residual_out, void *out,
                                 int64_t tokens, int64_t hidden, float eps, void *stream,
                                 bk_err *err);
bk_status bk_ipc_twoshot_rmsnorm(bk_cuda_comm *comm, const void *x, const void *residual,
                                 const void *gamma, void *residual_out, void *out,
                                 int64_t tokens, int64_t hidden, float eps, void *stream,
                                 bk_err *err);

/* Device-to-device copy kernel (16-byte loads and stores), the bandwidth
 * yardstick of the benchmarks. bytes % 16 == 0. */
bk_status bk_copy_kernel(const void *src, void *dst, size_t bytes, void *stream, bk_err *err);

/* Programmatic dependent launch for the kernels this library launches by its own choice:
 * bk_residual_rmsnorm's rule (bk_rmsnorm_default_cfg) and the one-shot and two-shot IPC
 * kernels. On unless turned off for the process (a cuda engine: BK_CUDA_PDL=0); a
 * bk_rmsnorm_cfg given to bk_residual_rmsnorm_config launches as its pdl field says. */
void bk_cuda_pdl_set(int on);
int bk_cuda_pdl(void);

/* A one-thread kernel on stream that runs for ns nanoseconds of the GPU's clock
 * (%globaltimer): the `slowed` diagnostic's device-side wait (kernels/spin.cu). */
bk_status bk_cuda_spin_ns(uint64_t ns, void *stream, bk_err *err);

#ifdef __cplusplus
}
#endif

#endif /* BK_HAVE_CUDA */
#endif
