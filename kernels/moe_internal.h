/* moe_internal.h - what the moe.fused_experts_reduce files share behind kernels/catalog.h:
 * tensor indices, the expert-parallel sharding rule, seeded weights, and the peer-memory
 * layout of the cpu variants. Not a public header.
 *
 * The target (kernels/moe.c holds the contract in prose): per token t,
 *   out[t] = bf16( sum_k w[t,k] * expert_{ids[t,k]}(x[t]) + residual[t] )
 *   expert_e(x) = W2[e] . (silu(W1[e][0:I] . x) * (W1[e][I:2I] . x))
 * with the experts sharded over the lane's ranks (expert parallel): rank r owns the
 * experts e with e % world == r, in local slot e / world. */
#ifndef BK_MOE_INTERNAL_H
#define BK_MOE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/catalog.h"

#define BK_MOE_TARGET "moe.fused_experts_reduce"

enum {
    BK_MOE_X = 0,   /* [T, H] bf16, the same on every rank */
    BK_MOE_IDS,     /* [T, K] int32, distinct experts per token, the same on every rank */
    BK_MOE_W,       /* [T, K] fp32 router weights (sum 1 per token), the same on every rank */
    BK_MOE_W1,      /* [E_local, 2I, H] bf16: rows 0..I-1 gate, I..2I-1 up */
    BK_MOE_W2,      /* [E_local, H, I] bf16 */
    BK_MOE_RESIDUAL,/* [T, H] bf16, the same on every rank */
    BK_MOE_OUT,     /* [T, H] bf16 output, the same bits on every rank */
    BK_MOE_NT
};

/* ---- sharding ---- */

/* Local expert slots of one rank: ceil(E / world). A rank with fewer experts
 * (E not a multiple of world) leaves its last slot zero and unused. */
static inline int64_t bk__moe_local_experts(int64_t experts, int world)
{
    return world < 1 ? experts : (experts + world - 1) / world;
}

static inline int bk__moe_owner(int64_t expert, int world) { return (int)(expert % world); }
static inline int64_t bk__moe_slot(int64_t expert, int world) { return expert / world; }

/* ---- seeded inputs (deterministic from seed, shape index and, for weights,
 * the global expert; never from the rank or the world size) ---- */

/* Expert e's W1 ([2I, H]) or W2 ([H, I]) as bf16, into dst. */
void bk__moe_fill_w1(uint16_t *dst, const bk_shape *s, uint64_t seed, int shape_index,
                     int64_t expert);
void bk__moe_fill_w2(uint16_t *dst, const bk_shape *s, uint64_t seed, int shape_index,
                     int64_t expert);

/* Check a call's tensors against the target (count, sizes, data present). */
bk_status bk__moe_check_call(const bk_call *call, bk_err *err);

/* ---- peer-memory layout of one rank's payload (cpu variants) ----
 * idx:  [T*K] int32, row of assignment (t,k) in this rank's y, or -1 when
 *       another rank owns expert ids[t,k] (moe_fused_combine)
 * y:    [T*K, H] bf16, this rank's GEMM2 outputs, one row per local assignment
 *       (moe_fused_combine)
 * part: [T, H] fp32, this rank's top-k weighted partial sums (moe_serial)
 * red:  [chunk] fp32, the reduced chunk this rank owns in the two-pass
 *       allreduce (moe_serial); chunk = ceil(T*H / world) */
typedef struct bk__moe_layout {
    size_t n;     /* T * H */
    size_t chunk;
    size_t idx_off, y_off, part_off, red_off, bytes;
} bk__moe_layout;
bk__moe_layout bk__moe_layout_of(const bk_shape *s, int world);

#endif
