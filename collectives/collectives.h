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
 * release/acquire ordering. Waiters spin briefly (or for bk_shm_set_spin's time),
 * then sched_yield, then sleep (parked on a futex the peer's arrival wakes, at most
 * 1 ms at a time; never a long spin on an oversubscribed machine). BK_ERR_TIMEOUT
 * after timeout_s, after which the segment's barriers are out of step: destroy it. */
bk_status bk_shm_barrier(bk_shm *shm, double timeout_s, bk_err *err);

/* Let barrier waiters spin for up to spin_ns before they yield and park: for a lane
 * whose every rank has a core of its own, where spinning takes nothing from a peer
 * (0, the default, spins a few hundred pauses only). */
void bk_shm_set_spin(bk_shm *shm, uint64_t spin_ns);
/* Barriers from here on also end at end_ns (bk_now_ns's clock; 0, the default: no end), with
 * BK_ERR_TIMEOUT naming the rank waited for: an engine's waits end before its agent's
 * time-out does (bk_wait_bound). */
void bk_shm_set_end(bk_shm *shm, uint64_t end_ns);

/* Unmap peers, unmap our own segment and unlink it if connect did not. NULL is fine. */
void bk_shm_destroy(bk_shm *shm);

/* The segment name bk_shm_create gives (run_id, arm, rank): a caller that
 * knows a lane's run and arm can name every rank's segment without a blob. */
void bk_shm_name(const char *run_id, const char *arm, int rank, char name_out[BK_SHM_NAME_LEN]);

/* Unlink a segment by name (an engine that crashed before connect finished cannot
 * unlink its own; the agent that spawned it calls this after it exits). Absent is BK_OK. */
bk_status bk_shm_unlink_name(const char *name, bk_err *err);

/* ---- Where a lane's ranks are ----
 * Peer memory (the cpu backend's shared memory, CUDA IPC) needs every rank of a lane on
 * one host, and NCCL needs one GPU per rank. Every rank's blob carries its node (and, on
 * the cuda backend, its GPU's PCI bus id); bk_lane_where tells from them what the lane can
 * do. PCI bus ids repeat across identical hosts, so a bus id alone never says "same GPU". */

#define BK_NODE_LEN 200 /* "hostname boot BOOT_ID", NUL included */
#define BK_BUS_LEN 32

/* This process's node: its hostname and, where Linux gives one, its boot id (the pair
 * the topology tells hosts apart by). */
void bk_node_self(char node[BK_NODE_LEN]);

typedef struct bk_lane_where_t {
    int other;          /* the first rank on another node than `rank`'s, -1: one node */
    int pair_a, pair_b; /* the first two ranks (a < b) on one node with one bus id, or -1 */
} bk_lane_where_t;

/* From every rank's node (and bus id; buses NULL: not asked), what rank `rank` sees. Every
 * string NUL-terminated within its length. Ranks of a lane that spans nodes all see
 * other >= 0 (each has a peer elsewhere), so they agree that peer memory is out. */
void bk_lane_where(const char (*nodes)[BK_NODE_LEN], const char (*buses)[BK_BUS_LEN],
                   int world, int rank, bk_lane_where_t *out);

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
