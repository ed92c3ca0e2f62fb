/* catalog.h - the target catalog: targets (callable contracts), variants (implementations)
 * with their capability domains, and routing of calls outside a candidate's domain. */
#ifndef BK_CATALOG_H
#define BK_CATALOG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "plans/plan.h"
#include "runner/status.h"

#define BK_CATALOG_SCHEMA "bracket.catalog/1"
#define BK_MAX_TENSORS 12

/* Backend bit masks for domains and variants. */
#define BK_BK_CPU (1u << BK_BACKEND_CPU)
#define BK_BK_CUDA (1u << BK_BACKEND_CUDA)

/* Where a variant is correct and meant to be used. A call whose shape lies
 * outside it is served by the incumbent (routing). Zero in a max field means
 * "no upper bound"; worlds is a bit mask (bit w: world size w allowed),
 * 0 meaning any. */
typedef struct bk_domain {
    unsigned backends;   /* BK_BK_* mask */
    const char *dtypes;  /* comma list, e.g. "bf16" */
    uint32_t worlds;
    int64_t min_tokens, max_tokens;
    int64_t min_hidden, max_hidden, hidden_multiple;
    int needs_p2p;
} bk_domain;

/* One tensor of one shape on one rank. `data` is host memory for the cpu
 * backend and device memory for cuda. Elements are bf16 (uint16_t) unless
 * elem_bytes says otherwise. */
typedef struct bk_tensor {
    const char *name;
    int output;
    size_t elems;
    size_t elem_bytes;
    void *data;
} bk_tensor;

/* One call of a target on one rank: a shape, its tensors in the target's
 * order, and the backend's communicator for this lane (bk_shm * on cpu,
 * the cuda backend's own object on cuda). */
typedef struct bk_call {
    const bk_shape *shape;
    int shape_index;
    long iter;          /* timed iteration index, or -1 during warm-up and audit */
    int rank, world;
    bk_tensor *t;
    int nt;
    void *comm;
    void *stream;       /* cudaStream_t on cuda, NULL on cpu */
    int graph;          /* cuda: 1 when the timed calls are captured and replayed as graphs
                         * (a variant that times its own work times it the same way) */
    double timeout_s;   /* bound for every wait on a peer inside the call */
} bk_call;

typedef struct bk_target {
    const char *name;
    const char *summary;
    int ntensors;
    const char *tensor_names[BK_MAX_TENSORS];
    int tensor_is_output[BK_MAX_TENSORS];
    /* elements of tensor idx for this shape on one rank */
    size_t (*tensor_elems)(const bk_shape *s, int world, int idx);
    size_t (*tensor_elem_bytes)(int idx);
    /* Fill this rank's input tensors (host memory) from the seed: the same
     * (seed, shape_index, rank) always gives the same bits. Output tensors are
     * left alone (the engine poisons them). */
    void (*init_inputs)(bk_tensor *t, const bk_shape *s, uint64_t seed, int shape_index,
                        int rank, int world);
    /* Float64 reference of this rank's outputs, regenerating every rank's
     * inputs from the seed. outs[k] (k-th output tensor, in order) is malloc'd
     * by the callee and freed by the caller. */
    bk_status (*reference)(const bk_shape *s, uint64_t seed, int shape_index, int rank,
                           int world, double **outs, bk_err *err);
    /* Algorithm bytes of one call (nccl-tests' "size": the bytes of one rank's
     * reduced tensor) and the bus-bandwidth factor (2(n-1)/n for allreduce). */
    double (*algo_bytes)(const bk_shape *s, int world);
    double (*busbw_factor)(int world);
    /* Peer memory one rank needs for this shape (the engine takes the max
     * over shapes and maps it once). */
    size_t (*peer_bytes)(const bk_shape *s, int world);
    /* Shape check beyond the domain (e.g. hidden > 0 and required MoE fields). */
    bk_status (*check_shape)(const bk_shape *s, int world, char *why, size_t why_len);
    /* Optional (NULL: none): how far a variant that sums the ranks' contributions in bf16
     * (bk_variant.bf16_sum: NCCL's allreduce rounds each partial sum) strays from the
     * float64 reference at this shape and world, as the worst of |err| / (atol + rtol |ref|)
     * over a replay on the CPU of every ring order on (a prefix of) the target's own inputs:
     * about budget / (world x orders) elements of it (bk_catalog_bf16_sum_budget; at least
     * 1024). > 1: the plan's tolerance is below that variant's own rounding. */
    double (*bf16_sum_excess)(const bk_shape *s, uint64_t seed, int shape_index, int world,
                              double rtol, double atol, size_t budget);
    /* What `bracket verify --target` checks a variant against when no plan is given: the
     * serving stack's variant on each backend (indexed by bk_backend; NULL: none there) and
     * a typical shape (the domain probes take its MoE fields, and its hidden where the
     * variant serves it). */
    const char *incumbent[3];
    bk_shape example;
} bk_target;

