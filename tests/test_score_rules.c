/* test_score_rules.c - the scoring rules with rounds (protocol.repeats), and the rules
 * pinned at their edges: interval indices, strict bars and limits, weights, zero cost,
 * bc_only, thin margin (a mutation audit found each unpinned). */
#include "score_fixtures.h"

#include <math.h>

/* ---- rounds (protocol.repeats): each round in fresh processes ---- */

/* An arm of 2 rounds: a shape's statistic is the mean of its rounds' lower medians; the
 * pooled baseline merges round k of B with round k of B', then takes the same mean. */
static void test_rounds_by_hand(void **state)
{
    (void)state;
    bk_score_input in;
    two_shapes(&in);
    in.drift_limit = 10.0;
    /* B shape 0: rounds {40,10,30} -> 30 and {5,7,6} -> 6: 18; shape 1: {100,300} -> 100,
     * {200,400} -> 200: 150 */
    uint64_t b0[] = { 40, 10, 30, 5, 7, 6 }, b1[] = { 100, 300, 200, 400 };
    /* C: {10} and {20}: 15; {100} and {120}: 110 */
    uint64_t c0[] = { 10, 20 }, c1[] = { 100, 120 };
    /* B': {50,50,50} and {8,8,8}: 29; {250,150} -> 150 and {500,100} -> 100: 125 */
    uint64_t p0[] = { 50, 50, 50, 8, 8, 8 }, p1[] = { 250, 150, 500, 100 };
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .rounds = 2, .cp = { b0, b1 }, .n = { 6, 4 } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .rounds = 2, .cp = { c0, c1 }, .n = { 2, 2 } };
    in.arms[BK_ARM_BP] = (bk_score_arm){ .present = 1, .rounds = 2, .cp = { p0, p1 }, .n = { 6, 4 } };
    bk_score out = score_ok(&in);
    assert_true(out.arms[BK_ARM_B].cost_ns == 0.25 * 18 + 0.75 * 150);
    assert_true(out.arms[BK_ARM_B].median_ns[0] == 18.0);
    assert_int_equal(out.arms[BK_ARM_B].n[0], 6);
    assert_true(out.arms[BK_ARM_C].cost_ns == 0.25 * 15 + 0.75 * 110);
    assert_true(out.arms[BK_ARM_BP].cost_ns == 0.25 * 29 + 0.75 * 125);
    /* pool, shape 0: round 0 {10,30,40,50,50,50} -> 40, round 1 {5,6,7,8,8,8} -> 7: 23.5;
     * shape 1: {100,150,250,300} -> 150, {100,200,400,500} -> 200: 175 */
    assert_string_equal(out.baseline, "B+B'");
    assert_true(out.base_cost_ns == 0.25 * 23.5 + 0.75 * 175);
    assert_true(out.drift == (0.25 * 29 + 0.75 * 125) / (0.25 * 18 + 0.75 * 150) - 1.0);
    /* the interval is drawn round by round, reproducibly */
    bk_score again = score_ok(&in);
    assert_memory_equal(&out.speedup_lo, &again.speedup_lo, sizeof out.speedup_lo);
    assert_memory_equal(&out.speedup_hi, &again.speedup_hi, sizeof out.speedup_hi);
}

/* A B' of 2 rounds that failed (its rounds left at 0, as evaluate leaves a failed arm's) is
 * not pooled, so its rounds need not match B's: scored from B vs C, the failure a reason. */
static void test_failed_bprime_with_rounds(void **state)
{
    (void)state;
    bk_score_input in;
    two_shapes(&in);
    uint64_t b0[] = { 40, 10, 30, 5, 7, 6 }, b1[] = { 100, 300, 200, 400 };
    uint64_t c0[] = { 10, 20 }, c1[] = { 100, 120 };
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .rounds = 2, .cp = { b0, b1 }, .n = { 6, 4 } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .rounds = 2, .cp = { c0, c1 }, .n = { 2, 2 } };
    in.arms[BK_ARM_BP] = (bk_score_arm){ .present = 1, .failed = 1 };
    snprintf(in.arms[BK_ARM_BP].reason, sizeof in.arms[BK_ARM_BP].reason, "terminated");
    bk_score out = score_ok(&in);
    assert_true(out.arms[BK_ARM_B].cost_ns == 0.25 * 18 + 0.75 * 150);
    assert_string_equal(out.baseline, "B");
    assert_non_null(strstr(out.reasons, "arm B' failed: terminated"));
}

