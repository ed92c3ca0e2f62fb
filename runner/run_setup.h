/* run_setup.h - internal to `bracket run` (cmd_run.c, run_setup.c): its options and rank 0's
 * two set-up steps before any arm starts. */
#ifndef BK_RUN_SETUP_H
#define BK_RUN_SETUP_H

#include <stddef.h>

#include "runner/coordinator.h"
#include "runner/run.h"
#include "runner/transport.h"
#include "topology/topology.h"

#define BK__RUN_MAX_SETS 64

typedef struct bk__run_opts {
    const char *plan;
    const char *out;
    const char *topology;
    const char *iface;  /* --iface: tcp on this interface even on one host */
    int port;           /* --port: the rendezvous port (samples on port + 1) */
    const char *sets[BK__RUN_MAX_SETS];
    int nsets;
    int quiet;
    int help;
} bk__run_opts;

/* Rank 0's first step: load the plan (with o's --set), resolve its backend, check it against
 * the catalog, serialise it into *plan_text (caller frees) and digest it; refuse a plan rank
 * 0 has no memory for or whose candidate serves nothing. 0, else the exit status with the
 * message in err. */
int bk__setup_plan(const bk__run_opts *o, bk_run *run, char **plan_text, bk_err *err);

/* Rank 0's lanes (part of the second step; tests call it alone): the baseline and candidate
 * lanes of run->plan on `places` (one per rank, from the gathered topology `topo`; host
 * names from run->hosts), into run->baseline, run->candidate, run->lane_size,
 * run->lane_signature and run->lane_note. A lane may span hosts only on the cuda backend when no variant the plan
 * calls on it needs CUDA peer memory; else BK_ERR_UNSUPPORTED naming the lane, two of its
 * ranks and their hosts, and why. *remote: 1 when a lane member is on another host than
 * rank 0 (the coordinator's endpoints must then be tcp). */
bk_status bk__pick_lanes(bk_run *run, const bk_topo *topo, const bk_rank_place *places,
                         int *remote, bk_err *err);

/* Rank 0's second step: lanes from the gathered topology, the transport (tcp with CURVE
 * when a lane is on another host or --iface says so), run id, output folder (checked for
 * room), the coordinator in *coord and topology.json. 0, else the exit status with the
 * message in err. */
int bk__setup_run(const bk__run_opts *o, bk_run *run, const bk_topo *topo,
                  const bk_rank_place *places, bk_coord **coord, bk_transport *tr, bk_err *err);

#endif
