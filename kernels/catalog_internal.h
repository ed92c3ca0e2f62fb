/* catalog_internal.h - what the kernels/ files share behind kernels/catalog.h: the per-file
 * variant tables the catalog lists, seeded input streams, and the allreduce_residual_rmsnorm
 * target's tensor indices and peer-memory layout. Not a public header. */
#ifndef BK_CATALOG_INTERNAL_H
#define BK_CATALOG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/catalog.h"

/* ---- registration: adding a variant = one line in its file's table ---- */

/* Each variant file exports one table terminated by an entry whose name is
 * NULL; catalog.c lists the tables (and the targets) once. */
extern const bk_target bk__ar_rmsnorm_target;
extern const bk_variant bk__ar_rmsnorm_cpu_variants[];
extern const bk_variant bk__ar_rmsnorm_diag_variants[];
extern const bk_target bk__moe_target;               /* kernels/moe.c */
extern const bk_variant bk__moe_cpu_variants[];      /* kernels/moe_cpu.c */
#ifdef BK_HAVE_CUDA
extern const bk_variant bk__moe_cuda_variants[];     /* kernels/moe_cuda.c */
#endif

/* ---- domains: what catalog.c and catalog_plan.c share ---- */

/* "cpu", "cuda" or "auto". */
const char *bk__backend_name(bk_backend b);
/* 1 when `dtype` is an item of the comma list. */
int bk__list_has(const char *list, const char *dtype);
/* "1-8" or "1,2,4" from a worlds mask. */
void bk__worlds_text(uint32_t mask, char *buf, size_t len);
/* What a domain says of the whole lane rather than of one shape: LANE_OK when the backend,
 * dtype and world size lie inside it, else which of them does not (and `why` says it). */
enum { LANE_OK, LANE_BACKEND, LANE_DTYPE, LANE_WORLD };
int bk__lane_outside(const bk_domain *d, int world, const char *dtype, bk_backend backend,
                     char *why, size_t why_len);

/* ---- seeded inputs: a counter-based stream (splitmix64) ---- */

static inline uint64_t bk__splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The key of one tensor's stream; element i's bits are splitmix64(key + i).
 * Pass rank 0 for tensors that must not depend on the rank. */
static inline uint64_t bk__stream_key(uint64_t seed, int shape_index, int rank, int tensor)
{
    uint64_t k = bk__splitmix64(seed);
    k = bk__splitmix64(k ^ (uint64_t)(uint32_t)shape_index);
    k = bk__splitmix64(k ^ ((uint64_t)(uint32_t)rank << 20));
    return bk__splitmix64(k ^ ((uint64_t)(uint32_t)tensor << 40));
}

/* Uniform in [0, 1) with 24 bits, element i of the stream. */
static inline float bk__stream_unit(uint64_t key, uint64_t i)
{
    return (float)(bk__splitmix64(key + i) >> 40) * 0x1p-24f;
}

/* ---- collective.allreduce_residual_rmsnorm ---- */

#define BK_AR_TARGET "collective.allreduce_residual_rmsnorm"
enum { BK_AR_X = 0, BK_AR_RESIDUAL, BK_AR_GAMMA, BK_AR_OUT, BK_AR_RESIDUAL_OUT, BK_AR_NT };
#define BK_AR_EPS 1e-6

/* Peer-memory layout of one rank's shm payload for a shape: the rank's x (bf16)
 * at x_off, then the reduced fp32 chunk it owns in the two-pass algorithm at
 * red_off (chunk = ceil(tokens*hidden / world) elements). */
typedef struct bk__ar_layout {
    size_t n;     /* tokens * hidden */
    size_t chunk; /* elements one rank reduces */
    size_t x_off, red_off, bytes;
} bk__ar_layout;
bk__ar_layout bk__ar_layout_of(const bk_shape *s, int world);

/* Check a call's tensors against the target (count, sizes, data present). */
bk_status bk__ar_check_call(const bk_call *call, bk_err *err);

/* ---- diagnostic variants: test hooks ---- */

/* What the diagnostic wrapper v wraps with these params (NULL: none) on backend cpu or
 * cuda: *base the variant it calls (params.base, or the backend's default base), *fallback
 * the default base it calls instead where *base's domain excludes the call (NULL: none,
 * such a call fails with the base's error), *dflt the backend's default base's name (NULL:
 * none there). Returns 0, all three NULL, when v is a real variant or the params name no
 * base it could wrap (its create says why). */
int bk__diag_bases(const bk_variant *v, const json_t *params, bk_backend backend,
                   const bk_variant **base, const bk_variant **fallback, const char **dflt);

/* When v is the `crash` diagnostic: *at_iter is the timed iteration its params make it
 * abort at, and the result is 2 when that is the default (params without at_iter), else 1
 * (-1 in *at_iter when at_iter is not an integer: create refuses it). 0 for any other v. */
int bk__diag_crash_at(const bk_variant *v, const json_t *params, long long *at_iter);

/* The last call's base time and the wait `slowed` asked for (ns): fraction x the
 * unit of bk__diag_unit_step at that shape. */
void bk__diag_last_times(const void *state, uint64_t *base_ns, uint64_t *wait_ns);

/* `slowed`'s unit at one shape: the base's running median, moved by 1/32 of itself toward
 * each call's time (up if above, down if below; the first call's time to start). It
 * settles where as many calls fall above as below, the median, which a minority of long
 * (preempted) calls moves by at most 1/32 each; and it is at most twice the fastest
 * call, so a stream of mostly stretched calls cannot carry it further. */
typedef struct bk_diag_unit {
    double median_ns;
    uint64_t fastest_ns; /* 0: no call yet */
} bk_diag_unit;

/* Takes one call's base time; returns the unit for this call's wait. */
double bk__diag_unit_step(bk_diag_unit *u, uint64_t base_ns);

/* nccl-tests' allreduce "size" (the bytes of one rank's bf16 [tokens, hidden] tensor)
 * and bus-bandwidth factor 2(n-1)/n: both targets end in an allreduce of that tensor. */
double bk__allreduce_algo_bytes(const bk_shape *s, int world);
double bk__allreduce_busbw_factor(int world);

/* ---- shared by the cpu variants (kernels/catalog.c) ---- */

typedef struct bk_shm bk_shm;

/* The bound for a wait on a peer inside a call: the call's, or 30 s. */
double bk__call_timeout(const bk_call *call);

/* The call's shared-memory communicator, checked: it is this rank's of this
 * world and maps at least `need` bytes. Errors name the variant. */
bk_status bk__cpu_lane_shm(const char *variant, const bk_call *call, size_t need, bk_shm **shm,
                           bk_err *err);

#endif