typedef struct bk_variant {
    const char *name;
    const char *target;
    unsigned backends;  /* BK_BK_* mask */
    int diagnostic;     /* fault-injection variant: never a real candidate */
    const char *summary;
    bk_domain domain;
    /* Parse params (a JSON object, never NULL) and build per-process state.
     * Errors name the parameter ("candidate.params.fraction: ..."). */
    bk_status (*create)(const json_t *params, bk_backend backend, int rank, int world,
                        void **state, bk_err *err);
    /* One call. Must write every element of every output tensor. */
    bk_status (*run)(void *state, bk_call *call, bk_err *err);
    void (*destroy)(void *state);
    /* Peer memory one rank needs for this variant at this shape, when it needs
     * more than the target's peer_bytes (NULL: the target's is enough). */
    size_t (*peer_bytes)(const bk_shape *s, int world);
    /* 1: sums the ranks' contributions in bf16 across the lane (a bf16 allreduce, as NCCL
     * does: world - 1 roundings of partial sums per element), so its own error grows with
     * the world (bk_catalog_bf16_sum_note). */
    int bf16_sum;
    /* 1: at world > 1 its calls go through NCCL, which needs one GPU per rank of the lane
     * (it refuses two ranks on one GPU), so a lane sharing GPUs cannot run it. */
    int nccl;
} bk_variant;

const bk_target *bk_catalog_target(const char *name);
/* NULL when the target has no variant of that name. */
const bk_variant *bk_catalog_variant(const char *target, const char *name);
/* 1 when `name` is a variant of `target` on the cuda backend, in any build (one without
 * the cuda backend has no such variant in its catalog); bk_catalog_ncuda_names: how many. */
int bk_catalog_cuda_name(const char *target, const char *name);
int bk_catalog_ncuda_names(void);
/* Iterate all variants (for --help and `bracket verify`). */
int bk_catalog_nvariants(void);
const bk_variant *bk_catalog_variant_at(int i);
int bk_catalog_ntargets(void);
const bk_target *bk_catalog_target_at(int i);

/* 1 when the call (shape, world, dtype, backend, peer access) lies inside the
 * domain; otherwise 0 and `why` says which bound excluded it. */
int bk_domain_contains(const bk_domain *d, const bk_shape *s, int world, const char *dtype,
                       bk_backend backend, int have_p2p, char *why, size_t why_len);

/* The names of the targets this build knows, ", "-separated (for "known: ..." messages). */
void bk_catalog_targets_text(char *buf, size_t len);
/* The target's incumbents (bk_target.incumbent) that this build's catalog has, in words:
 * "shm_twopass (cpu), nccl_then_rmsnorm (cuda)"; "none in this build" when it has none. */
void bk_target_incumbents_text(const bk_target *t, char *buf, size_t len);
/* The domain in words, e.g. "cpu,cuda; bf16; tokens 1..4096; hidden 8..16384, a multiple
 * of 8; worlds 1-2,4,8; peer access" (unbounded ends and empty fields left out). */
void bk_domain_text(const bk_domain *d, char *buf, size_t len);

/* What a variant serves, in words: its domain's text (bk_domain_text); for a diagnostic
 * wrapper, whose table domain takes every shape, its base's, and the default bases. */
void bk_variant_domain_text(const bk_variant *v, char *buf, size_t len);

/* What the diagnostic wrapper v, named with `params` (NULL: none), calls on backend cpu or
 * cuda: *base its base (params.base, or the backend's default base), *fallback the default
 * base it calls instead where *base's domain excludes a call (NULL: none there, and such a
 * call fails with the base's error). 0, both NULL, when v is a real variant or the params
 * name no base it could wrap. What a wrapper serves is what these two serve: `bracket
 * verify` probes that, not the wrapper's table domain. The variants are the catalog's. */
int bk_catalog_diag_bases(const bk_variant *v, const json_t *params, bk_backend backend,
                          const bk_variant **base, const bk_variant **fallback);

