/* cuda_nccl.c - the lane's NCCL communicator: unique id, a blocking communicator whose
 * init is bounded (it runs on a thread of its own), bounded settling, abort. NVLink
 * multicast is always off (NCCL_NVLS_ENABLE=0). */
#ifdef BK_HAVE_CUDA

#include "collectives/cuda_nccl.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Poll the communicator's state until it leaves ncclInProgress (a blocking communicator
 * never stays there: this returns at once, relaying an asynchronous error). */
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

/* One communicator's init on a thread of its own. A blocking communicator, because a
 * non-blocking one (NCCL 2.28 here, earlier releases alike) runs every collective's group
 * launch on a new thread and returns ncclInProgress: in eager mode its host time (a
 * thread start, the settling) would land between the step's events, at world > 1 only
 * (at world 1 NCCL copies at once). The thread bounds the init instead: a peer that never
 * arrives leaves it blocked, and the caller gives up after its time-out. Whoever of the
 * two comes last frees it. */
typedef struct init_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned;
    int device, rank, world;
    ncclUniqueId uid;
    ncclComm_t comm;
    ncclResult_t r;
    cudaError_t ce;
} init_job;

static void init_job_free(init_job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *init_main(void *arg)
{
    init_job *j = arg;
    ncclComm_t c = NULL;
    ncclResult_t r = ncclSystemError;
    cudaError_t ce = cudaSetDevice(j->device); /* the device is per thread */
    if (ce == cudaSuccess) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        r = ncclCommInitRankConfig(&c, j->world, j->uid, j->rank, &cfg);
    }
    pthread_mutex_lock(&j->mu);
    j->comm = c;
    j->r = r;
    j->ce = ce;
    j->done = 1;
    const int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) { /* the caller gave up: nobody will use this communicator */
        if (c)
            ncclCommAbort(c);
        init_job_free(j);
    }
    return NULL;
}

bk_status bk__nccl_init(int rank, int world, const unsigned char id[BK_NCCL_ID_BYTES],
                        double timeout_s, void **comm, bk_err *err)
{
    bk_status st = nvls_off(err);
    *comm = NULL;
    if (st != BK_OK)
        return st;
    int device = 0;
    cudaError_t ce = cudaGetDevice(&device);
    if (ce != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: cudaGetDevice: %s",
                       cudaGetErrorString(ce));
    init_job *j = calloc(1, sizeof *j);
    if (!j)
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: out of memory");
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (e == 0) {
        e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        if (e == 0)
            e = pthread_cond_init(&j->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (e != 0) {
        free(j);
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: pthread_cond_init: %s", strerror(e));
    }
    pthread_mutex_init(&j->mu, NULL);
    j->device = device;
    j->rank = rank;
    j->world = world;
    memcpy(j->uid.internal, id, BK_NCCL_ID_BYTES);
    pthread_attr_t ta;
    pthread_t th;
    e = pthread_attr_init(&ta);
    if (e == 0) {
        pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&th, &ta, init_main, j);
        pthread_attr_destroy(&ta);
    }
    if (e != 0) {
        init_job_free(j);
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: pthread_create: %s", strerror(e));
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    const double whole = timeout_s > 0 ? timeout_s : 0;
    dl.tv_sec += (time_t)whole;
    dl.tv_nsec += (long)((whole - (double)(time_t)whole) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done && pthread_cond_timedwait(&j->cv, &j->mu, &dl) != ETIMEDOUT)
        ;
    if (!j->done) {
        j->abandoned = 1; /* the thread frees the job if its init ever returns */
        pthread_mutex_unlock(&j->mu);
        return BK_FAIL(err, BK_ERR_TIMEOUT, "NCCL init (rank %d of %d) not done after %.1f s "
                       "(a peer never arrived?)", rank, world, timeout_s);
    }
    pthread_mutex_unlock(&j->mu);
    ncclComm_t c = j->comm;
    ncclResult_t r = j->r;
    ce = j->ce;
    init_job_free(j);
    if (ce != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: cudaSetDevice(%d): %s", device,
                       cudaGetErrorString(ce));
    if (r != ncclSuccess) {
        if (c)
            ncclCommAbort(c);
        return BK_FAIL(err, BK_ERR_SYSTEM, "ncclCommInitRankConfig(rank %d of %d): %s", rank,
                       world, ncclGetErrorString(r));
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

bk_status bk__nccl_min_i32(void *comm, int *value, double timeout_s, bk_err *err)
{
    bk_status st = BK_OK;
    int32_t *d = NULL, *h = NULL; /* h pinned: a copy to pageable memory would block here */
    cudaStream_t s = NULL;
    cudaEvent_t ev = NULL;
    if (cudaMalloc((void **)&d, sizeof *d) != cudaSuccess ||
        cudaMallocHost((void **)&h, sizeof *h) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        st = BK_FAIL(err, BK_ERR_SYSTEM, "NCCL min: cannot allocate its word, stream or event");
        goto out;
    }
    *h = *value;
    if (cudaMemcpyAsync(d, h, sizeof *h, cudaMemcpyHostToDevice, s) != cudaSuccess) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "NCCL min: cudaMemcpyAsync failed");
        goto out;
    }
    ncclResult_t r = ncclAllReduce(d, d, 1, ncclInt32, ncclMin, (ncclComm_t)comm, s);
    if (r == ncclInProgress) {
        if ((st = bk__nccl_settle(comm, timeout_s, err)) != BK_OK)
            goto out;
    } else if (r != ncclSuccess) {
        st = BK_FAIL(err, BK_ERR_PEER, "ncclAllReduce(min): %s (%s)", ncclGetErrorString(r),
                     ncclGetLastError((ncclComm_t)comm));
        goto out;
    }
    if (cudaMemcpyAsync(h, d, sizeof *h, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
        cudaEventRecord(ev, s) != cudaSuccess) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "NCCL min: cannot copy the result back");
        goto out;
    }
    /* bounded: a peer that never joins the sum leaves the event pending */
    const uint64_t deadline = bk_now_ns() + (uint64_t)(timeout_s * 1e9);
    cudaError_t q;
    while ((q = cudaEventQuery(ev)) == cudaErrorNotReady) {
        if ((st = bk__nccl_async_error(comm, err)) != BK_OK)
            goto out;
        if (bk_now_ns() > deadline) {
            st = BK_FAIL(err, BK_ERR_TIMEOUT, "NCCL min: not done after %.1f s (a peer never "
                         "arrived?)", timeout_s);
            goto out;
        }
        bk_sleep_ns(20000);
    }
    if (q != cudaSuccess) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "NCCL min: %s", cudaGetErrorString(q));
        goto out;
    }
    *value = *h;
