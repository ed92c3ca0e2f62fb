/* orchestrate.h - the MPI side of a run: rank 0 drives arms, the other ranks are agents. */
#ifndef BK_ORCHESTRATE_H
#define BK_ORCHESTRATE_H

#include "runner/agent.h"
#include "runner/coordinator.h"
#include "runner/run.h"

/* What every agent needs to start its engines. */
typedef struct bk_agent_env {
    const char *exe;         /* the bracket binary */
    const char *plan_path;   /* the plan as run, in the agent's private folder */
    const char *run_id;
    const char *ep_rv, *ep_samples;
    bk_backend backend;
    int device;              /* GPU ordinal for cuda, -1 otherwise */
    int mpi_rank;
    const char *host;
    double arm_s;
    int quiet;
    const char *keys_path;   /* CURVE key file (mode 0600) for tcp://, NULL with ipc:// */
} bk_agent_env;

/* Agents (rank != 0): serve arms until rank 0 says the run is over; returns
 * the run's exit status as rank 0 sent it. */
int bk_agent_loop(const bk_agent_env *env);

/* Rank 0: run arm idx (BK_ARM_IDX_*) on its lane, filling run->arms[idx]. */
bk_status bk_run_arm(bk_run *run, bk_coord *c, const bk_agent_env *env, int idx, bk_err *err);

/* Rank 0: tell the agents the run is over and its exit status (so mpirun
 * sees one exit status from every rank). */
void bk_run_finish_agents(int exit_status);

/* Remove what a failed engine of (arm round name, bk_arm_round_name; lane rank) may have
 * left (its shared-memory segment). */
void bk_cleanup_engine(const bk_agent_env *env, const char *arm, int lane_rank);
/* The same for every engine of every arm and round that ran: rank 0 does it before it ends
 * a terminated job, when agents it is about to abort may not have cleaned up yet (what is
 * on other hosts stays theirs). */
void bk_run_cleanup_all(const bk_run *run, const bk_agent_env *env);

/* auto -> cuda when this build has it and a GPU is visible, else cpu. */
bk_backend bk_resolve_backend(bk_backend want);

/* Why bk_write_private_plan failed with errno e, into buf: "cannot write the plan to a
 * private folder in $TMPDIR's value ($TMPDIR)" (else "/tmp"), the error, and what to do. */
const char *bk_private_plan_failed(int e, char *buf, size_t len);

/* Write the plan as run to DIR/plan.json in a fresh 0700 folder
 * $TMPDIR/bracket-<what>-XXXXXX (bk_janitor_mkdtemp). Before the folder exists, this
 * process's janitor (janitor.h; nothing when none runs) is given DIR/plan.json, then
 * DIR/<name> for each name of `also` (NULL-terminated, may be NULL, at most 8: files the
 * caller will write there), then DIR: so a rank killed outright at any moment leaves none
 * of them. 0 on success
 * (dir, path filled); -1 with errno set, nothing left behind and dir, path empty. */
int bk_write_private_plan(const char *what, const char *text, const char *const *also,
                          char *dir, size_t dlen, char *path, size_t plen);

#endif
