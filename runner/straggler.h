/* straggler.h - one lane rank far slower than the rest of its lane: found per timed arm from
 * each rank's own samples, and written into the arm's reason (host and rank) of the record. */
#ifndef BK_STRAGGLER_H
#define BK_STRAGGLER_H

#include "runner/run.h"

/* A rank whose own cost is more than this many times the lane's lower median. */
#define BK_STRAGGLER_FACTOR 2.0

/* Pure: ranks whose cost[r] > factor x the lower median of cost[0..n). Writes their
 * indices to out (n entries at most), the median to *ref; returns how many. */
int bk_stragglers(const double *cost, int n, double factor, int *out, double *ref);

/* For a finished, ok, timed arm: each rank's cost (workload-weighted sum of its per-shape
 * lower medians); stragglers are appended to a->reason as "straggler: lane rank R (host H,
 * MPI rank M) ..." and printed on stderr. The arm stays ok: its critical path already
 * carries the slow rank, so the verdict follows from the samples. None where ranks of a
 * lane share a GPU (run->lane_gpu_shared): their own times are their turns on it. */
void bk_straggler_note(const bk_run *run, bk_arm_run *a);

#endif