/* Check a plan against the catalog: target exists, both variants exist for
 * it and support the backend, params parse (create + destroy on rank 0 of a
 * lane of the arena's size), every shape passes check_shape, the incumbent (the serving
 * stack) serves the lane and every shape, and a diagnostic candidate can serve every
 * shape it is called for (bk_catalog_served_by). Errors name the
 * plan's dotted path ("candidate.variant: no variant 'x' for target 'y'"), after the plan's
 * file when it has one ("plans/x.json: candidate.variant: ..."), as the loader's do. */
bk_status bk_catalog_check_plan(const bk_plan *plan, bk_backend backend, bk_err *err);

/* The real variant that computes the calls of workload.shapes[shape] where the plan names
 * `ref` (&plan->incumbent or &plan->candidate), on a lane of arena.tp x arena.ep ranks:
 * the variant itself; for a diagnostic wrapper its base (params.base, or the backend's
 * default base), or, where the base's domain excludes the call and the backend has a
 * default base, that default base (the wrapper calls it; `why` then says why the base
 * could not). NULL when the variant does not serve the call (routed to the incumbent, or
 * failing inside a wrapper): `why` says which bound of whose domain excluded it. The
 * returned variant is the catalog's. */
const bk_variant *bk_catalog_served_by(const bk_plan *plan, const bk_variant_ref *ref,
                                       int shape, bk_backend backend, int have_p2p, char *why,
                                       size_t why_len);

/* 1 when the plan's lane as a whole (its size arena.tp x arena.ep, its dtype, the backend)
 * lies outside the domain of what `ref` names (a wrapper's: its base's, unless its default
 * base takes the lane), so that it serves no shape at all; `why` then says so in the plan's
 * words: "arena.tp x arena.ep: the lane size is outside the domain of the candidate
 * shm_oneshot_fused (worlds 1-8), got 16 x 1 = 16". Else 0 and `why` empty. */
int bk_catalog_lane_outside(const bk_plan *plan, const bk_variant_ref *ref, bk_backend backend,
                            char *why, size_t why_len);

/* nccl-tests' algorithm bandwidth of one call of `ns` nanoseconds, in GB/s
 * (algo_bytes / time); the bus bandwidth is that times busbw_factor(world).
 * 0 for a NULL target or a time <= 0. */
double bk_target_algbw(const bk_target *t, const bk_shape *s, int world, double ns);

/* Workload weight of the shapes the candidate serves (0..1): those bk_catalog_served_by
 * gives a variant for (a diagnostic wrapper's follow its base's domain). */
double bk_routing_share(const bk_plan *plan, bk_backend backend, int have_p2p);

/* When the plan's incumbent or candidate sums in bf16 across a lane of tp x ep >= 2 ranks
 * (bk_variant.bf16_sum) and its target can replay that (bf16_sum_excess): the worst excess
 * over the plan's shapes, and in `note` one line saying which variant, how far past
 * quality.rtol/atol its own rounding goes, and what that means for the A/T comparison, when
 * the excess is 0.75 or more; else `note` empty. Returns the excess (0 when not
 * applicable). */
double bk_catalog_bf16_sum_note(const bk_plan *plan, bk_backend backend, char *note,
                                size_t len);

/* The worst bf16_sum_excess of the plan's target over the shapes s whose by[s] sums in bf16
 * (bk_variant.bf16_sum; by[s] NULL: none) at `world` ranks, inputs from `seed`, tolerance
 * quality.rtol/atol, each shape replayed within bk_catalog_bf16_sum_budget of their count;
 * *at the shape (-1 when none). 0 at world 1 or without the hook. */
double bk_catalog_bf16_sum_worst(const bk_plan *plan, const bk_variant *const *by, int world,
                                 uint64_t seed, int *at);

/* The same for target t (bk_catalog_bf16_sum_worst passes the plan's; exported for tests). */
double bk__bf16_sum_worst(const bk_target *t, const bk_plan *plan, const bk_variant *const *by,
                          int world, uint64_t seed, int *at);

/* The replay budget of each of n shapes (bf16_sum_excess's budget): 2^22 element-orders a
 * shape up to 4 shapes, 2^24 shared beyond that, never under 2^16 a shape; the replay
 * costs about 0.07 s of one core per 2^22. */
size_t bk_catalog_bf16_sum_budget(int n);

#endif
