/* memory.h - what rank 0 will hold for a plan's samples, and what this host (and its
 * cgroup, e.g. a Slurm job's) still has: a plan that cannot fit is refused before any
 * engine starts, not killed by the OOM killer halfway through its arms. */
#ifndef BK_MEMORY_H
#define BK_MEMORY_H

#include <stdint.h>

#include "plans/plan.h"

/* About how many bytes rank 0 holds at its peak for plan p (its target from the catalog,
 * lanes of arena.tp x arena.ep ranks):
 * every arm's sample slots (8 B per iteration, shape, lane rank and round, the audits'
 * too), then the more of the samples file being packed (up to 10 B per timed sample)
 * and the scorer's arrays (9 x 8 B per round, shape and iteration), and the audits'
 * output tensors from every lane rank. Measured: 70 MB over the process's own for an
 * estimate of 82 MB (docs/BENCHMARKS.md, "rank 0's memory"). */
uint64_t bk_rank0_peak_bytes(const bk_plan *p);

/* The bytes this process may still allocate into *bytes: MemAvailable of
 * /proc/meminfo, or less when a memory cgroup of it leaves less (v2 memory.max -
 * memory.current, v1 memory.limit_in_bytes - memory.usage_in_bytes). Returns 0 when
 * none of them can be read (no limit is known), else 1. */
int bk_mem_available(uint64_t *bytes);

#endif
