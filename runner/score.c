/* score.c - the seeded order-statistic bootstrap and the verdict rules of DESIGN.md
 * "Scoring" (critical paths, the sort and lower medians: score_stats.c). One pass, one
 * thread, deterministic. */
#include "runner/score.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/rng.h"

/* the pooled baseline B+B' is scored as a fourth sample set beside the arms */
enum { POOL = BK_NARMS, NSETS = BK_NARMS + 1 };
/* room for "arm B' failed: " before a full-length failure reason */
#define PROBLEM_LEN (BK_SCORE_REASON_LEN + 64)

const char *bk_verdict_name(bk_verdict v)
{
    switch (v) {
    case BK_VERDICT_PASS: return "PASS";
    case BK_VERDICT_FAIL: return "FAIL";
    case BK_VERDICT_NO_DECISION: return "NO_DECISION";
    }
    return "UNKNOWN";
}

const char *bk_quality_name(bk_quality_state q)
{
    switch (q) {
    case BK_QUALITY_PASS: return "pass";
    case BK_QUALITY_FAIL: return "fail";
    case BK_QUALITY_MISSING: return "missing";
    case BK_QUALITY_NOT_RUN: return "not_run";
    }
    return "unknown";
}

const char *bk_arm_name(int arm)
{
    static const char *names[BK_NARMS] = { "B", "C", "B'" };
    return arm >= 0 && arm < BK_NARMS ? names[arm] : NULL;
}

/* ---- the percentile interval ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The percentile interval of R replicate values at level `confidence`:
 * alpha = 1 - confidence; with the replicates sorted ascending, lo is the one
 * at zero-based index floor(alpha/2 * (R-1)) and hi the one at index
 * ceil((1 - alpha/2) * (R-1)), i.e. the nearest order statistics at or outside
 * the nominal quantiles (never narrower than interpolation would give).
 * Sorts `rep` in place. */
static void percentile_interval(double *rep, int R, double confidence, double *lo, double *hi)
{
    qsort(rep, (size_t)R, sizeof *rep, cmp_double);
    double a2 = (1.0 - confidence) / 2.0;
    long ilo = (long)floor(a2 * (R - 1) + 1e-9);
    long ihi = (long)ceil((1.0 - a2) * (R - 1) - 1e-9);
    if (ilo < 0)
        ilo = 0;
    if (ihi > R - 1)
        ihi = R - 1;
    *lo = rep[ilo];
    *hi = rep[ihi];
}

/* ---- input ---- */

void bk_score_input_init(bk_score_input *in)
{
    memset(in, 0, sizeof *in);
    in->quality = BK_QUALITY_NOT_RUN;
    in->confidence = 0.95;
    in->min_gain = 0.01;
    in->drift_limit = 0.02;
    in->drift_policy = BK_DRIFT_EXCLUDE_LATER;
    in->resamples = 2000;
    in->seed = 1;
}

void bk_score_input_from_plan(bk_score_input *in, const bk_plan *plan)
{
    in->nshapes = plan->workload.nshapes;
    for (int s = 0; s < plan->workload.nshapes && s < BK_MAX_SHAPES; s++)
        in->weights[s] = plan->workload.shapes[s].weight;
    in->confidence = plan->protocol.confidence;
    in->min_gain = plan->protocol.min_gain;
    in->drift_limit = plan->protocol.drift_limit;
    in->drift_policy = plan->protocol.drift_policy;
    in->resamples = plan->protocol.bootstrap_resamples;
    in->seed = plan->workload.seed;
}

/* An arm's rounds: 0 is one. */
static int arm_rounds(const bk_score_arm *arm)
{
    return arm->rounds > 1 ? arm->rounds : 1;
}