/* rounds 0 and 1 are both one round, scored exactly as before rounds existed */
static void test_one_round_unchanged(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 990, 1003, 31);
    bk_score a = score_ok(&in);
    for (int k = 0; k < BK_NARMS; k++)
        in.arms[k].rounds = 1;
    bk_score b = score_ok(&in);
    assert_memory_equal(&a, &b, sizeof a);
}

/* Per-round offsets (a process's own speed) average out over rounds: B and B' of 4 rounds
 * whose offsets are +-1.5% in different orders agree within the rounds' noise, while their
 * first rounds alone disagree by 3%; and the interval, resampling rounds, shows them. */
static void test_rounds_average_offsets(void **state)
{
    (void)state;
    bk_rng rng;
    bk_rng_seed(&rng, 77);
    const double off_b[4] = { 1.015, 0.985, 1.015, 0.985 }, off_p[4] = { 0.985, 1.015, 0.985, 1.015 };
    bk_score_input in;
    bk_score_input_init(&in);
    in.nshapes = 1;
    in.weights[0] = 1.0;
    in.quality = BK_QUALITY_PASS;
    in.drift_limit = 0.01;
    in.drift_policy = BK_DRIFT_STRICT;
    uint64_t *b = take(4 * 500), *p = take(4 * 500), *c = take(4 * 500);
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 500; i++) {
            b[j * 500 + i] = (uint64_t)(off_b[j] * (990 + 20 * bk_rng_uniform(&rng)));
            p[j * 500 + i] = (uint64_t)(off_p[j] * (990 + 20 * bk_rng_uniform(&rng)));
            c[j * 500 + i] = (uint64_t)(990 + 20 * bk_rng_uniform(&rng));
        }
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .rounds = 4, .cp = { b }, .n = { 2000 } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .rounds = 4, .cp = { c }, .n = { 2000 } };
    in.arms[BK_ARM_BP] = (bk_score_arm){ .present = 1, .rounds = 4, .cp = { p }, .n = { 2000 } };
    bk_score four = score_ok(&in);
    assert_true(fabs(four.drift) < 0.002);
    assert_false(four.drift_exceeded);
    /* the interval resamples the rounds too: B's shows its rounds' +-1.5%, C's (no
     * offsets) only the iterations' noise */
    const bk_arm_summary *sb = &four.arms[BK_ARM_B], *sc = &four.arms[BK_ARM_C];
    assert_true((sb->cost_hi_ns - sb->cost_lo_ns) / sb->cost_ns > 0.02);
    assert_true((sc->cost_hi_ns - sc->cost_lo_ns) / sc->cost_ns < 0.005);
    assert_true(sb->cost_lo_ns < sb->cost_ns && sb->cost_ns < sb->cost_hi_ns);
    /* the first round of each alone: 3% apart, past the 1% limit */
    for (int k = 0; k < BK_NARMS; k++) {
        in.arms[k].rounds = 1;
        in.arms[k].n[0] = 500;
    }
    bk_score one = score_ok(&in);
    assert_true(one.drift < -0.025);
    assert_true(one.drift_exceeded);
    assert_int_equal(one.verdict, BK_VERDICT_NO_DECISION);
}

/* A one-round PASS or FAIL that clears its bar by less than B' differs from B is
 * flagged; a wide margin, several rounds, a quality FAIL or NO_DECISION is not. */
