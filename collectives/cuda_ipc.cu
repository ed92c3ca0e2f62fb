/* cuda_ipc.cu - the cuda lane communicator: one IPC allocation per rank (flags + payload),
 * peers mapped from rendezvous blobs, the bounded lane barrier, fault checks, bounded waits. */
#include "collectives/cuda_ipc.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/cuda_ipc_dev.cuh"
#include "collectives/cuda_try.h"
#include "collectives/cuda_nccl.h"
extern "C" {
#include "collectives/collectives.h"
}

#define BK_IPC_MAGIC 0x626b6970u /* "bkip" */
#define BK_IPC_VERSION 2u /* 2: the node */

/* What one rank tells its peers (the rendezvous blob). */
typedef struct bk__ipc_blob {
    uint32_t magic, version;
    int32_t rank, world, device, pid;
    char node[BK_NODE_LEN]; /* bk_node_self: peer memory needs one node */
    char bus[BK_BUS_LEN];
    uint64_t bytes;
    int32_t grid;
    int32_t has_id;
    cudaIpcMemHandle_t handle;
    unsigned char nccl_id[BK_NCCL_ID_BYTES];
} bk__ipc_blob;

typedef struct bk__ipc_owner {
    void *base;                      /* our allocation */
    void *opened[BK_IPC_MAX_WORLD];  /* peers' allocations we opened */
    int *fault_host;                 /* host side of dev.fault */
    unsigned char nccl_id[BK_NCCL_ID_BYTES];
    char node[BK_COMM_MAX_WORLD][BK_NODE_LEN];
    char bus[BK_COMM_MAX_WORLD][BK_BUS_LEN];
    double timeout_s;
} bk__ipc_owner;

/* ---------------------------------------------------------------- kernels */

__global__ void bk_ipc_barrier_kernel(bk_ipc_dev v)
{
    bk_ipc_block_barrier(v, BK_IPC_BARRIER_SLOT);
}

/* --------------------------------------------------------------- launchers */

extern "C" bk_status bk_cuda_ipc_barrier_launch(const bk_ipc_dev *dev, void *stream,
                                                bk_err *err)
{
    bk_ipc_barrier_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(*dev);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "bk_ipc_barrier_kernel launch: %s",
                       cudaGetErrorString(e));
    return BK_OK;
}

/* ------------------------------------------------------------ host side */

extern "C" void bk_cuda_comm_set_timeout(bk_cuda_comm *comm, double timeout_s)
{
    bk__ipc_owner *o = (bk__ipc_owner *)comm->owner;
    o->timeout_s = timeout_s;
    comm->dev.timeout_ns = (uint64_t)(timeout_s * 1e9);
}

extern "C" void bk_cuda_comm_set_end(bk_cuda_comm *comm, uint64_t end_ns)
{
    if (comm)
        comm->end_ns = end_ns;
}

