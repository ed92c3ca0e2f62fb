/* cuda_ipc.h - the cuda backend's lane communicator: peer memory mapped through CUDA IPC
 * with cross-GPU flags and a bounded barrier, plus the lane's NCCL communicator. */
#ifndef BK_CUDA_IPC_H
#define BK_CUDA_IPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runner/status.h"

#define BK_IPC_MAX_WORLD 8 /* ranks whose peer memory a lane maps (the IPC variants') */
#define BK_COMM_MAX_WORLD 256 /* ranks of a lane (BK_LANE_MAX): above 8, NCCL alone */
/* Flag slots: one per block of a collective kernel (the grid of every IPC
 * kernel is the same, bk_cuda_comm.grid <= BK_IPC_MAX_BLOCKS), plus one for
 * the lane barrier. */
#define BK_IPC_MAX_BLOCKS 256
#define BK_IPC_BARRIER_SLOT BK_IPC_MAX_BLOCKS
#define BK_IPC_SLOTS (BK_IPC_MAX_BLOCKS + 1)
/* Bytes in front of the payload in every rank's allocation (the flags). */
#define BK_IPC_FLAG_BYTES (64u * 1024u)

/* What a kernel needs to reach the lane's peer memory. Passed by value. The
 * flags of rank r live at flags[r][slot * BK_IPC_MAX_WORLD + src]: src writes
 * its epoch there with a system-scope release; r reads it with a
 * system-scope acquire. epochs[slot] is this rank's own count of barriers
 * passed on that slot (device memory, not shared). */
typedef struct bk_ipc_dev {
    void *data[BK_IPC_MAX_WORLD];      /* each rank's payload, NULL where unmapped */
    uint32_t *flags[BK_IPC_MAX_WORLD]; /* each rank's flag array */
    uint32_t *epochs;                  /* ours, BK_IPC_SLOTS entries */
    volatile int *fault;               /* host-mapped: [0], the fault word */
    uint64_t timeout_ns;               /* bound of every spin-wait */
    size_t bytes;                      /* payload bytes of every rank */
    int rank, world;
} bk_ipc_dev;

/* The fault word, fault[0]: a code in its low two bits and, for a device wait's TIMEOUT or
 * ENDED, the peer and slot it waited on above them (BK_IPC_FAULT_WORD). TIMEOUT: a device
 * wait gave up after timeout_ns. END: written by the host when its wait reached the comm's
 * end (bk_cuda_comm_set_end), asking every wait on the device to give up; a wait that sees it
 * answers ENDED. Code, peer and slot are one word, written by one store: two waits answering
 * at once leave one's whole answer, never one's code with the other's peer or slot. */
#define BK_IPC_FAULT_NONE 0
#define BK_IPC_FAULT_TIMEOUT 1
#define BK_IPC_FAULT_END 2
#define BK_IPC_FAULT_ENDED 3
#define BK_IPC_FAULT_WORD(code, peer, slot) ((((slot) * BK_IPC_MAX_WORLD + (peer)) << 2) | (code))
#define BK_IPC_FAULT_CODE(word) ((word) & 3)
#define BK_IPC_FAULT_PEER(word) (((word) >> 2) % BK_IPC_MAX_WORLD)
#define BK_IPC_FAULT_SLOT(word) (((word) >> 2) / BK_IPC_MAX_WORLD)

/* The lane communicator (call->comm on the cuda backend). Fields are read
 * by the variants; only this module writes them. */
typedef struct bk_cuda_comm {
    int rank, world, device;
    int grid;                /* blocks of every IPC collective kernel */
    int sms;                 /* multiprocessors of our device */
    bk_ipc_dev dev;          /* peer memory (always created) */
    int have_p2p;            /* every peer's payload is mapped */
    char p2p_why[512];       /* why not, when have_p2p == 0 */
    void *nccl;              /* ncclComm_t, NULL when unavailable */
    char nccl_why[256];      /* why not, when nccl == NULL */
    void *owner;             /* private state (allocation, mapped handles) */
    int defer_abort;         /* bk_cuda_comm_defer_abort's depth: graphs with NCCL calls */
    int abort_due;           /* a wait wanted NCCL aborted while deferred */
    uint64_t end_ns;         /* host waits end here too (0: no end; bk_cuda_comm_set_end) */
} bk_cuda_comm;

/* Create this rank's side on device `device` (already made current or not):
 * a cudaMalloc'd allocation of BK_IPC_FLAG_BYTES + peer_bytes with zeroed
 * flags, its CUDA IPC handle, and on rank 0 an NCCL unique id (after setting
 * NCCL_NVLS_ENABLE=0). The blob describing it (for the rendezvous) is written
 * to `blob` (capacity *blob_len in, length out). Caller owns *out
 * (bk_cuda_comm_destroy). */
