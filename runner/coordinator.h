/* coordinator.h - rank 0's ZeroMQ side: the rendezvous (ROUTER) and the sample sink (PULL)
 * of one run, and what each arm's engines sent. */
#ifndef BK_COORDINATOR_H
#define BK_COORDINATOR_H

#include <stddef.h>
#include <stdint.h>

#include "runner/agent.h"
#include "runner/status.h"
#include "runner/transport.h"
#include "runner/wire.h"

#define BK_ARM_NAMES 5
/* the arms' indices are also the order they run in: B, C, B', then the audits A and T */
enum { BK_ARM_IDX_B = 0, BK_ARM_IDX_C, BK_ARM_IDX_BP, BK_ARM_IDX_A, BK_ARM_IDX_T };
extern const char *const bk_arm_names[BK_ARM_NAMES]; /* "B", "C", "B'", "A", "T" */

#define BK_HOST_LEN 64

/* What one lane rank of one arm produced. */
typedef struct bk_rank_data {
    int mpi_rank;
    char host[BK_HOST_LEN];
    int hello;              /* its hello reached the rendezvous */
    int64_t pid;
    int status_seen, status_ok;
    int broke_contract;     /* its status: the arm's variant broke its contract (BK_ERR_CONTRACT) */
    char status_msg[512];
    uint64_t samples_claimed;   /* as its status says */
    uint64_t samples_got;
    uint64_t t_first_ns;        /* engine start -> first timed iteration */
    char settings[sizeof ((bk_msg *)0)->settings]; /* the engine's timing settings (status) */
    uint64_t routed;            /* its status: bit i, shape i served by the incumbent */
    int routed_known;           /* routed came (a status; a record from before it: 0) */
    uint64_t t_first_sample_ns; /* arm start (rank 0) -> its first samples arrived */
    uint64_t **ns;              /* [shape][iter], UINT64_MAX where missing */
    size_t *ns_seen;            /* [shape] samples received */
    void **tensors;             /* [shape * noutputs] (audit arms) */
    size_t *tensor_len;
    bk_proc proc;               /* as its agent reported it */
    int reported;               /* its agent's report arrived */
    int agent_signal;           /* a SIGTERM / SIGINT its agent got itself (not recorded) */
    double spawn_s;             /* spawn -> exit, seconds */
} bk_rank_data;

typedef struct bk_arm_run {
    int idx;                 /* BK_ARM_IDX_* */
    const char *name;        /* "B"...; a round's own name on the wire: bk_arm_round_name */
    int rounds;              /* runs in fresh processes (protocol.repeats; audits: 1), 0 = 1 */
    char variant[128];
    int audit;
    int world;
    int *lane;               /* MPI rank of each lane rank */
    bk_rank_data *r;         /* [rounds x world]: round k's lane rank i at k * world + i */
    int ran;                 /* the arm was started */
    int ok;
    int terminated;          /* a SIGTERM / SIGINT reached rank 0 while it ran */
    char reason[1024];
    uint64_t t_start_ns, t_end_ns;
} bk_arm_run;

typedef struct bk_coord bk_coord; /* opaque */

/* Bind the rendezvous and sample endpoints of run `run_id` in a private
 * 0700 directory (ipc://), given with its sockets to this process's janitor before it
 * exists (bk_janitor_mkdtemp; removed by bk_coord_close too). nshapes, iters and noutputs size the sample and
 * tensor tables of each arm. */
bk_status bk_coord_open(bk_coord **out, const char *run_id, int nshapes, int iters,
                        int noutputs, bk_err *err);
/* As bk_coord_open, on the transport t (NULL or t->tcp == 0: ipc://). With tcp, both
 * sockets are CURVE servers with t->keys bound to t->addr (t->port and t->port + 1, or
 * any free ports when 0), and only clients holding the run's client key pass (ZAP);
 * refused handshakes are counted (bk_coord_transport_stats) and also as wire
 * rejections (auth: FOREIGN, garbage or a wrong server key: MALFORMED). A port in use
 * is BK_ERR_INPUT naming it. */
bk_status bk_coord_open_ex(bk_coord **out, const char *run_id, int nshapes, int iters,
                           int noutputs, const bk_transport *t, bk_err *err);
const bk_transport_stats *bk_coord_transport_stats(const bk_coord *c);

struct bk_target;
struct bk_shape;
/* What the audit arms' tensor messages must be: tg's output tensors (the name picks the
 * slot), of `dtype`, each of the bytes tg gives shapes[shape] on the arm's world (the
 * shapes are copied: nshapes of them). A tensor naming another output, of another dtype or
 * length, or sent twice, is rejected as BAD_FIELD and counted, never stored; until this is
 * called, every tensor is rejected so. BK_ERR_INPUT when tg's outputs are not the noutputs
 * opened. */
bk_status bk_coord_set_outputs(bk_coord *c, const struct bk_target *tg,
                               const struct bk_shape *shapes, const char *dtype, bk_err *err);

const char *bk_coord_rendezvous_ep(const bk_coord *c);
const char *bk_coord_samples_ep(const bk_coord *c);

/* An arm's rounds: 0 (an arm set up before rounds, e.g. by `bracket verify`) is one. */
static inline int bk_arm_rounds(const bk_arm_run *a)
{
    return a->rounds > 1 ? a->rounds : 1;
}

/* Make `arm` the arm whose messages are accepted (others are rejected as
 * WRONG_ARM and counted). Allocates its per-rank tables (arm->r[0 .. world)). */
bk_status bk_coord_begin_arm(bk_coord *c, bk_arm_run *arm, bk_err *err);
/* No arm is current any more: every message is rejected as WRONG_ARM until the next
 * bk_coord_begin_arm (the arm given there may go away). */
void bk_coord_end_arm(bk_coord *c);

/* The name round `round` (0-based) of arm `idx` goes by on the wire, in the engines'
 * arguments and in shared-memory names: "B" for round 0 (so one round is as before
 * rounds existed), "B#2", "B'#16"... after it. */
const char *bk_arm_round_name(int idx, int round, char buf[BK_ARM_LEN]);

/* Serve the sockets for up to timeout_ms: answer the rendezvous once every
 * lane rank said hello, store samples, tensors and statuses. Returns the
 * number of messages handled. */
int bk_coord_poll(bk_coord *c, int timeout_ms);

/* 1 when every lane rank of the current arm sent its final status. */
int bk_coord_all_status(const bk_coord *c);

/* 1 when every lane rank of the current arm sent its final status and, in a timed arm, as
 * many samples came as its status says it sent, in an audit every output tensor of a rank
 * whose status is a success (samples and tensors sent again after a connection broke may
 * still be on their way when the first status arrived). */
int bk_coord_all_in(const bk_coord *c);

/* Samples received so far by lane rank 0 (progress). */
uint64_t bk_coord_progress(const bk_coord *c, int *shape_out);

const bk_wire_stats *bk_coord_stats(const bk_coord *c);

/* Close sockets and context, remove the private directory. */
void bk_coord_close(bk_coord *c);

/* Free an arm's tables (every round's). */
void bk_arm_free(bk_arm_run *arm, int nshapes, int noutputs);

#endif
