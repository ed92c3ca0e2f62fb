/* collectives.h - peer memory and barriers between the engine processes of one lane:
 * POSIX shared memory for the cpu backend (CUDA IPC lives in collectives/cuda_ipc.h),
 * and the rendezvous client that exchanges their handles through the coordinator. */
#ifndef BK_COLLECTIVES_H
#define BK_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "runner/status.h"

/* ---- POSIX shared-memory peer memory (cpu backend) ---- */

typedef struct bk_shm bk_shm; /* opaque */

/* Create this rank's segment: `bytes` of payload plus a flag page. The segment
 * name (a short string that fits BK_SHM_NAME_LEN) is written to `name_out`;
 * it is the blob the rendezvous carries to the peers. */
#define BK_SHM_NAME_LEN 64
bk_status bk_shm_create(const char *run_id, const char *arm, int rank, int world,
                        size_t bytes, bk_shm **out, char name_out[BK_SHM_NAME_LEN],
                        bk_err *err);

/* Map every peer's segment (names[r] for r in 0..world-1, names[rank] is our
 * own). Waits at most timeout_s for segments to appear. On success every rank has
 * mapped every segment and our own name is unlinked (the mappings stay), so a
 * crash from then on leaves nothing in /dev/shm. */
bk_status bk_shm_connect(bk_shm *shm, const char *const *names, double timeout_s,
                         bk_err *err);

void *bk_shm_local(bk_shm *shm);
void *bk_shm_peer(bk_shm *shm, int rank);
size_t bk_shm_bytes(const bk_shm *shm);
int bk_shm_rank(const bk_shm *shm);
int bk_shm_world(const bk_shm *shm);

/* Barrier among the lane's ranks through per-rank epoch counters with
 * release/acquire ordering. Waiters spin briefly, then sched_yield, then sleep
 * (parked on a futex the peer's arrival wakes, at most 1 ms at a time; never a
 * hot spin on an oversubscribed machine). BK_ERR_TIMEOUT after timeout_s, after
 * which the segment's barriers are out of step: destroy it. */
bk_status bk_shm_barrier(bk_shm *shm, double timeout_s, bk_err *err);

/* Unmap peers, unmap our own segment and unlink it if connect did not. NULL is fine. */
void bk_shm_destroy(bk_shm *shm);

/* The segment name bk_shm_create gives (run_id, arm, rank): a caller that
 * knows a lane's run and arm can name every rank's segment without a blob. */
void bk_shm_name(const char *run_id, const char *arm, int rank, char name_out[BK_SHM_NAME_LEN]);

/* Unlink a segment by name (an engine that crashed before connect finished cannot
 * unlink its own; the agent that spawned it calls this after it exits). Absent is BK_OK. */
bk_status bk_shm_unlink_name(const char *name, bk_err *err);

/* ---- Rendezvous client (ZeroMQ, wire format of runner/wire.h) ---- */

#define BK_BLOB_MAX 4096

/* Send hello (our blob) to the coordinator's rendezvous endpoint and wait for
 * the "peers" answer holding every lane rank's blob. blobs_out[r] receives
 * rank r's blob (caller-provided arrays of world entries, each BK_BLOB_MAX
 * bytes) and lens_out[r] its length. BK_ERR_TIMEOUT after timeout_s. */
bk_status bk_rendezvous(void *zmq_ctx, const char *endpoint, const char *run_id,
                        const char *arm, int rank, int world, const void *blob,
                        size_t blob_len, unsigned char (*blobs_out)[BK_BLOB_MAX],
                        size_t *lens_out, double timeout_s, bk_err *err);

/* As bk_rendezvous, as a CURVE client with the run's keys (runner/transport.h) when keys
 * is not NULL: the tcp transport between hosts. */
struct bk_curve_keys;
bk_status bk_rendezvous_secure(void *zmq_ctx, const char *endpoint,
                               const struct bk_curve_keys *keys, const char *run_id,
                               const char *arm, int rank, int world, const void *blob,
                               size_t blob_len, unsigned char (*blobs_out)[BK_BLOB_MAX],
                               size_t *lens_out, double timeout_s, bk_err *err);

#endif
