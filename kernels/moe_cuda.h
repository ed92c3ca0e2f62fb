/* moe_cuda.h - plain-C launchers of the moe.fused_experts_reduce kernels (kernels/moe.cu),
 * shared by the cuda variants (kernels/moe_cuda.c) and the benchmark. Every pointer is
 * device memory; every launcher enqueues on `stream` (a cudaStream_t), checks the launch
 * and is safe to capture in a CUDA graph. bf16 tensors are uint16_t. */
#ifndef BK_MOE_CUDA_H
#define BK_MOE_CUDA_H

#ifdef BK_HAVE_CUDA

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runner/status.h" /* C linkage for bk__fail_at in the .cu file */

/* Routing of this rank's assignments (expert e is rank e % world's, slot e / world):
 * counts[el] and cursor[el] are scratch; offsets[el + 1] receives the first row of each
 * local slot, row_of[tk] the row of each assignment (-1: another rank's), and xp the
 * gathered x rows ([rows, hidden] bf16). Rows inside one slot come in no fixed order
 * (atomics); every later stage reads them through row_of, so results do not depend on
 * it. hidden % 8 == 0. */
bk_status bk_moe_route(const int32_t *ids, const uint16_t *x, int64_t tokens, int64_t topk,
                       int64_t hidden, int rank, int world, int64_t local_experts,
                       int32_t *counts, int32_t *cursor, int32_t *offsets, int32_t *row_of,
                       uint16_t *xp, void *stream, bk_err *err);

/* act[r, i] = bf16(silu(gu[r, i]) * gu[r, I + i]) for rows r < rows; gu is [rows, 2I]. */
bk_status bk_moe_silu_mul(const uint16_t *gu, uint16_t *act, int64_t rows, int64_t inter,
                          void *stream, bk_err *err);

/* out[t] = bf16(sum_k w[t,k] * y[row_of[t,k]] (+ residual[t] when residual != NULL)),
 * fp32 sums in k order; assignments with row -1 are skipped. hidden % 8 == 0,
 * topk <= 64, tokens >= 1 (at most 2^31 - 1). */
bk_status bk_moe_combine(const uint16_t *y, const int32_t *row_of, const float *w,
                         const uint16_t *residual, uint16_t *out, int64_t tokens,
                         int64_t topk, int64_t hidden, void *stream, bk_err *err);

/* out = bf16(out + residual), n % 8 == 0. */
bk_status bk_moe_add_residual(uint16_t *out, const uint16_t *residual, size_t n, void *stream,
                              bk_err *err);

/* dst = src with 16-byte loads and stores (the bandwidth yardstick), bytes % 16 == 0. */
bk_status bk_moe_copy(const void *src, void *dst, size_t bytes, void *stream, bk_err *err);

#ifdef __cplusplus
}
#endif

#endif /* BK_HAVE_CUDA */
#endif
