/* engine.h - the engine process (`bracket engine`, never MPI) and the backend table it drives.
 * One engine runs one arm on one lane rank: rendezvous, peer memory, warm-up, timed
 * iterations per shape, samples pushed to the coordinator, final status, exit. */
#ifndef BK_ENGINE_H
#define BK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/collectives.h"
#include "kernels/catalog.h"
#include "plans/plan.h"
#include "runner/status.h"

/* Sink for one batch of per-iteration times (ns) of one shape: iterations
 * first .. first+n-1. The engine pushes it to the coordinator. */
typedef bk_status (*bk_emit_fn)(void *user, uint32_t shape, uint64_t first, const uint64_t *ns,
                                size_t n, bk_err *err);

/* One shape's work for a backend: time it (warm-up, then `iters` timed calls,
 * each preceded by a lane barrier so ranks start together) or audit it
 * (one eager, untimed call on the seeded inputs, outputs returned to host). */
typedef struct bk_shape_job {
    const bk_target *target;
    const bk_variant *variant; /* the variant serving this shape (after routing) */
    void *vstate;              /* its state from variant->create */
    const bk_shape *shape;
    int shape_index;
    uint64_t seed;
    int rank, world;
    int warmup, iters;
    int graph;                 /* 1: capture the timed step once and replay (cuda) */
    double timeout_s;          /* bound for every wait on a peer */
    uint64_t end_ns;           /* and no such wait goes past this (bk_now_ns; 0: no end):
                                * the arm's end less the time to report (bk_wait_bound) */
    bk_emit_fn emit;
    void *emit_user;
    uint64_t *t_first_ns;      /* set to bk_now_ns() at the first timed iteration if 0 */
    int check_inputs;          /* audit: fail if the call changed an input tensor */
    double rtol, atol;         /* the plan's quality tolerances (bk_engine_check_timed) */
} bk_shape_job;

typedef struct bk_backend_ctx bk_backend_ctx; /* each backend's own */

typedef struct bk_engine_backend {
    const char *name;
    /* device: the GPU ordinal this engine uses (cuda), ignored on cpu. */
    bk_status (*open)(bk_backend_ctx **ctx, int rank, int world, int device, bk_err *err);
    /* Create this rank's peer memory (peer_bytes) and describe it in blob
     * (<= BK_BLOB_MAX bytes): shm name, CUDA IPC handle, NCCL id on rank 0... */
    bk_status (*comm_create)(bk_backend_ctx *ctx, const char *run_id, const char *arm,
                             size_t peer_bytes, void *blob, size_t *blob_len, bk_err *err);
    /* Map peers from every rank's blob (blobs[r], lens[r]). */
    bk_status (*comm_connect)(bk_backend_ctx *ctx, unsigned char (*blobs)[BK_BLOB_MAX],
                              const size_t *lens, double timeout_s, bk_err *err);
    bk_status (*time_shape)(bk_backend_ctx *ctx, const bk_shape_job *job, bk_err *err);
    /* outs[k]: malloc'd host copy of output tensor k (target order among outputs),
     * bytes[k] its size. Caller frees. */
    bk_status (*audit_shape)(bk_backend_ctx *ctx, const bk_shape_job *job, void **outs,
                             size_t *bytes, bk_err *err);
    void (*close)(bk_backend_ctx *ctx);
    /* The backend's timing settings in effect after open (its environment variables, as
     * "name=value" words) into buf, NUL-terminated, whole words only (bk_env_words); "" when
     * it has none. For the record: every process's status carries them. */
    void (*describe)(const bk_backend_ctx *ctx, char *buf, size_t len);
} bk_engine_backend;

/* After the timed calls of a shape: timed[i] holds output i as the last timed call left it
 * (its outputs were poisoned just before that call, outside the timing), untimed[i] as an
 * untimed eager call on the same inputs then wrote it (host copies; inputs' entries
 * unused). Equal bits, or every bf16 element within the plan's rtol / atol of the untimed
 * call's and not NaN where that one is not: BK_OK; else BK_ERR_CONTRACT naming the
 * variant, rank, shape, tensor and first element. A variant that skips work, or computes
 * something else, when it is timed is caught here; the audit checks the untimed result. */
bk_status bk_engine_check_timed(const bk_shape_job *job, const bk_tensor *t,
                                const void *const *timed, const void *const *untimed,
                                bk_err *err);

/* After an audit's call: now[i] holds input i as the call left it, fresh[i] as the target
 * seeds it (host copies; outputs' entries unused). Bit for bit equal: BK_OK; else
 * BK_ERR_CONTRACT naming the variant, the first changed input, rank and shape. */
bk_status bk_engine_check_inputs(const bk_shape_job *job, const bk_tensor *t,
                                 const void *const *now, const void *const *fresh, bk_err *err);

extern const bk_engine_backend bk_engine_cpu;
#ifdef BK_HAVE_CUDA
extern const bk_engine_backend bk_engine_cuda;
#endif

/* The engine's own command line, as the agent builds it. */
typedef struct bk_engine_args {
    const char *plan_path;   /* the plan as run (JSON) */
    const char *run_id;
    const char *arm;         /* "B", "C", "B'", "A", "T" */
    const char *variant;     /* the arm's variant name (incumbent or candidate) */
    const char *rendezvous;  /* ZeroMQ endpoint of the coordinator's ROUTER */
    const char *samples;     /* ZeroMQ endpoint of the coordinator's PULL */
    int rank, world;         /* lane rank and lane size */
    int device;              /* GPU ordinal or -1 */
    bk_backend backend;
    int audit;               /* 1: untimed, eager, outputs sent (A and T) */
    int audit_graph;         /* audit through graph capture + replay (`bracket verify`) */
    int check_inputs;        /* audit: fail when a call mutates its inputs */
    int64_t seed;            /* >= 0: overrides the plan's workload seed */
    const char *keys_file;   /* CURVE keys (mode 0600) for the tcp transport, or NULL */
} bk_engine_args;

#endif
