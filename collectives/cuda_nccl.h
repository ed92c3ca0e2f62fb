/* cuda_nccl.h - private to collectives/: the lane's NCCL communicator, created
 * non-blocking so that every wait on it is bounded. NCCL_NVLS_ENABLE=0 always. */
#ifndef BK_CUDA_NCCL_H
#define BK_CUDA_NCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runner/status.h"

#define BK_NCCL_ID_BYTES 128

/* Set NCCL_NVLS_ENABLE=0 (overwriting) and get a unique id (rank 0). */
bk_status bk__nccl_unique_id(unsigned char id[BK_NCCL_ID_BYTES], bk_err *err);

/* Init a non-blocking communicator on the current device; polls until it is
 * ready, aborting it after timeout_s. *comm is an ncclComm_t. */
bk_status bk__nccl_init(int rank, int world, const unsigned char id[BK_NCCL_ID_BYTES],
                        double timeout_s, void **comm, bk_err *err);

/* Wait (bounded) until the last non-blocking call on comm is done; relays
 * NCCL's asynchronous error. */
bk_status bk__nccl_settle(void *comm, double timeout_s, bk_err *err);

/* BK_ERR_PEER when NCCL reports an asynchronous error, else BK_OK. */
bk_status bk__nccl_async_error(void *comm, bk_err *err);

void bk__nccl_abort(void *comm);
void bk__nccl_destroy(void *comm);

/* In-place-or-not bf16 sum allreduce of `count` elements on `stream`
 * (capturable); settles the non-blocking call. */
bk_status bk_nccl_allreduce_bf16(void *comm, const void *send, void *recv, size_t count,
                                 void *stream, double timeout_s, bk_err *err);

#ifdef __cplusplus
}
#endif

#endif