extern "C" bk_status bk_cuda_comm_create(int rank, int world, int device, size_t peer_bytes,
                                         void *blob, size_t *blob_len, bk_cuda_comm **out,
                                         bk_err *err)
{
    bk_status st = BK_OK;
    bk_cuda_comm *c = NULL;
    bk__ipc_owner *o = NULL;
    bk__ipc_blob *b = (bk__ipc_blob *)blob;
    cudaDeviceProp prop;
    *out = NULL;
    if (world < 1 || world > BK_COMM_MAX_WORLD || rank < 0 || rank >= world)
        return BK_FAIL(err, BK_ERR_INPUT, "cuda comm: rank %d of world %d (world must be 1..%d)",
                       rank, world, BK_COMM_MAX_WORLD);
    if (*blob_len < sizeof(*b))
        return BK_FAIL(err, BK_ERR_INTERNAL, "cuda comm: blob needs %zu bytes, have %zu",
                       sizeof(*b), *blob_len);
    c = (bk_cuda_comm *)calloc(1, sizeof(*c));
    o = (bk__ipc_owner *)calloc(1, sizeof(*o));
    if (!c || !o) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "cuda comm: out of memory");
        goto out;
    }
    c->owner = o;
    c->rank = rank;
    c->world = world;
    c->device = device;
    BK_CUDA_TRY(cudaSetDevice(device));
    BK_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    c->sms = prop.multiProcessorCount;
    c->grid = prop.multiProcessorCount < BK_IPC_MAX_BLOCKS ? prop.multiProcessorCount
                                                           : BK_IPC_MAX_BLOCKS;
    BK_CUDA_TRY(cudaDeviceGetPCIBusId(o->bus[rank], sizeof(o->bus[rank]), device));
    BK_CUDA_TRY(cudaMalloc(&o->base, BK_IPC_FLAG_BYTES + peer_bytes));
    BK_CUDA_TRY(cudaMemset(o->base, 0, BK_IPC_FLAG_BYTES));
    BK_CUDA_TRY(cudaMalloc((void **)&c->dev.epochs, BK_IPC_SLOTS * sizeof(uint32_t)));
    BK_CUDA_TRY(cudaMemset(c->dev.epochs, 0, BK_IPC_SLOTS * sizeof(uint32_t)));
    BK_CUDA_TRY(cudaHostAlloc((void **)&o->fault_host, 64, cudaHostAllocMapped));
    memset(o->fault_host, 0, 64);
    BK_CUDA_TRY(cudaHostGetDevicePointer((void **)&c->dev.fault, o->fault_host, 0));
    BK_CUDA_TRY(cudaDeviceSynchronize());
    c->dev.rank = rank;
    c->dev.world = world;
    c->dev.bytes = peer_bytes;
    if (world <= BK_IPC_MAX_WORLD) { /* else peer memory is never mapped: NCCL alone */
        c->dev.flags[rank] = (uint32_t *)o->base;
        c->dev.data[rank] = (char *)o->base + BK_IPC_FLAG_BYTES;
    }
    bk_cuda_comm_set_timeout(c, 30.0);

    memset(b, 0, sizeof(*b));
    b->magic = BK_IPC_MAGIC;
    b->version = BK_IPC_VERSION;
    b->rank = rank;
    b->world = world;
    b->device = device;
    b->pid = (int32_t)getpid();
    bk_node_self(b->node);
    memcpy(b->bus, o->bus[rank], sizeof(b->bus));
    b->bytes = peer_bytes;
    b->grid = c->grid;
    BK_CUDA_TRY(cudaIpcGetMemHandle(&b->handle, o->base));
    if (rank == 0) {
        BK_TRY(bk__nccl_unique_id(b->nccl_id, err));
        b->has_id = 1;
    }
    *blob_len = sizeof(*b);
    *out = c;
    c = NULL;
out:
    bk_cuda_comm_destroy(c);
    return st;
}

static bk_status check_blob(const bk_cuda_comm *c, const void *blob, size_t len, int r,
                            bk_err *err)
{
    const bk__ipc_blob *b = (const bk__ipc_blob *)blob;
    if (len != sizeof(*b) || b->magic != BK_IPC_MAGIC || b->version != BK_IPC_VERSION)
        return BK_FAIL(err, BK_ERR_PEER, "cuda comm: rank %d's blob is not a bracket cuda blob "
                       "(%zu bytes)", r, len);
    if (b->rank != r || b->world != c->world)
        return BK_FAIL(err, BK_ERR_PEER, "cuda comm: blob %d says rank %d of %d, expected %d of %d",
                       r, b->rank, b->world, r, c->world);
    if (b->bytes != c->dev.bytes || b->grid != c->grid)
        return BK_FAIL(err, BK_ERR_PEER, "cuda comm: rank %d has %llu peer bytes and grid %d, "
                       "we have %zu and %d (all ranks must match)", r,
                       (unsigned long long)b->bytes, b->grid, c->dev.bytes, c->grid);
    if (!memchr(b->node, 0, sizeof(b->node)) || !memchr(b->bus, 0, sizeof(b->bus)))
        return BK_FAIL(err, BK_ERR_PEER, "cuda comm: rank %d's blob has an unterminated node "
                       "or bus id", r);
    if (r == 0 && !b->has_id)
        return BK_FAIL(err, BK_ERR_PEER, "cuda comm: rank 0's blob has no NCCL id");
    return BK_OK;
}

