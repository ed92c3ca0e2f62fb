/* cuda_nccl.c - the lane's NCCL communicator: unique id, non-blocking bounded init,
 * bounded settling of calls, abort. NVLink multicast is always off (NCCL_NVLS_ENABLE=0). */
#ifdef BK_HAVE_CUDA

#include "collectives/cuda_nccl.h"

#include <errno.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

static bk_status nvls_off(bk_err *err)
{
    if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "setenv NCCL_NVLS_ENABLE=0: %s", strerror(errno));
    return BK_OK;
}

bk_status bk__nccl_unique_id(unsigned char id[BK_NCCL_ID_BYTES], bk_err *err)
{
    ncclUniqueId uid;
    bk_status st = nvls_off(err);
    if (st != BK_OK)
        return st;
    ncclResult_t r = ncclGetUniqueId(&uid);
    if (r != ncclSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    memcpy(id, uid.internal, BK_NCCL_ID_BYTES);
    return BK_OK;
}

/* Poll the communicator's state until it leaves ncclInProgress. */
bk_status bk__nccl_settle(void *comm, double timeout_s, bk_err *err)
{
    const uint64_t deadline = bk_now_ns() + (uint64_t)(timeout_s * 1e9);
    uint64_t nap = 1000;
    for (;;) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)comm, &state);
        if (r != ncclSuccess)
            return BK_FAIL(err, BK_ERR_INTERNAL, "ncclCommGetAsyncError: %s",
                           ncclGetErrorString(r));
        if (state == ncclSuccess)
            return BK_OK;
        if (state != ncclInProgress)
            return BK_FAIL(err, BK_ERR_PEER, "NCCL: %s (%s)", ncclGetErrorString(state),
                           ncclGetLastError((ncclComm_t)comm));
        if (bk_now_ns() > deadline)
            return BK_FAIL(err, BK_ERR_TIMEOUT,
                           "NCCL still in progress after %.1f s (a peer never arrived?)",
                           timeout_s);
        bk_sleep_ns(nap);
        if (nap < 1000000)
            nap *= 2;
    }
}

bk_status bk__nccl_async_error(void *comm, bk_err *err)
{
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)comm, &state);
    if (r != ncclSuccess)
        return BK_FAIL(err, BK_ERR_INTERNAL, "ncclCommGetAsyncError: %s", ncclGetErrorString(r));
    if (state != ncclSuccess && state != ncclInProgress)
        return BK_FAIL(err, BK_ERR_PEER, "NCCL: %s (%s)", ncclGetErrorString(state),
                       ncclGetLastError((ncclComm_t)comm));
    return BK_OK;
}

bk_status bk__nccl_init(int rank, int world, const unsigned char id[BK_NCCL_ID_BYTES],
                        double timeout_s, void **comm, bk_err *err)
{
    ncclComm_t c = NULL;
    ncclUniqueId uid;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    bk_status st = nvls_off(err);
    *comm = NULL;
    if (st != BK_OK)
        return st;
    memcpy(uid.internal, id, BK_NCCL_ID_BYTES);
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c, world, uid, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (c)
            ncclCommAbort(c);
        return BK_FAIL(err, BK_ERR_SYSTEM, "ncclCommInitRankConfig(rank %d of %d): %s", rank,
                       world, ncclGetErrorString(r));
    }
    st = bk__nccl_settle(c, timeout_s, err);
    if (st != BK_OK) {
        ncclCommAbort(c);
        return st;
    }
    *comm = c;
    return BK_OK;
}

bk_status bk_nccl_allreduce_bf16(void *comm, const void *send, void *recv, size_t count,
                                 void *stream, double timeout_s, bk_err *err)
{
    ncclResult_t r = ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, (ncclComm_t)comm,
                                   (cudaStream_t)stream);
    if (r == ncclInProgress)
        return bk__nccl_settle(comm, timeout_s, err);
    if (r != ncclSuccess)
        return BK_FAIL(err, BK_ERR_PEER, "ncclAllReduce(%zu bf16): %s (%s)", count,
                       ncclGetErrorString(r), ncclGetLastError((ncclComm_t)comm));
    return BK_OK;
}

void bk__nccl_abort(void *comm)
{
    if (comm)
        ncclCommAbort((ncclComm_t)comm);
}

void bk__nccl_destroy(void *comm)
{
    if (!comm)
        return;
    /* Finalize flushes outstanding work; bounded (a dead peer -> abort). */
    ncclResult_t r = ncclCommFinalize((ncclComm_t)comm);
    if ((r == ncclSuccess || r == ncclInProgress) && bk__nccl_settle(comm, 5.0, NULL) == BK_OK) {
        ncclCommDestroy((ncclComm_t)comm);
        return;
    }
    ncclCommAbort((ncclComm_t)comm);
}

#else
typedef int bk__cuda_nccl_unused; /* ISO C forbids an empty translation unit */
#endif