static bk_status check_input(const bk_score_input *in, bk_err *err)
{
    if (in->nshapes < 1 || in->nshapes > BK_MAX_SHAPES)
        return BK_FAIL(err, BK_ERR_INPUT, "score: nshapes %d outside 1..%d", in->nshapes,
                       BK_MAX_SHAPES);
    double sum = 0.0;
    for (int s = 0; s < in->nshapes; s++) {
        if (!(in->weights[s] >= 0.0) || !isfinite(in->weights[s]))
            return BK_FAIL(err, BK_ERR_INPUT, "score: weight of shape %d is %g (need a "
                           "finite value >= 0)", s, in->weights[s]);
        sum += in->weights[s];
    }
    if (fabs(sum - 1.0) > 1e-6)
        return BK_FAIL(err, BK_ERR_INPUT, "score: shape weights sum to %.9g, not 1", sum);
    if (!(in->confidence > 0.0 && in->confidence < 1.0))
        return BK_FAIL(err, BK_ERR_INPUT, "score: confidence %g outside (0, 1)",
                       in->confidence);
    if (!(in->min_gain >= 0.0) || !isfinite(in->min_gain))
        return BK_FAIL(err, BK_ERR_INPUT, "score: min_gain %g (need >= 0)", in->min_gain);
    if (!(in->drift_limit >= 0.0) || !isfinite(in->drift_limit))
        return BK_FAIL(err, BK_ERR_INPUT, "score: drift_limit %g (need >= 0)",
                       in->drift_limit);
    if (in->drift_policy != BK_DRIFT_EXCLUDE_LATER && in->drift_policy != BK_DRIFT_STRICT)
        return BK_FAIL(err, BK_ERR_INPUT, "score: unknown drift policy %d",
                       (int)in->drift_policy);
    if (in->resamples < 1)
        return BK_FAIL(err, BK_ERR_INPUT, "score: bootstrap resamples %d (need >= 1)",
                       in->resamples);
    for (int a = 0; a < BK_NARMS; a++) {
        const bk_score_arm *arm = &in->arms[a];
        const int k = arm_rounds(arm);
        if (arm->rounds < 0 || arm->rounds > BK_MAX_ROUNDS)
            return BK_FAIL(err, BK_ERR_INPUT, "score: arm %s has %d rounds (0..%d)",
                           bk_arm_name(a), arm->rounds, BK_MAX_ROUNDS);
        for (int s = 0; arm->present && !arm->failed && s < in->nshapes; s++)
            if (arm->n[s] % (size_t)k != 0)
                return BK_FAIL(err, BK_ERR_INPUT, "score: arm %s shape %d has %zu samples, "
                               "not %d rounds of one length", bk_arm_name(a), s, arm->n[s], k);
    }
    /* only arms that are pooled need the same rounds: a failed one is never costed */
    if (in->arms[BK_ARM_B].present && in->arms[BK_ARM_BP].present &&
        !in->arms[BK_ARM_B].failed && !in->arms[BK_ARM_BP].failed &&
        arm_rounds(&in->arms[BK_ARM_B]) != arm_rounds(&in->arms[BK_ARM_BP]))
        return BK_FAIL(err, BK_ERR_INPUT, "score: arms B and B' have %d and %d rounds "
                       "(pooled round by round, they must match)",
                       arm_rounds(&in->arms[BK_ARM_B]), arm_rounds(&in->arms[BK_ARM_BP]));
    for (int a = 0; a < BK_NARMS; a++)
        for (int s = 0; s < in->nshapes; s++)
            if (in->arms[a].present && in->arms[a].n[s] > 0 && !in->arms[a].cp[s])
                return BK_FAIL(err, BK_ERR_INPUT, "score: arm %s shape %d has %zu samples "
                               "but no array", bk_arm_name(a), s, in->arms[a].n[s]);
    return BK_OK;
}

/* ---- reasons ---- */