extern "C" bk_status bk_cuda_comm_connect(bk_cuda_comm *c, const void *const *blobs,
                                          const size_t *lens, double timeout_s, bk_err *err)
{
    bk_status st = BK_OK;
    bk__ipc_owner *o = (bk__ipc_owner *)c->owner;
    const uint64_t t0 = bk_now_ns();
    int unmapped = -1, ipc = 0;
    char cuda_why[160] = "";
    bk_lane_where_t where;
    for (int r = 0; r < c->world; r++)
        BK_TRY(check_blob(c, blobs[r], lens[r], r, err));
    BK_CUDA_TRY(cudaSetDevice(c->device));
    for (int r = 0; r < c->world; r++) {
        const bk__ipc_blob *b = (const bk__ipc_blob *)blobs[r];
        bk_strlcpy(o->node[r], b->node, sizeof(o->node[r]));
        bk_strlcpy(o->bus[r], b->bus, sizeof(o->bus[r]));
    }
    bk_lane_where((const char(*)[BK_NODE_LEN])o->node, (const char(*)[BK_BUS_LEN])o->bus,
                  c->world, c->rank, &where);
    /* A handle from another node is never opened: it names memory there. Nor above
     * BK_IPC_MAX_WORLD ranks, where no IPC kernel runs. */
    ipc = where.other < 0 && c->world <= BK_IPC_MAX_WORLD;
    for (int r = 0; ipc && r < c->world; r++) {
        if (r == c->rank)
            continue;
        const bk__ipc_blob *b = (const bk__ipc_blob *)blobs[r];
        void *p = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&p, b->handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            if (unmapped < 0) {
                unmapped = r;
                snprintf(cuda_why, sizeof(cuda_why), "%s", cudaGetErrorString(e));
            }
            continue;
        }
        o->opened[r] = p;
        c->dev.flags[r] = (uint32_t *)p;
        c->dev.data[r] = (char *)p + BK_IPC_FLAG_BYTES;
    }
    c->have_p2p = ipc && unmapped < 0;
    if (c->world > BK_IPC_MAX_WORLD)
        snprintf(c->p2p_why, sizeof(c->p2p_why), "a lane of %d ranks (peer memory is mapped "
                 "for lanes of up to %d)", c->world, BK_IPC_MAX_WORLD);
    else if (where.other >= 0)
        snprintf(c->p2p_why, sizeof(c->p2p_why), "rank %d is on %s, rank %d on %s (CUDA IPC "
                 "needs the lane on one host)", c->rank, o->node[c->rank], where.other,
                 o->node[where.other]);
    else if (unmapped >= 0) {
        /* a task confined to its own GPU (Slurm --gpus-per-task with cgroup devices) cannot
         * open a peer GPU's handle; CUDA_VISIBLE_DEVICES alone does not stop it */
        int seen = 0;
        const int one = cudaGetDeviceCount(&seen) == cudaSuccess && seen == 1 &&
                        strcmp(o->bus[c->rank], o->bus[unmapped]) != 0;
        snprintf(c->p2p_why, sizeof(c->p2p_why), "rank %d (GPU %s) cannot map rank %d's "
                 "memory (GPU %s): %s%s", c->rank, o->bus[c->rank], unmapped, o->bus[unmapped],
                 cuda_why, !one ? "" : getenv("SLURM_JOB_ID")
                     ? " (this task sees one GPU: a Slurm job that gives each task its own "
                       "GPU, --gpus-per-task or --gpu-bind, may confine it there; give the "
                       "tasks the node's GPUs, --gpus-per-node)"
                     : " (this process sees one GPU: one confined to it, by a container or "
                       "cgroup, cannot reach a peer's)");
    }
    memcpy(o->nccl_id, ((const bk__ipc_blob *)blobs[0])->nccl_id, BK_NCCL_ID_BYTES);
    if (where.pair_a >= 0) {
        snprintf(c->nccl_why, sizeof(c->nccl_why), "ranks %d and %d share GPU %s (NCCL needs "
                 "one GPU per rank)", where.pair_a, where.pair_b, o->bus[where.pair_b]);
    } else {
        BK_TRY(bk__nccl_init(c->rank, c->world, o->nccl_id, timeout_s, &c->nccl, err));
        /* Peer memory is used by every rank of the lane or by none: a rank that could not
         * map a peer's (a mapping can fail on one side only) would otherwise run the NCCL
         * barrier while the others run the IPC one, and the lane would wait out its
         * time-out. The lane's NCCL agrees on it (no NCCL: the ranks share GPUs). */
        int all = c->have_p2p;
        /* within what is left of timeout_s (the caller's bound may be the arm's end), at
         * least 1 s, so a slow init does not leave the agreement no time at all */
        double left = timeout_s - (double)(bk_now_ns() - t0) / 1e9;
        left = left < 1.0 ? (timeout_s < 1.0 ? timeout_s : 1.0) : left;
        if (c->world > 1 && (st = bk__nccl_min_i32(c->nccl, &all, left, err)) != BK_OK) {
            bk__nccl_abort(c->nccl);
            c->nccl = NULL;
            goto out;
        }
        if (c->have_p2p && !all) {
            c->have_p2p = 0;
            snprintf(c->p2p_why, sizeof(c->p2p_why), "another rank of the lane cannot map a "
                     "peer's memory (that rank's own reason names the GPUs)");
        }
    }
out:
    return st;
}