static void test_thin_margin(void **state)
{
    (void)state;
    bk_score_input in;
    double m = -1;
    /* B 1000, B' 1015 (drift +1.5%), C at 1.04x the pooled baseline */
    bracket(&in, 1007.5 / 1.04, 1015, 41);
    in.min_gain = 0.025;
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_true(out.drift > 0.012 && out.drift < 0.018);
    assert_int_equal(bk_score_thin_margin(&out, 1, &m), 1);
    assert_true(m == out.speedup_lo - 1.025 && m > 0 && m < out.drift);
    assert_int_equal(bk_score_thin_margin(&out, 0, NULL), 1); /* 0 rounds: one */
    assert_int_equal(bk_score_thin_margin(&out, 3, &m), 0);
    /* the same bracket against a low bar: the margin (about 3%) beats the drift */
    in.min_gain = 0.005;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_int_equal(bk_score_thin_margin(&out, 1, &m), 0);
    assert_true(m == out.speedup_lo - 1.005 && m > out.drift);
    /* a FAIL just under the bar */
    bracket(&in, 1007.5 / 0.99, 1015, 42);
    in.min_gain = 0.0;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_int_equal(bk_score_thin_margin(&out, 1, &m), 1);
    assert_true(m == 1.0 - out.speedup_hi && m > 0 && m < out.drift);
    /* a quality FAIL stands whatever the speed */
    in.quality = BK_QUALITY_FAIL;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_int_equal(bk_score_thin_margin(&out, 1, NULL), 0);
    /* NO_DECISION: nothing to flag */
    bracket(&in, 1007.5 / 1.01, 1015, 43);
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_int_equal(bk_score_thin_margin(&out, 1, NULL), 0);
}

static void test_rounds_bad_input(void **state)
{
    (void)state;
    bk_score_input in;
    bk_score out;
    bk_err err = { 0 };
    bracket(&in, 990, 1000, 5); /* 400 samples a shape */
    in.arms[BK_ARM_C].rounds = 3;
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "arm C shape 0 has 400 samples, not 3 rounds of one length");
    in.arms[BK_ARM_C].rounds = 2;
    in.arms[BK_ARM_B].rounds = 2;
    bk_err_clear(&err); /* an error keeps its first message */
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "arms B and B' have 2 and 1 rounds");
    in.arms[BK_ARM_BP].rounds = 2;
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_OK);
    in.arms[BK_ARM_C].rounds = BK_MAX_ROUNDS + 1;
    bk_err_clear(&err);
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "arm C has 17 rounds (0..16)");
}

/* ---- rules pinned at their edges (a mutation audit found each unpinned) ---- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The intervals replayed from docs/record.md "Recomputing the score", steps 5 and 6: a
 * bc_only look of one shape and one round draws, per replicate, one median draw of B then
 * one of C (m = (n - 1) / 2 + 1, u = beta(m, n - m + 1), idx = min(trunc(n u), n - 1));
 * S_r = B_r / C_r; lo and hi are the sorted replicates at the indices the record's rules
 * give (their table: 49 and 1950 of 2000, 2 and 97 of 100; 50 and 1950 of 2001, where
 * both quantiles fall on an index). */