bk_status bk_cuda_comm_create(int rank, int world, int device, size_t peer_bytes, void *blob,
                              size_t *blob_len, bk_cuda_comm **out, bk_err *err);

/* Map every peer from its blob (blobs[r] is rank r's, lens[r] its length) and
 * bring up NCCL unless ranks share a GPU (NCCL refuses that; comm->nccl stays
 * NULL and nccl_why says so). NCCL's init (a blocking communicator, initialised on a
 * thread of its own) and the lane's agreement after it are bounded by timeout_s together
 * (the agreement given at least 1 s). A peer whose memory cannot be mapped leaves
 * have_p2p = 0 on every rank of the lane (agreed through NCCL), and so does a lane over
 * several hosts (no handle from another host is opened; NCCL still runs there). */
bk_status bk_cuda_comm_connect(bk_cuda_comm *comm, const void *const *blobs,
                               const size_t *lens, double timeout_s, bk_err *err);

/* Enqueue a lane barrier on `stream` (a one-block kernel on the barrier slot
 * through peer memory, or a one-word NCCL allreduce without peer access).
 * Device waits are bounded by timeout_s; a time-out shows in
 * bk_cuda_comm_check. Safe inside stream capture. */
bk_status bk_cuda_comm_barrier(bk_cuda_comm *comm, void *stream, double timeout_s,
                               bk_err *err);

/* BK_ERR_TIMEOUT naming the peer and slot when a device wait ran out since
 * the last check (and clears the fault); BK_OK otherwise. */
bk_status bk_cuda_comm_check(bk_cuda_comm *comm, bk_err *err);

/* Wait for `event` (a cudaEvent_t) with a bound: polls the event, the device
 * fault word and NCCL's async error; BK_ERR_TIMEOUT after timeout_s without
 * completion, BK_ERR_PEER on NCCL's async error (NCCL is aborted then, either way, so
 * the stream can drain; while aborts are deferred, only marked due). */
bk_status bk_cuda_comm_wait(bk_cuda_comm *comm, void *event, double timeout_s, bk_err *err);

/* on = 1: from now on a wait that would abort NCCL only marks the abort due. For the time
 * CUDA graphs that captured the lane's NCCL calls exist: each holds a reference on the
 * communicator (NCCL's persistent plans), and ncclCommAbort waits until every such graph
 * is destroyed, so an abort inside a wait would never return. The caller destroys its
 * graph execs first (an exec still running is freed when it completes), then calls this
 * with on = 0, which aborts NCCL if a wait marked it due; then the stream can drain.
 * Calls nest (a variant's own graphs inside the engine's): the abort comes with the
 * outermost on = 0. comm may be NULL. */
void bk_cuda_comm_defer_abort(bk_cuda_comm *comm, int on);

/* Wait for everything queued on `stream` so far, with bk_cuda_comm_wait's bound and
 * checks (an event recorded on it). */
bk_status bk_cuda_comm_sync(bk_cuda_comm *comm, void *stream, double timeout_s, bk_err *err);

/* Host waits from here on (bk_cuda_comm_wait, _sync) of a lane of several ranks also end at
 * end_ns (bk_now_ns's clock; 0, the default: no end): an engine's waits end before its
 * agent's time-out does (bk_wait_bound). Such a wait then asks every wait on the device to
 * give up (fault word END; its spin bound, the timeout of bk_cuda_comm_set_timeout from
 * each wait's start, may be far later), gives the stream BK_END_GRACE_S (0.5 s) to drain,
 * and fails naming the peer a device wait was waiting on, saying the arm's time ran out.
 * The fault word stays set (what is queued after gives up too) until a later
 * bk_cuda_comm_check reads it. NCCL's kernels are aborted as at any time-out (the failure
 * then says NCCL's work had not ended). An eager NCCL barrier's enqueue (a blocking
 * communicator) is not cut. */
void bk_cuda_comm_set_end(bk_cuda_comm *comm, uint64_t end_ns);

/* Set the bound of device spin-waits for the kernels launched next. */
void bk_cuda_comm_set_timeout(bk_cuda_comm *comm, double timeout_s);

/* Free NCCL, unmap peers, free our allocation. NULL is fine. */
void bk_cuda_comm_destroy(bk_cuda_comm *comm);

/* ---- pieces (cuda_ipc.cu) used by bk_cuda_comm; exposed for tests ---- */

/* Launch the lane barrier kernel on `stream` (needs have_p2p). */
bk_status bk_cuda_ipc_barrier_launch(const bk_ipc_dev *dev, void *stream, bk_err *err);

#ifdef __cplusplus
}
#endif

#endif