extern "C" bk_status bk_cuda_comm_barrier(bk_cuda_comm *c, void *stream, double timeout_s,
                                          bk_err *err)
{
    if (c->world == 1)
        return BK_OK;
    bk_cuda_comm_set_timeout(c, timeout_s);
    if (c->have_p2p)
        return bk_cuda_ipc_barrier_launch(&c->dev, stream, err);
    if (c->nccl) {
        /* One word of the flag page, ours alone (peers never touch slot 0's
         * unused tail): the sum's value is never read. */
        bk__ipc_owner *o = (bk__ipc_owner *)c->owner;
        uint16_t *word = (uint16_t *)((char *)o->base + BK_IPC_FLAG_BYTES - 64);
        return bk_nccl_allreduce_bf16(c->nccl, word, word, 1, stream, timeout_s, err);
    }
    return BK_FAIL(err, BK_ERR_UNSUPPORTED, "cuda lane barrier: no peer access (%s) and no "
                   "NCCL (%s)", c->p2p_why, c->nccl_why);
}

/* The fault word (its code, and the peer and slot a device wait waited on) as the failure it
 * is. waited_s: how long the host waited, for a wait the comm's end cut (ENDED, END). */
static bk_status fault_status(const bk_cuda_comm *c, int word, double waited_s, bk_err *err)
{
    const bk__ipc_owner *o = (const bk__ipc_owner *)c->owner;
    const int code = BK_IPC_FAULT_CODE(word);
    const int peer = BK_IPC_FAULT_PEER(word), slot = BK_IPC_FAULT_SLOT(word);
    char at[48]; /* "the lane barrier" or "the barrier on block 3" */
    if (slot == BK_IPC_BARRIER_SLOT)
        snprintf(at, sizeof at, "the lane barrier");
    else
        snprintf(at, sizeof at, "the barrier on block %d", slot);
    if (code == BK_IPC_FAULT_TIMEOUT)
        return BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: peer rank %d never arrived at %s within "
                       "%.3f s", c->rank, peer, at, o->timeout_s);
    if (code == BK_IPC_FAULT_ENDED)
        return BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: peer rank %d did not arrive at %s within "
                       "%.1f s (" BK_ARM_END_SAID ")", c->rank, peer, at, waited_s);
    if (code == BK_IPC_FAULT_END) /* asked, and no wait on the device answered */
        return BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: the GPU's work had not ended after "
                       "%.1f s (" BK_ARM_END_SAID "; a peer never arrived?)", c->rank, waited_s);
    return BK_FAIL(err, BK_ERR_INTERNAL, "rank %d: device fault word %d", c->rank, word);
}

extern "C" bk_status bk_cuda_comm_check(bk_cuda_comm *c, bk_err *err)
{
    bk__ipc_owner *o = (bk__ipc_owner *)c->owner;
    /* read and cleared at once: a fault written between a read and a clear is not lost */
    const int word = __atomic_exchange_n(o->fault_host, BK_IPC_FAULT_NONE, __ATOMIC_SEQ_CST);
    if (word == BK_IPC_FAULT_NONE)
        return BK_OK;
    return fault_status(c, word, 0.0, err);
}

/* NCCL's kernels spin until aborted: abort, so the stream can drain; while graphs that
 * captured NCCL calls may exist, mark it due instead (bk_cuda_comm_defer_abort) */
static void abort_nccl(bk_cuda_comm *c)
{
    if (!c->nccl)
        return;
    if (c->defer_abort) {
        c->abort_due = 1;
        return;
    }
    bk__nccl_abort(c->nccl);
    c->nccl = NULL;
}

extern "C" void bk_cuda_comm_defer_abort(bk_cuda_comm *c, int on)
{
    if (!c)
        return;
    if (on)
        c->defer_abort++;
    else if (c->defer_abort > 0)
        c->defer_abort--;
    if (!c->defer_abort && c->abort_due) {
        c->abort_due = 0;
        abort_nccl(c);
    }
}

/* How long a wait cut at the comm's end gives the device to answer END and drain. */
#define BK_END_GRACE_S 0.5

/* A wait that reached the comm's end (the arm's, less the time kept to report), `event` not
 * yet complete after waited_s. Every wait on the device is asked to give up (END), so the
 * stream drains and the engine reports before its agent's time-out (the device's own spin
 * bound, rendezvous_s from each wait's start, may be far later); a device wait that sees it
 * names the peer it waits on. The fault word is left set, so that what is queued
 * after `event` gives up too; a later bk_cuda_comm_check reads and clears it. nccl: NCCL
 * was aborted (or its abort marked due) as this wait ended. */