static void test_interval_order_statistics(void **state)
{
    (void)state;
    enum { N = 101 };
    static const struct { int R; long lo, hi; } cases[] = {
        { 2001, 50, 1950 }, { 2000, 49, 1950 }, { 100, 2, 97 } };
    bk_rng rng;
    bk_rng_seed(&rng, 77);
    bk_score_input in;
    bk_score_input_init(&in);
    in.nshapes = 1;
    in.weights[0] = 1.0;
    in.bc_only = 1;
    in.quality = BK_QUALITY_PASS;
    in.seed = 4242;
    uint64_t *b = uniform(&rng, N, 1000, 2000), *c = uniform(&rng, N, 900, 1800);
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .n = { N }, .cp = { b } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .n = { N }, .cp = { c } };
    uint64_t sb[N], sc[N];
    memcpy(sb, b, sizeof sb);
    memcpy(sc, c, sizeof sc);
    qsort(sb, N, sizeof *sb, cmp_u64);
    qsort(sc, N, sizeof *sc, cmp_u64);
    const size_t m = (N - 1) / 2 + 1;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int R = cases[t].R;
        double *s = malloc((size_t)R * sizeof *s), *cb = malloc((size_t)R * sizeof *cb);
        assert_non_null(s);
        assert_non_null(cb);
        bk_rng draw;
        bk_rng_seed(&draw, in.seed);
        for (int r = 0; r < R; r++) {
            double v[2];
            const uint64_t *x[2] = { sb, sc };
            for (int k = 0; k < 2; k++) {
                size_t idx = (size_t)((double)N * bk_rng_beta(&draw, (double)m,
                                                              (double)(N - m + 1)));
                v[k] = (double)x[k][idx > N - 1 ? N - 1 : idx];
            }
            cb[r] = v[0];
            s[r] = v[0] / v[1];
        }
        qsort(s, (size_t)R, sizeof *s, cmp_dbl);
        qsort(cb, (size_t)R, sizeof *cb, cmp_dbl);
        in.resamples = R;
        bk_score out = score_ok(&in);
        assert_string_equal(out.baseline, "B");
        assert_true(out.speedup_lo == s[cases[t].lo]);
        assert_true(out.speedup_hi == s[cases[t].hi]);
        assert_true(out.arms[BK_ARM_B].cost_lo_ns == cb[cases[t].lo]);
        assert_true(out.arms[BK_ARM_B].cost_hi_ns == cb[cases[t].hi]);
        free(s);
        free(cb);
    }
}

/* The fewest iterations is the smallest n with 2 x 0.5^n <= 1 - confidence: where the two
 * sides are equal (0.75: n = 3; 0.5: n = 2), that n is enough. */
static void test_min_iters_at_equality(void **state)
{
    (void)state;
    assert_int_equal(bk_score_min_iters(0.75), 3);
    assert_int_equal(bk_score_min_iters(0.5), 2);
}

/* PASS needs lo > 1 + min_gain and FAIL hi < 1 + min_gain, both strictly: identical
 * constant arms give an interval [1, 1] that touches a bar of 1 (min_gain 0) from both
 * sides, and that decides nothing. */
static void test_bar_is_strict(void **state)
{
    (void)state;
    enum { N = 50 };
    uint64_t *v = take(N);
    for (size_t i = 0; i < N; i++)
        v[i] = 1000;
    bk_score_input in;
    bk_score_input_init(&in);
    in.nshapes = 1;
    in.weights[0] = 1.0;
    in.quality = BK_QUALITY_PASS;
    in.min_gain = 0.0;
    in.resamples = 200;
    for (int a = 0; a < BK_NARMS; a++)
        in.arms[a] = (bk_score_arm){ .present = 1, .n = { N }, .cp = { v } };
    bk_score out = score_ok(&in);
    assert_true(out.speedup_lo == 1.0 && out.speedup_hi == 1.0);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "interval straddles 1+min_gain");
}

/* An arm whose medians are all 0 ns is not costed: "arm X has zero cost", no speed-up,
 * NO_DECISION (a zero cost would divide the speed-up by zero). */
static void test_zero_cost_arm(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 23);
    uint64_t *z = take(400);
    memset(z, 0, 400 * sizeof *z);
    in.arms[BK_ARM_C].cp[0] = in.arms[BK_ARM_C].cp[1] = z;
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_false(out.arms[BK_ARM_C].scored);
    assert_false(out.have_speedup);
    assert_has(out.reasons, "arm C has zero cost (all medians 0 ns)");
}

/* Weights must sum to 1 within 1e-6: off by 1e-4 is refused, within 1e-7 is not. */
static void test_weight_sum_tolerance(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 24);
    bk_score out;
    bk_err err = { 0 };
    in.weights[1] = 0.5001;
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "weights sum to 1.0001");
    in.weights[1] = 0.5 + 1e-7;
    bk_err_clear(&err);
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_OK);
}

/* drift_exceeded is |drift| > drift_limit, strictly: no drift against a limit of 0 keeps
 * B' in the pooled baseline. */
