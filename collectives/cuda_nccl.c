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
    /* NCCL's connections made in its init (bounded, on a thread of its own), not by the
     * first collective of each kind, which would wait on the host for a peer that is gone
     * with nothing to stop it (NCCL_RUNTIME_CONNECT's default, 1, connects at first use);
     * a user's own setting stays */
    if (setenv("NCCL_RUNTIME_CONNECT", "0", 0) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "setenv NCCL_RUNTIME_CONNECT=0: %s", strerror(errno));
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

/* A piece of NCCL work on a detached thread of its own, which the caller waits for with a
 * bound and otherwise gives up on: whoever of the two comes last frees the job (job_main
 * when the caller gave up, the caller after job_wait returned 1). A job is calloc'd with
 * this first in a struct of its own; `work` runs on the thread (the CUDA device is per
 * thread: `device` is the caller's), `left` after it when the caller gave up (to undo it;
 * may be NULL). */
typedef struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned, device;
    void (*work)(struct job *);
    void (*left)(struct job *);
} job;

static void job_free(job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *job_main(void *arg)
{
    job *j = arg;
    j->work(j);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    const int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        if (j->left)
            j->left(j);
        job_free(j);
    }
    return NULL;
}

/* Start j on its thread, with this thread's CUDA device: 0, or an errno (j is then the
 * caller's to free()). */
static int job_start(job *j)
{
    cudaError_t ce = cudaGetDevice(&j->device);
    if (ce != cudaSuccess)
        return ENODEV;
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (e != 0)
        return e;
    e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (e == 0)
        e = pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e != 0)
        return e;
    pthread_mutex_init(&j->mu, NULL);
    pthread_attr_t ta;
    pthread_t th;
    e = pthread_attr_init(&ta);
    if (e == 0) {
        pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
        e = pthread_create(&th, &ta, job_main, j);
        pthread_attr_destroy(&ta);
    }
    if (e != 0) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
    }
    return e;
}

/* Wait up to timeout_s for j's work: 1 when done (the caller then reads its results and
 * job_free()s it), 0 when not (given up: the thread frees it). */
static int job_wait(job *j, double timeout_s)
{
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
    const int done = j->done;
    if (!done)
        j->abandoned = 1;
    pthread_mutex_unlock(&j->mu);
    return done;
}

/* The communicator's init as a job. A blocking communicator, because a non-blocking one
 * (NCCL 2.28 here, earlier releases alike) runs every collective's group launch on a new
 * thread and returns ncclInProgress: in eager mode its host time (a thread start, the
 * settling) would land between the step's events, at world > 1 only (at world 1 NCCL
 * copies at once). The job bounds the init instead: a peer that never arrives leaves it
 * blocked, and the caller gives up after its time-out. */
typedef struct init_job {
    job base;
    int rank, world;
    ncclUniqueId uid;
    ncclComm_t comm;
    ncclResult_t r;
    cudaError_t ce;
} init_job;

static void init_work(job *b)
{
    init_job *j = (init_job *)b;
    j->r = ncclSystemError;
    j->ce = cudaSetDevice(b->device);
    if (j->ce == cudaSuccess) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        j->r = ncclCommInitRankConfig(&j->comm, j->world, j->uid, j->rank, &cfg);
    }
}

static void init_left(job *b) /* nobody will use this communicator */
{
    init_job *j = (init_job *)b;
    if (j->comm)
        ncclCommAbort(j->comm);
}

bk_status bk__nccl_init(int rank, int world, const unsigned char id[BK_NCCL_ID_BYTES],
                        double timeout_s, void **comm, bk_err *err)
{
    bk_status st = nvls_off(err);
    *comm = NULL;
    if (st != BK_OK)
        return st;
    init_job *j = calloc(1, sizeof *j);
    if (!j)
        return BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: out of memory");
    j->base.work = init_work;
    j->base.left = init_left;
    j->rank = rank;
    j->world = world;
    memcpy(j->uid.internal, id, BK_NCCL_ID_BYTES);
    int e = job_start(&j->base);
    if (e != 0) {
        free(j);
        return e == ENODEV ? BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: cudaGetDevice failed")
                           : BK_FAIL(err, BK_ERR_SYSTEM, "NCCL init: cannot start its "
                                     "thread: %s", strerror(e));
    }
    if (!job_wait(&j->base, timeout_s))
        return BK_FAIL(err, BK_ERR_TIMEOUT, "NCCL init (rank %d of %d) not done after %.1f s "
                       "(a peer never arrived?)", rank, world, timeout_s);
    ncclComm_t c = j->comm;
    ncclResult_t r = j->r;
    cudaError_t ce = j->ce;
    const int device = j->base.device;
    job_free(&j->base);
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

/* The communicator's end as a job: ncclCommFinalize (on a blocking communicator it waits
 * until its work has left this rank, including what the network proxy still sends to a
 * peer: an abort right away could cut a peer's last collective off), then ncclCommDestroy.
 * The caller waits 5 s at most and otherwise leaves it (the engine's process is about to
 * end). */
typedef struct end_job {
    job base;
    ncclComm_t comm;
} end_job;

static void end_work(job *b)
{
    end_job *j = (end_job *)b;
    (void)cudaSetDevice(b->device);
    if (ncclCommFinalize(j->comm) == ncclSuccess)
        ncclCommDestroy(j->comm);
    else
        ncclCommAbort(j->comm);
}

void bk__nccl_destroy(void *comm)
{
    if (!comm)
        return;
    end_job *j = calloc(1, sizeof *j);
    if (j) {
        j->base.work = end_work;
        j->comm = (ncclComm_t)comm;
    }
    if (!j || job_start(&j->base) != 0) {
        free(j); /* no thread: an abort, bounded, never waits for the peers */
        ncclCommAbort((ncclComm_t)comm);
        return;
    }
    if (job_wait(&j->base, 5.0)) /* else a peer that is gone: left to the process's end */
        job_free(&j->base);
}

#else
typedef int bk__cuda_nccl_unused; /* ISO C forbids an empty translation unit */
#endif