static bk_status end_wait(bk_cuda_comm *c, cudaEvent_t event, double waited_s, int nccl,
                          bk_err *err)
{
    bk__ipc_owner *o = (bk__ipc_owner *)c->owner;
    int none = BK_IPC_FAULT_NONE;
    /* not over a device's time-out it has just written (that one names the peer too) */
    (void)__atomic_compare_exchange_n(o->fault_host, &none, BK_IPC_FAULT_END, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    const uint64_t until = bk_now_ns() + (uint64_t)(BK_END_GRACE_S * 1e9);
    cudaError_t e;
    while ((e = cudaEventQuery(event)) == cudaErrorNotReady && bk_now_ns() < until)
        bk_sleep_ns(100000);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        return BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: waiting for the GPU at the arm's end: %s",
                       c->rank, cudaGetErrorString(e));
    volatile int *f = o->fault_host;
    const int word = f[0];
    if (word == BK_IPC_FAULT_END && nccl) /* NCCL's kernels wait for peers, not ours */
        return BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: the lane's NCCL work had not ended after "
                       "%.1f s (" BK_ARM_END_SAID "; a peer never arrived?): NCCL aborted",
                       c->rank, waited_s);
    if (word == BK_IPC_FAULT_END && e == cudaSuccess) /* no wait answered: it ended */
        return BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: the GPU's work ended only after %.1f s, "
                       "at the arm's end (" BK_ARM_END_SAID ")", c->rank, waited_s);
    return fault_status(c, word, waited_s, err);
}

extern "C" bk_status bk_cuda_comm_wait(bk_cuda_comm *c, void *event, double timeout_s,
                                       bk_err *err)
{
    bk_status st = BK_OK;
    int cut;
    /* the end cuts waits on peers: at world 1 this waits on the GPU's own work alone, as
     * the shm side has no barrier to cut there */
    timeout_s = bk_wait_bound(c->world > 1 ? c->end_ns : 0, timeout_s, &cut);
    const uint64_t deadline = bk_now_ns() + (uint64_t)(timeout_s * 1e9);
    uint64_t nap = 2000;
    for (;;) {
        cudaError_t e = cudaEventQuery((cudaEvent_t)event);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: waiting for the GPU: %s", c->rank,
                         cudaGetErrorString(e));
            goto out;
        }
        if (c->nccl && (st = bk__nccl_async_error(c->nccl, err)) != BK_OK) {
            abort_nccl(c);
            goto out;
        }
        if (bk_now_ns() > deadline) {
            /* Abort NCCL so its kernels stop; our own kernels stop by themselves, and at
             * the comm's end are asked to stop now (end_wait) */
            const int nccl = c->nccl != NULL;
            abort_nccl(c);
            if (cut) {
                st = end_wait(c, (cudaEvent_t)event, timeout_s, nccl, err);
                goto out;
            }
            st = BK_FAIL(err, BK_ERR_TIMEOUT, "rank %d: the GPU made no progress for %.1f s "
                         "(a peer never arrived?)", c->rank, timeout_s);
            goto out;
        }
        bk_sleep_ns(nap);
        if (nap < 200000)
            nap *= 2;
    }
    BK_TRY(bk_cuda_comm_check(c, err));
out:
    return st;
}

extern "C" bk_status bk_cuda_comm_sync(bk_cuda_comm *c, void *stream, double timeout_s,
                                       bk_err *err)
{
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: cudaEventCreate failed", c->rank);
    bk_status st = BK_OK;
    if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess)
        st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: cudaEventRecord failed", c->rank);
    else
        st = bk_cuda_comm_wait(c, ev, timeout_s, err);
    (void)cudaEventDestroy(ev);
    return st;
}

extern "C" void bk_cuda_comm_destroy(bk_cuda_comm *c)
{
    if (!c)
        return;
    bk__ipc_owner *o = (bk__ipc_owner *)c->owner;
    (void)cudaSetDevice(c->device); /* the NCCL end's thread takes this thread's device */
    if (c->nccl)
        bk__nccl_destroy(c->nccl);
    if (o) {
        for (int r = 0; r < BK_IPC_MAX_WORLD; r++)
            if (o->opened[r])
                (void)cudaIpcCloseMemHandle(o->opened[r]);
        if (o->base)
            (void)cudaFree(o->base);
        if (o->fault_host)
            (void)cudaFreeHost(o->fault_host);
        free(o);
    }
    if (c->dev.epochs)
        (void)cudaFree(c->dev.epochs);
    free(c);
}
