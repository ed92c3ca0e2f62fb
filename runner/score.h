/* score.h - scoring a bracket: critical paths, arm costs, the bootstrap interval of the
 * speed-up, drift, and the PASS / FAIL / NO_DECISION verdict (DESIGN.md "Scoring"). */
#ifndef BK_SCORE_H
#define BK_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "plans/plan.h"
#include "runner/status.h"

/* The timed arms, in bracket order. */
enum { BK_ARM_B = 0, BK_ARM_C = 1, BK_ARM_BP = 2, BK_NARMS = 3 };
#define BK_SCORE_REASON_LEN 256
#define BK_SCORE_REASONS_LEN 1024

typedef enum { BK_VERDICT_PASS, BK_VERDICT_FAIL, BK_VERDICT_NO_DECISION } bk_verdict;

/* The audit A against the pristine reference T.
 *   PASS     A matched T within tolerance
 *   FAIL     over tolerance, NaN, an unwritten element: FAIL whatever the speed
 *   MISSING  A or T did not produce evidence (crash, time-out): NO_DECISION
 *   NOT_RUN  not run yet; allowed only in a bc_only look (v7's first look) */
typedef enum {
    BK_QUALITY_PASS,
    BK_QUALITY_FAIL,
    BK_QUALITY_MISSING,
    BK_QUALITY_NOT_RUN
} bk_quality_state;

/* "PASS", "FAIL", "NO_DECISION". */
const char *bk_verdict_name(bk_verdict v);
/* "pass", "fail", "missing", "not_run". */
const char *bk_quality_name(bk_quality_state q);
/* "B", "C", "B'" (NULL for an index out of range). */
const char *bk_arm_name(int arm);

/* ---- critical path ---- */

/* For one arm and shape: ranks[r] holds counts[r] per-iteration times (ns) of
 * rank r. Writes out[i] = max over ranks of ranks[r][i] for every iteration i
 * that every rank has, i.e. i < min(counts); *n = that count. *incomplete is
 * set to 1 when the ranks' counts differ (some iterations of some ranks were
 * dropped: the caller decides whether the arm counts as failed), else 0.
 * BK_ERR_INPUT when nranks < 1, a rank array is NULL with a count > 0, or
 * out_cap < min(counts). Nothing is allocated. */
bk_status bk_critical_path(const uint64_t *const *ranks, const size_t *counts, int nranks,
                           uint64_t *out, size_t out_cap, size_t *n, int *incomplete,
                           bk_err *err);

/* ---- the scorer ---- */

/* The most rounds an arm may have (plan protocol.repeats). */
#define BK_MAX_ROUNDS 16

/* One timed arm. cp[s] (borrowed, not modified) holds n[s] critical-path
 * times in ns for shape s, in iteration order. With rounds R > 1 (the arm ran R
 * times, each in fresh processes: protocol.repeats) cp[s] is the R rounds one
 * after another, n[s] / R iterations each; the arm's statistic for a shape is
 * then the mean of its rounds' lower medians, and the pooled baseline B+B' pairs
 * round k of B with round k of B'. 0 or 1: one round. */
typedef struct bk_score_arm {
    int present;                       /* the arm ran (or should be scored) */
    int rounds;                        /* 0 or 1: one; up to BK_MAX_ROUNDS */
    int failed;                        /* crashed, timed out, ranks missing */
    char reason[BK_SCORE_REASON_LEN];  /* why it failed, e.g. "rank 1 timed out" */
    const uint64_t *cp[BK_MAX_SHAPES];
    size_t n[BK_MAX_SHAPES];
} bk_score_arm;

typedef struct bk_score_input {
    int nshapes;                    /* 1 .. BK_MAX_SHAPES */
    double weights[BK_MAX_SHAPES];  /* >= 0, sum 1 (within 1e-6) */
    bk_score_arm arms[BK_NARMS];    /* indexed by BK_ARM_* */
    bk_quality_state quality;
    char quality_reason[BK_SCORE_REASON_LEN];
    double confidence;              /* interval level, in (0, 1), e.g. 0.95 */
    double min_gain;                /* >= 0: PASS needs lo > 1 + min_gain */
    double drift_limit;             /* >= 0: |cost(B')/cost(B) - 1| allowed */
    bk_drift_policy drift_policy;
    int resamples;                  /* bootstrap replicates, >= 1 */
    uint64_t seed;                  /* bootstrap seed */
    int bc_only;                    /* decide from B and C alone (v7's first look):
                                       B' is ignored, quality NOT_RUN does not block */
} bk_score_input;

/* Defaults: confidence 0.95, min_gain 0.01, drift_limit 0.02, exclude_later,
 * 2000 resamples, seed 1, quality NOT_RUN, no shapes, no arms. */
void bk_score_input_init(bk_score_input *in);

/* Thresholds, policy, resamples, seed (the workload seed), shapes and weights
 * from a validated plan; arms and quality are left as they are. */
void bk_score_input_from_plan(bk_score_input *in, const bk_plan *plan);

