/* moe_gpu.h - what the moe.fused_experts_reduce GPU tests (test_moe_cuda.c, one GPU, and
 * test_moe_cuda_lanes.c, one process per GPU) share: the variants under test, one shape's
 * host and device tensors, and the world-1 error bound. */
#ifndef BK_MOE_GPU_H
#define BK_MOE_GPU_H

#include <math.h>

#include "kernels/catalog.h"
#include "kernels/moe_internal.h"

static const char *const k_variants[] = { "moe_serial_cuda", "moe_fused_combine_cuda",
                                          "moe_chunked_overlap_cuda" };
#define NVARIANTS (int)(sizeof k_variants / sizeof k_variants[0])

/* One shape's tensors: seeded host inputs and their device copies. */
typedef struct dev_set {
    bk_tensor host[BK_MOE_NT], dev[BK_MOE_NT];
} dev_set;

/* The cpu test's 2^-8 (1 + |ref|) plus 2^-9 for the two rounding points the cuda
 * variants add (gate/up stored as bf16; the serial partial stored as bf16, |partial| < 1):
 * kernels/moe.c's bound. */
static inline double tol(double ref) { return 0x1p-8 * (1.0 + fabs(ref)) + 0x1p-9; }

#endif