out:
    /* after a time-out the caller aborts the communicator; the stream is left to the
     * process's end then (destroying it would wait for NCCL's pending kernel) */
    if (ev && st == BK_OK)
        (void)cudaEventDestroy(ev);
    if (s && st == BK_OK)
        (void)cudaStreamDestroy(s);
    if (d && st == BK_OK)
        (void)cudaFree(d);
    if (h && st == BK_OK)
        (void)cudaFreeHost(h);
    return st;
}

void bk__nccl_abort(void *comm)
{
    if (comm)
        ncclCommAbort((ncclComm_t)comm);
}

/* The communicator's end on a thread of its own: ncclCommFinalize (on a blocking
 * communicator it waits until its work has left this rank, including what the network
 * proxy still sends to a peer: an abort right away could cut a peer's last collective off),
 * then ncclCommDestroy. The caller waits with a bound and otherwise leaves it (the
 * engine's process is about to end); whoever of the two comes last frees the job. */
typedef struct end_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned, device;
    ncclComm_t comm;
} end_job;

static void end_job_free(end_job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *end_main(void *arg)
{
    end_job *j = arg;
    (void)cudaSetDevice(j->device);
    if (ncclCommFinalize(j->comm) == ncclSuccess)
        ncclCommDestroy(j->comm);
    else
        ncclCommAbort(j->comm);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    const int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned)
        end_job_free(j);
    return NULL;
}

void bk__nccl_destroy(void *comm)
{
    if (!comm)
        return;
    end_job *j = calloc(1, sizeof *j);
    pthread_condattr_t ca;
    pthread_attr_t ta;
    pthread_t th;
    int ok = j && cudaGetDevice(&j->device) == cudaSuccess && pthread_condattr_init(&ca) == 0;
    if (ok) {
        ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&j->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (ok) {
        pthread_mutex_init(&j->mu, NULL);
        j->comm = (ncclComm_t)comm;
        ok = pthread_attr_init(&ta) == 0;
        if (ok) {
            pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&th, &ta, end_main, j) == 0;
            pthread_attr_destroy(&ta);
        }
        if (!ok)
            end_job_free(j);
    } else {
        free(j);
    }
    if (!ok) { /* no thread: an abort, bounded, never waits for the peers */
        ncclCommAbort((ncclComm_t)comm);
        return;
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += 5;
    pthread_mutex_lock(&j->mu);
    while (!j->done && pthread_cond_timedwait(&j->cv, &j->mu, &dl) != ETIMEDOUT)
        ;
    const int done = j->done;
    if (!done)
        j->abandoned = 1; /* a peer that is gone: left to the process's end */
    pthread_mutex_unlock(&j->mu);
    if (done)
        end_job_free(j);
}

#else
typedef int bk__cuda_nccl_unused; /* ISO C forbids an empty translation unit */
#endif