static void add_reason(bk_score *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(bk_score *out, const char *fmt, ...)
{
    size_t len = strlen(out->reasons);
    if (len + 3 >= sizeof out->reasons)
        return;
    if (len) {
        memcpy(out->reasons + len, "; ", 3);
        len += 2;
    }
    char text[2 * sizeof out->reasons]; /* longer than any reason: cut below, by words */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    bk_strlcpy_words(out->reasons + len, text, sizeof out->reasons - len);
}

/* Why an arm cannot be scored, or NULL when it can (written into buf). */
static const char *arm_problem(const bk_score_input *in, int a, char *buf, size_t len)
{
    const bk_score_arm *arm = &in->arms[a];
    if (!arm->present) {
        snprintf(buf, len, "arm %s missing", bk_arm_name(a));
        return buf;
    }
    if (arm->failed) {
        snprintf(buf, len, "arm %s failed: %s", bk_arm_name(a),
                 arm->reason[0] ? arm->reason : "no reason given");
        return buf;
    }
    for (int s = 0; s < in->nshapes; s++)
        if (arm->n[s] == 0) {
            snprintf(buf, len, "arm %s has no timed iterations for shape %d",
                     bk_arm_name(a), s);
            return buf;
        }
    return NULL;
}

/* ---- the bootstrap ----
 *
 * Why one Beta draw per (replicate, arm, shape) is the exact bootstrap of a
 * median. A replicate resamples n iterations with replacement from the sorted
 * sample x[0] <= ... <= x[n-1]. Resampled draw i can be written x[floor(n V_i)]
 * with V_i iid uniform on [0, 1): each index is then uniform on 0..n-1, as a
 * resample requires. The map v -> x[floor(n v)] is non-decreasing, so order
 * statistics pass through it: the m-th smallest resampled value is
 * x[floor(n V_(m))], where V_(m), the m-th smallest of n iid uniforms, is
 * distributed Beta(m, n - m + 1). The resample's lower median is its m-th
 * smallest with m = (n - 1) / 2 + 1 (one-based). So U ~ Beta(m, n - m + 1) and
 * sorted[min(n - 1, floor(n U))] has exactly the distribution of the
 * resampled lower median, at O(1) per replicate instead of O(n) (the min()
 * guards U = 1 and rounding). Sorting each sample once is the only O(n log n)
 * work, which makes 10^7 samples with 2000 replicates a matter of a second.
 *
 * Draw order (the reproducibility contract): one RNG seeded with `seed`; for
 * each replicate, for each sample set in the order B, C, B', B+B' that can be
 * costed: with rounds (k > 1), first k rounds drawn with replacement (k uniform
 * draws, round floor(k u)), the same rounds for every shape of the set; then for
 * each shape in order, for each drawn round in order, one Beta draw (X ~ Gamma(m)
 * then Y ~ Gamma(n-m+1)). One round draws no rounds: as before rounds existed.
 * The baseline choice does not change the draws.
 *
 * Why rounds are resampled too: each round runs in processes of its own, and a
 * process brings an offset of its own (about 0.3% of an arm's cost on one H200,
 * docs/BENCHMARKS.md) that resampling iterations cannot see. Drawing the rounds
 * (a two-stage bootstrap: rounds, then iterations within each) puts that
 * process-to-process spread into the interval; with k rounds it shows (k-1)/k of
 * it, coarsely at small k. */
typedef struct sample {
    const uint64_t *v; /* k rounds of n / k values, each sorted ascending */
    size_t n;
    int k;             /* rounds, >= 1 */
} sample;

/* One bootstrap draw of a sorted round's lower median (above). */
static uint64_t draw_median(bk_rng *rng, const uint64_t *v, size_t n)
{
    size_t m = (n - 1) / 2 + 1;
    double u = bk_rng_beta(rng, (double)m, (double)(n - m + 1));
    size_t idx = (size_t)((double)n * u); /* u in [0, 1]: truncation is floor */
    if (idx > n - 1)
        idx = n - 1;
    return v[idx];
}

/* A shape's statistic: one round's lower median, or the mean of its rounds' (each round
 * in fresh processes, so their offsets average out). Drawing (rng set): the rounds in
 * pick[] (drawn with replacement by draw_cost), one Beta draw each, in that order. One
 * round is computed exactly as before rounds existed. */
static double shape_stat(bk_rng *rng, const int *pick, const sample *x)
{
    if (x->k == 1)
        return (double)(rng ? draw_median(rng, x->v, x->n) : bk_lower_median(x->v, x->n));
    const size_t len = x->n / (size_t)x->k;
    double sum = 0.0;
    for (int j = 0; j < x->k; j++) {
        const uint64_t *v = x->v + (size_t)(rng ? pick[j] : j) * len;
        sum += (double)(rng ? draw_median(rng, v, len) : bk_lower_median(v, len));
    }
    return sum / x->k;
}

static double draw_cost(bk_rng *rng, const sample *smp, const double *w, int nshapes)
{
    int pick[BK_MAX_ROUNDS];
    const int k = smp[0].k; /* every shape of a set has the same rounds */
    for (int j = 0; k > 1 && j < k; j++) {
        int r = (int)((double)k * bk_rng_uniform(rng));
        pick[j] = r < k ? r : k - 1;
    }
    double cost = 0.0;
    for (int s = 0; s < nshapes; s++)
        cost += w[s] * shape_stat(rng, pick, &smp[s]);
    return cost;
}

static double point_cost(const sample *smp, const double *w, int nshapes)
{
    double cost = 0.0;
    for (int s = 0; s < nshapes; s++)
        cost += w[s] * shape_stat(NULL, NULL, &smp[s]);
    return cost;
}

static void merge(const sample *a, const sample *b, uint64_t *dst)
{
    size_t i = 0, j = 0, k = 0;
    while (i < a->n && j < b->n)
        dst[k++] = b->v[j] < a->v[i] ? b->v[j++] : a->v[i++];
    while (i < a->n)
        dst[k++] = a->v[i++];
    while (j < b->n)
        dst[k++] = b->v[j++];
}

/* ---- the verdict ---- */

/* The fewest timed iterations of a round for which a distribution-free interval of a
 * median exists at `confidence`: the smallest n with 2 x 0.5^n <= 1 - confidence (the
 * chance that all n fall on one side of the true median); 6 at 0.95, 8 at 0.99. Below it a
 * bootstrap of n values gives an interval narrower than the data can support (one
 * iteration: zero width), so no decision is taken. */
int bk_score_min_iters(double confidence)
{
    int n = 1;
    while (n < 60 && 2.0 * ldexp(1.0, -n) > 1.0 - confidence)
        n++;
    return n;
}

int bk_score_few_iters_text(int iters, double confidence, char *buf, size_t len)
{
    const int need = bk_score_min_iters(confidence);
    if (iters >= need)
        return 0;
    snprintf(buf, len, "workload.iters %d is below the %d timed iterations a round needs for "
             "an interval of a median at confidence %g: every arm runs, and the verdict is "
             "NO_DECISION", iters, need, confidence);
    return 1;
}

/* Why the timed arms' rounds are too short to decide from (buf), or NULL. */
static const char *too_few(const bk_score_input *in, char *buf, size_t len)
{
    const int need = bk_score_min_iters(in->confidence);
    for (int a = 0; a < BK_NARMS; a++) {
        const bk_score_arm *arm = &in->arms[a];
        if ((a == BK_ARM_BP && in->bc_only) || !arm->present || arm->failed)
            continue;
        for (int s = 0; s < in->nshapes; s++) {
            const size_t per = arm->n[s] / (size_t)arm_rounds(arm);
            if (per < (size_t)need) {
                snprintf(buf, len, "too few timed iterations to decide: arm %s has %zu a round "
                         "at shape %d, and an interval of a median at confidence %g needs at "
                         "least %d (raise workload.iters)", bk_arm_name(a), per, s,
                         in->confidence, need);
                return buf;
            }
        }
    }
    return NULL;
}

static void decide(const bk_score_input *in, bk_score *out, char problem[][PROBLEM_LEN])
{
    const double bar = 1.0 + in->min_gain;
    int blocked = 0, decided = 0;
    char few[PROBLEM_LEN];
    out->verdict = BK_VERDICT_NO_DECISION;
    if (in->quality == BK_QUALITY_FAIL) {
        out->verdict = BK_VERDICT_FAIL;
        decided = 1;
        add_reason(out, "quality failed: %s", in->quality_reason[0] ? in->quality_reason
                   : "audit A differs from reference T beyond tolerance");
    }
    for (int a = 0; a < BK_NARMS; a++)
        if (problem[a][0]) {
            blocked = 1;
            add_reason(out, "%s", problem[a]);
        }
    if (in->quality == BK_QUALITY_MISSING) {
        blocked = 1;
        add_reason(out, "quality evidence missing: %s", in->quality_reason[0]
                   ? in->quality_reason : "audit A or reference T produced no result");
    } else if (in->quality == BK_QUALITY_NOT_RUN && !in->bc_only) {
        blocked = 1;
        add_reason(out, "quality not run (audit A against reference T)");
    }
    if (too_few(in, few, sizeof few)) {
        blocked = 1;
        add_reason(out, "%s", few);
    }
    if (out->drift_exceeded && in->drift_policy == BK_DRIFT_STRICT) {
        blocked = 1;
        add_reason(out, "drift %+.2f%% exceeds the %.2f%% limit (policy strict)",
                   100.0 * out->drift, 100.0 * in->drift_limit);
    }
    if (!decided && !blocked && out->have_speedup) {
        decided = 1;
        if (out->speedup_lo > bar) {
            out->verdict = BK_VERDICT_PASS;
            add_reason(out, "speed-up %.4f [%.4f, %.4f] clears 1+min_gain = %.4f",
                       out->speedup, out->speedup_lo, out->speedup_hi, bar);
        } else if (out->speedup_hi < bar) {
            out->verdict = BK_VERDICT_FAIL;
            add_reason(out, "slower or no material gain: speed-up %.4f [%.4f, %.4f] below "
                       "1+min_gain = %.4f", out->speedup, out->speedup_lo, out->speedup_hi, bar);
        } else {
            add_reason(out, "interval straddles 1+min_gain: speed-up %.4f [%.4f, %.4f] "
                       "against %.4f", out->speedup, out->speedup_lo, out->speedup_hi, bar);
        }
    } else if (!decided && !blocked) {
        add_reason(out, "no speed-up could be computed");
    } else if (out->have_speedup) {
        add_reason(out, "speed-up %.4f [%.4f, %.4f] (not decisive)", out->speedup,
                   out->speedup_lo, out->speedup_hi);
    }
    if (out->bp_excluded)
        add_reason(out, "drift %+.2f%% exceeds the %.2f%% limit: B' kept in the record and "
                   "excluded, decided from B vs C", 100.0 * out->drift,
                   100.0 * in->drift_limit);
    bk_strlcpy(out->status, out->verdict == BK_VERDICT_PASS ? "reproduction_pending"
               : out->verdict == BK_VERDICT_FAIL ? "failed" : "no_decision",
               sizeof out->status);
}

/* ---- the scorer ---- */

bk_status bk_score_compute(const bk_score_input *in, bk_score *out, bk_score_timing *timing,
                           bk_err *err)
{
    bk_status st = BK_OK;
    uint64_t t0 = bk_now_ns(), t1 = t0, t2 = t0;
    uint64_t *buf[NSETS][BK_MAX_SHAPES];
    sample smp[NSETS][BK_MAX_SHAPES];
    char problem[BK_NARMS][PROBLEM_LEN];
    int have[NSETS] = { 0 };
    double cost[NSETS] = { 0 }, *rep[NSETS] = { 0 }, *srep = NULL;
    const int R = in->resamples, ns = in->nshapes;
    const double *w = in->weights;

    memset(buf, 0, sizeof buf);
    memset(problem, 0, sizeof problem);
    memset(out, 0, sizeof *out);
    out->confidence = in->confidence;
    out->min_gain = in->min_gain;
    out->drift_limit = in->drift_limit;
    out->drift_policy = in->drift_policy;
    out->resamples = in->resamples;
    out->seed = in->seed;
    out->bc_only = in->bc_only;
    out->quality = in->quality;
    out->verdict = BK_VERDICT_NO_DECISION;
    BK_TRY(check_input(in, err));

    /* sorted copies of every arm that can be costed (B' is ignored in a bc_only look) */
    for (int a = 0; a < BK_NARMS; a++) {
        if (a == BK_ARM_BP && in->bc_only)
            continue;
        if (arm_problem(in, a, problem[a], sizeof problem[a]))
            continue;
        const int k = arm_rounds(&in->arms[a]);
        for (int s = 0; s < ns; s++) {
            size_t n = in->arms[a].n[s], len = n / (size_t)k;
            if (!(buf[a][s] = malloc(n * sizeof **buf))) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "score: out of memory for %zu samples", n);
                goto out;
            }
            memcpy(buf[a][s], in->arms[a].cp[s], n * sizeof **buf);
            for (int j = 0; j < k; j++)
                BK_TRY(bk_sort_u64(buf[a][s] + (size_t)j * len, len, err));
            smp[a][s] = (sample){ buf[a][s], n, k };
        }
        cost[a] = point_cost(smp[a], w, ns);
        if (!(cost[a] > 0.0)) {
            snprintf(problem[a], sizeof problem[a], "arm %s has zero cost (all medians 0 ns)",
                     bk_arm_name(a));
            continue;
        }
        have[a] = 1;
    }
    have[POOL] = !in->bc_only && have[BK_ARM_B] && have[BK_ARM_BP];
    for (int s = 0; have[POOL] && s < ns; s++) {
        /* round j of the pool: round j of B merged with round j of B' */
        const sample *b = &smp[BK_ARM_B][s], *bp = &smp[BK_ARM_BP][s];
        const int k = b->k;
        const size_t lb = b->n / (size_t)k, lp = bp->n / (size_t)k;
        size_t n = b->n + bp->n;
        if (!(buf[POOL][s] = malloc(n * sizeof **buf))) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "score: out of memory for %zu samples", n);
            goto out;
        }
        for (int j = 0; j < k; j++) {
            const sample rb = { b->v + (size_t)j * lb, lb, 1 };
            const sample rp = { bp->v + (size_t)j * lp, lp, 1 };
            merge(&rb, &rp, buf[POOL][s] + (size_t)j * (lb + lp));
        }
        smp[POOL][s] = (sample){ buf[POOL][s], n, k };
    }
    if (have[POOL])
        cost[POOL] = point_cost(smp[POOL], w, ns);
    t1 = bk_now_ns();

    /* drift and the baseline */
    if (have[BK_ARM_B] && have[BK_ARM_BP]) {
        out->have_drift = 1;
        out->drift = cost[BK_ARM_BP] / cost[BK_ARM_B] - 1.0;
        out->drift_exceeded = fabs(out->drift) > in->drift_limit;
    }
    out->bp_excluded = out->drift_exceeded && in->drift_policy == BK_DRIFT_EXCLUDE_LATER;
    int base = have[POOL] && !out->bp_excluded ? POOL : have[BK_ARM_B] ? BK_ARM_B : -1;
    bk_strlcpy(out->baseline, base == POOL ? "B+B'" : base == BK_ARM_B ? "B" : "",
               sizeof out->baseline);

    /* the bootstrap (draw order documented above) */
    for (int k = 0; k < NSETS; k++)
        if (have[k] && !(rep[k] = malloc((size_t)R * sizeof *rep[k]))) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "score: out of memory for %d resamples", R);
            goto out;
        }
    if (base >= 0 && have[BK_ARM_C] && !(srep = malloc((size_t)R * sizeof *srep))) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "score: out of memory for %d resamples", R);
        goto out;
    }
    bk_rng rng;
    bk_rng_seed(&rng, in->seed);
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < NSETS; k++)
            if (have[k])
                rep[k][r] = draw_cost(&rng, smp[k], w, ns);
        if (srep)
            srep[r] = rep[base][r] / rep[BK_ARM_C][r];
    }

    /* summaries */
    for (int a = 0; a < BK_NARMS; a++) {
        bk_arm_summary *sum = &out->arms[a];
        if (!have[a])
            continue;
        sum->scored = 1;
        sum->cost_ns = cost[a];
        for (int s = 0; s < ns; s++) {
            sum->n[s] = smp[a][s].n;
            sum->median_ns[s] = shape_stat(NULL, NULL, &smp[a][s]);
        }
    }
    if (base >= 0) {
        out->have_baseline = 1;
        out->base_cost_ns = cost[base];
    }
    if (srep) {
        out->have_speedup = 1;
        out->speedup = cost[base] / cost[BK_ARM_C];
        percentile_interval(srep, R, in->confidence, &out->speedup_lo, &out->speedup_hi);
    }
    /* the replicate arrays are sorted in place: srep was computed from them first */
    for (int a = 0; a < BK_NARMS; a++)
        if (have[a])
            percentile_interval(rep[a], R, in->confidence, &out->arms[a].cost_lo_ns,
                                &out->arms[a].cost_hi_ns);
    if (base == POOL)
        percentile_interval(rep[POOL], R, in->confidence, &out->base_lo_ns, &out->base_hi_ns);
    else if (base == BK_ARM_B) {
        out->base_lo_ns = out->arms[BK_ARM_B].cost_lo_ns;
        out->base_hi_ns = out->arms[BK_ARM_B].cost_hi_ns;
    }
    t2 = bk_now_ns();
    decide(in, out, problem);
out:
    for (int k = 0; k < NSETS; k++) {
        for (int s = 0; s < BK_MAX_SHAPES; s++)
            free(buf[k][s]);
        free(rep[k]);
    }
    free(srep);
    if (timing) {
        uint64_t t3 = bk_now_ns();
        timing->sort_s = (double)(t1 - t0) * 1e-9;
        timing->bootstrap_s = (double)(t2 - t1) * 1e-9;
        timing->total_s = (double)(t3 - t0) * 1e-9;
    }
    return st;
}

int bk_score_thin_margin(const bk_score *sc, int rounds, double *margin)
{
    if (rounds > 1 || !sc->have_drift || !sc->have_speedup)
        return 0;
    double bar = 1.0 + sc->min_gain, m;
    if (sc->verdict == BK_VERDICT_PASS)
        m = sc->speedup_lo - bar;
    else if (sc->verdict == BK_VERDICT_FAIL && sc->quality != BK_QUALITY_FAIL)
        m = bar - sc->speedup_hi; /* a quality FAIL stands whatever the speed */
    else
        return 0;
    if (margin)
        *margin = m;
    return m < fabs(sc->drift);
}