typedef struct bk_arm_summary {
    int scored;                         /* costed (present, not failed, samples) */
    size_t n[BK_MAX_SHAPES];            /* iterations per shape (all rounds) */
    double median_ns[BK_MAX_SHAPES];    /* lower median per shape (rounds: their mean) */
    double cost_ns;                     /* sum_s weight_s * median_s */
    double cost_lo_ns, cost_hi_ns;      /* bootstrap percentile interval */
} bk_arm_summary;

typedef struct bk_score {
    bk_verdict verdict;
    char status[32];  /* "reproduction_pending" (PASS), "failed", "no_decision" */
    char reasons[BK_SCORE_REASONS_LEN]; /* human text, several joined by "; " */
    bk_arm_summary arms[BK_NARMS];
    /* the baseline the speed-up was computed against */
    char baseline[8];                   /* "B+B'" or "B" ("" when none) */
    int bp_excluded;                    /* B' kept in the record, excluded (drift) */
    int have_baseline;
    double base_cost_ns, base_lo_ns, base_hi_ns;
    int have_speedup;
    double speedup, speedup_lo, speedup_hi; /* cost(baseline) / cost(C) */
    int have_drift;
    double drift;                       /* cost(B') / cost(B) - 1 */
    int drift_exceeded;
    /* the thresholds used (never changed after the samples are seen) */
    double confidence, min_gain, drift_limit;
    bk_drift_policy drift_policy;
    int resamples;
    uint64_t seed;
    int bc_only;
    bk_quality_state quality;
} bk_score;

/* Wall time of the scorer's stages (benchmarks). */
typedef struct bk_score_timing {
    double sort_s, bootstrap_s, total_s;
} bk_score_timing;

/* Score a bracket (DESIGN.md "Scoring"):
 *  - an arm's cost is sum over shapes of weight * median(critical path), the
 *    median being the LOWER median: the order statistic at zero-based index
 *    (n - 1) / 2 of the sorted sample (an observed time, never an average);
 *  - speed-up s = cost(baseline) / cost(C); the baseline is B and B' pooled per
 *    shape (both arms' iterations as one sample); drift d = cost(B')/cost(B) - 1;
 *  - |d| > drift_limit: exclude_later decides from B vs C (B' kept, excluded),
 *    strict gives NO_DECISION;
 *  - precedence: quality FAIL -> FAIL; a missing or failed arm, missing
 *    quality evidence -> NO_DECISION; then the interval of s against
 *    1 + min_gain: lo above -> PASS, hi below -> FAIL ("slower or no material
 *    gain"), otherwise NO_DECISION ("interval straddles 1+min_gain").
 * Numbers are filled wherever the samples allow, whatever the verdict.
 * Deterministic: the same input gives the same output bit for bit (same build
 * and libm; one thread, a fixed order of RNG draws, see score.c).
 * Returns BK_ERR_INPUT for an input that breaks its contract (bad weights,
 * thresholds, counts), BK_ERR_SYSTEM when memory runs out; a missing evidence
 * is a verdict, not an error. `timing` may be NULL. */
bk_status bk_score_compute(const bk_score_input *in, bk_score *out, bk_score_timing *timing,
                           bk_err *err);

/* 1 when a PASS or FAIL from one round per arm clears its bar (1 + min_gain) by
 * less than |drift|: the interval, a bootstrap over iterations, leaves out the
 * offset each engine process brings of its own, and B' against B is one draw of
 * it. *margin (may be NULL) gets the clearance: speedup_lo - (1 + min_gain) for
 * PASS, (1 + min_gain) - speedup_hi for FAIL. 0 with rounds > 1 (the rounds carry
 * that spread), without a drift or an interval, or for any other verdict. */
int bk_score_thin_margin(const bk_score *sc, int rounds, double *margin);

/* The lower median of an ascending sorted array: sorted[(n - 1) / 2]; n >= 1. */
uint64_t bk_lower_median(const uint64_t *sorted, size_t n);

/* Sort n values ascending in place (LSD radix sort; O(n) scratch). */
bk_status bk_sort_u64(uint64_t *v, size_t n, bk_err *err);

/* ---- materiality (bracket worth) ---- */

/* Upper bound of the end-to-end speed-up when a slot with critical-path
 * fraction f in (0, 1] is made k > 0 times faster: 1 / ((1 - f) + f / k).
 * BK_ERR_INPUT (message names the value) for f or k out of range or not finite. */
bk_status bk_worth_bound(double f, double k, double *bound, bk_err *err);

/* 1 when the bound exceeds 1 + noise (its gain beats the resolvable noise, a
 * fraction >= 0, e.g. 0.01), else 0. */
int bk_worth_clears(double bound, double noise);

/* The fewest timed iterations a round needs for a decision at `confidence` (a
 * distribution-free interval of a median exists: 2 x 0.5^n <= 1 - confidence; 6 at 0.95);
 * below it the verdict is NO_DECISION with the reason. */
int bk_score_min_iters(double confidence);

/* When `iters` timed iterations a round are too few for a decision at `confidence`: a
 * warning for the plan's reader in buf ("workload.iters 3 is below ...") and 1; else 0. */
int bk_score_few_iters_text(int iters, double confidence, char *buf, size_t len);

#endif
