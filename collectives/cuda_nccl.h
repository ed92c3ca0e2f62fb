/* cuda_nccl.h - private to collectives/: the lane's NCCL communicator, a blocking one
 * (a collective's host time is NCCL's own launch, as in a serving stack), whose init is
 * bounded; its GPU work is waited for with bounds (bk_cuda_comm_wait), and aborted after
 * them. NCCL_NVLS_ENABLE=0 always. */
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

/* Init a blocking communicator on the current device, on a thread of its own; gives up
 * after timeout_s (BK_ERR_TIMEOUT: a peer never arrived), leaving that thread to abort
 * the communicator if its init ever returns. *comm is an ncclComm_t. */
bk_status bk__nccl_init(int rank, int world, const unsigned char id[BK_NCCL_ID_BYTES],
                        double timeout_s, void **comm, bk_err *err);

/* Wait (bounded) until comm leaves ncclInProgress; relays NCCL's asynchronous error. */
bk_status bk__nccl_settle(void *comm, double timeout_s, bk_err *err);

/* BK_ERR_PEER when NCCL reports an asynchronous error, else BK_OK. */
bk_status bk__nccl_async_error(void *comm, bk_err *err);

/* The minimum of every rank's *value, into *value: one int32 allreduce on a stream of its
 * own, waited for with a bound (BK_ERR_TIMEOUT: abort the communicator then). */
bk_status bk__nccl_min_i32(void *comm, int *value, double timeout_s, bk_err *err);

void bk__nccl_abort(void *comm);
/* The communicator's end: finalize then destroy, on a thread of its own, waited for 5 s at
 * most (a peer that is gone leaves it to the process's end); an abort when no thread can
 * be started. */
void bk__nccl_destroy(void *comm);

/* In-place-or-not bf16 sum allreduce of `count` elements on `stream` (capturable). */
bk_status bk_nccl_allreduce_bf16(void *comm, const void *send, void *recv, size_t count,
                                 void *stream, double timeout_s, bk_err *err);

#ifdef __cplusplus
}
#endif

#endif