static void test_drift_at_the_limit(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 25);
    in.arms[BK_ARM_BP] = in.arms[BK_ARM_B];
    in.drift_limit = 0.0;
    bk_score out = score_ok(&in);
    assert_true(out.have_drift && out.drift == 0.0);
    assert_false(out.drift_exceeded);
    assert_false(out.bp_excluded);
    assert_string_equal(out.baseline, "B+B'");
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
}

/* A bc_only look skips B' altogether (docs/record.md "Recomputing the score", step 3): a
 * short B' handed in beside it blocks nothing. */
static void test_bc_only_skips_bprime(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 26);
    in.bc_only = 1;
    in.arms[BK_ARM_BP].n[0] = in.arms[BK_ARM_BP].n[1] = 2; /* too few, were it looked at */
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_string_equal(out.baseline, "B");
    assert_null(strstr(out.reasons, "too few"));
}

/* A thin margin is a clearance *less than* |drift| (score.h): equal is not thin. Any
 * rounds > 1 carry the spread: 2 rounds flag nothing. */
static void test_thin_margin_edges(void **state)
{
    (void)state;
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    sc.have_drift = sc.have_speedup = 1;
    sc.min_gain = 0.0;
    sc.verdict = BK_VERDICT_PASS;
    sc.quality = BK_QUALITY_PASS;
    sc.speedup_lo = 1.5;
    sc.speedup_hi = 1.75;
    sc.drift = -0.5;
    double m = 0.0;
    assert_int_equal(bk_score_thin_margin(&sc, 1, &m), 0);
    assert_true(m == 0.5);
    sc.drift = -0.75;
    assert_int_equal(bk_score_thin_margin(&sc, 1, &m), 1);
    assert_int_equal(bk_score_thin_margin(&sc, 2, NULL), 0);
}

/* The plan's thresholds reach the scorer each in its own place. */
static void test_input_from_plan(void **state)
{
    (void)state;
    bk_plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->workload.nshapes = 2;
    p->workload.shapes[0].weight = 0.25;
    p->workload.shapes[1].weight = 0.75;
    p->workload.seed = 99;
    p->protocol.confidence = 0.9;
    p->protocol.min_gain = 0.03;
    p->protocol.drift_limit = 0.04;
    p->protocol.drift_policy = BK_DRIFT_STRICT;
    p->protocol.bootstrap_resamples = 500;
    bk_score_input in;
    bk_score_input_init(&in);
    bk_score_input_from_plan(&in, p);
    assert_int_equal(in.nshapes, 2);
    assert_true(in.weights[0] == 0.25 && in.weights[1] == 0.75);
    assert_true(in.confidence == 0.9);
    assert_true(in.min_gain == 0.03);
    assert_true(in.drift_limit == 0.04);
    assert_int_equal(in.drift_policy, BK_DRIFT_STRICT);
    assert_int_equal(in.resamples, 500);
    assert_true(in.seed == 99);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rounds_by_hand, free_pool),
        cmocka_unit_test_teardown(test_failed_bprime_with_rounds, free_pool),
        cmocka_unit_test_teardown(test_one_round_unchanged, free_pool),
        cmocka_unit_test_teardown(test_rounds_average_offsets, free_pool),
        cmocka_unit_test_teardown(test_rounds_bad_input, free_pool),
        cmocka_unit_test_teardown(test_thin_margin, free_pool),
        cmocka_unit_test_teardown(test_interval_order_statistics, free_pool),
        cmocka_unit_test_teardown(test_min_iters_at_equality, free_pool),
        cmocka_unit_test_teardown(test_bar_is_strict, free_pool),
        cmocka_unit_test_teardown(test_zero_cost_arm, free_pool),
        cmocka_unit_test_teardown(test_weight_sum_tolerance, free_pool),
        cmocka_unit_test_teardown(test_drift_at_the_limit, free_pool),
        cmocka_unit_test_teardown(test_bc_only_skips_bprime, free_pool),
        cmocka_unit_test_teardown(test_thin_margin_edges, free_pool),
        cmocka_unit_test_teardown(test_input_from_plan, free_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
