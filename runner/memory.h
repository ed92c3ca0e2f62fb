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

/* bk_rank0_peak_bytes split by what holds it, for a refusal that names the larger part. */
typedef struct bk_rank0_peak {
    uint64_t total;       /* samples + outputs (bk_rank0_peak_bytes) */
    uint64_t samples;     /* sample slots, then the packed file or the scorer's arrays */
    uint64_t outputs;     /* the audits' output tensors, every shape */
    int top_shape;        /* the shape whose outputs are largest (-1: no shape) */
    uint64_t top_outputs; /* its share of outputs */
} bk_rank0_peak;
void bk_rank0_peak_split(const bk_plan *p, bk_rank0_peak *out);

/* The advice of a refusal whose largest shape s (named by `where`, its separator with it:
 * "workload.shapes[0], ") holds too much in an engine or a reference: "lower tokens x hidden
 * of the largest shape (WHERE tokens T x hidden H)", and for an MoE shape, whose experts'
 * weights its tensors hold too, experts x intermediate x hidden first. */
void bk_lower_shape_text(const bk_shape *s, const char *where, char *buf, size_t len);

/* The refusal of a plan that needs more than `have` bytes on rank 0, into buf: "rank 0
 * would hold about X for this plan (S for the samples ...; O for the audit outputs ...) but
 * FROM has H available; " (from: what bk_mem_available names, NULL or "" this host) then the advice that lowers the larger part:
 * workload.iters, protocol.repeats or the number of shapes for the samples, the largest
 * shape's tokens x hidden (named) for the audit outputs. */
void bk_rank0_too_big_text(const bk_plan *p, uint64_t have, const char *from, char *buf,
                           size_t len);

/* What `bracket verify` holds at its peak on its host for plan p at a lane of `world` ranks
 * (cuda: on the cuda backend): every rank's outputs of every shape that it gathers (twice on
 * cuda: eager and graph), and either its engines, one a rank, while they run (a cpu engine
 * holds a shape's tensors, a copy of its outputs for the last call's check and two for the
 * audit's message, and its peer memory; a cuda engine the two host copies), or, once they
 * are gone, the float64 reference of one rank's outputs with that rank's inputs. An estimate
 * from the target's tensor sizes, for a refusal before engines start (measured at 10000 x
 * 8192 on the cpu backend, lane of 2: 3.67 GiB of proportional set size, verify's and its
 * engines' summed, at the peak, for an estimate of 3.67 GiB); the cuda engines' GPU memory
 * is not counted. top_shape: the shape that weighs most (-1: none). Its engines' part
 * (`engine`, `engines`) is what an arm of `bracket run` holds on its lane's host too. */
typedef struct bk_verify_peak {
    uint64_t total;     /* outputs + the larger of engines and reference */
    uint64_t engines;   /* world x engine */
    uint64_t engine;    /* one engine, at its largest shape */
    uint64_t outputs;   /* the outputs verify gathers, every shape */
    uint64_t reference; /* the largest shape's reference */
    int top_shape;
} bk_verify_peak;
void bk_verify_peak_split(const bk_plan *p, int world, int cuda, bk_verify_peak *out);

/* What the host of rank 0 holds while an arm of plan p runs there on `cuda` (or cpu) engines:
 * rank 0's peak (bk_rank0_peak_bytes) and the arm's tp x ep engines (vp->engines, vp filled
 * by bk_verify_peak_split at that lane), summed without wrapping. */
uint64_t bk_arm_host_bytes(const bk_plan *p, int cuda, bk_verify_peak *vp);

/* The first shape of plan p (its target's tensors at a lane of `world` ranks) whose output
 * tensor, one rank's, is more than one tensor message carries (BK_WIRE_TENSOR_MAX): the
 * audits send each whole, so such a plan cannot be audited. Its index, with the refusal
 * ("workload.shapes[S] (tokens T, hidden H): ...") in why; -1 when every one fits. */
int bk_audit_msg_too_big(const bk_plan *p, int world, char *why, size_t len);

/* "1.5 GiB" from 1 GiB, "12.5 MiB" from 1 MiB, else "40.0 KiB"; returns buf. */
const char *bk_mem_text(uint64_t bytes, char *buf, size_t len);

/* The bytes this process may still allocate into *bytes: MemAvailable of
 * /proc/meminfo, or less when a memory cgroup of it, its own or one above it (Slurm limits
 * the job's and the step's), leaves less (v2 memory.max - memory.current, v1
 * memory.limit_in_bytes - memory.usage_in_bytes), each read where /proc/self/mountinfo says
 * its hierarchy is mounted; a cgroup no mount shows is not read. Returns 0 when
 * none of them can be read (no limit is known), else 1. `from` (may be NULL) names what
 * holds it: "this host", or "its memory cgroup DIR" (DIR: the cgroup's folder). */
int bk_mem_available(uint64_t *bytes, char *from, size_t from_len);

/* bk_mem_available reading `meminfo`, `self_cgroup` and `mountinfo` (which says where each
 * cgroup hierarchy is mounted, and from which cgroup down) in place of /proc/meminfo,
 * /proc/self/cgroup and /proc/self/mountinfo (for tests). */
int bk__mem_available_in(const char *meminfo, const char *self_cgroup, const char *mountinfo,
                         uint64_t *bytes, char *from, size_t from_len);

#endif
