/* cuda_try.h - BK_CUDA_TRY(call): run a CUDA runtime call; on failure record the call's
 * text and CUDA's message in `err` (BK_ERR_SYSTEM) and `goto out` with `st` set, the
 * convention of runner/status.h's BK_TRY. For C and CUDA files built with the toolkit. */
#ifndef BK_CUDA_TRY_H
#define BK_CUDA_TRY_H

#include <cuda_runtime.h>

#include "runner/status.h"

#define BK_CUDA_TRY(call)                                                                  \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s", #call, cudaGetErrorString(e_));     \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

#endif
