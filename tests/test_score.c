/* test_score.c - the scoring rules: critical path, lower median, weighted cost, verdicts,
 * drift policies, the bootstrap's reproducibility and coverage, and the seeded RNG (rounds
 * and the rules' edges: test_score_rules.c). */
#include "score_fixtures.h"

#include <math.h>

/* ---- basics ---- */

static void test_lower_median(void **state)
{
    (void)state;
    const uint64_t even[] = { 1, 2, 3, 5 }, odd[] = { 1, 2, 9 }, one[] = { 7 };
    assert_int_equal(bk_lower_median(even, 4), 2); /* not 2.5, not the upper 3 */
    assert_int_equal(bk_lower_median(odd, 3), 2);
    assert_int_equal(bk_lower_median(one, 1), 7);

    /* the scorer sorts and takes the lower median too */
    bk_score_input in;
    bk_score_input_init(&in);
    in.nshapes = 1;
    in.weights[0] = 1.0;
    in.bc_only = 1;
    uint64_t b[] = { 40, 10, 30, 20 }, c[] = { 6, 5, 8, 7, 100, 1 };
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .cp = { b }, .n = { 4 } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .cp = { c }, .n = { 6 } };
    bk_score out = score_ok(&in);
    assert_true(out.arms[BK_ARM_B].median_ns[0] == 20.0);
    assert_true(out.arms[BK_ARM_C].median_ns[0] == 6.0);
    assert_true(out.speedup == 20.0 / 6.0);
    assert_int_equal(b[0], 40); /* the input is not modified */
}

static void test_critical_path(void **state)
{
    (void)state;
    const uint64_t r0[] = { 5, 9, 1, 4 }, r1[] = { 7, 2, 3, 4 }, r2[] = { 1, 1, 8, 0, 99 };
    const uint64_t *ranks[] = { r0, r1, r2 };
    size_t counts[] = { 4, 4, 4 }, n = 0;
    uint64_t out[8];
    int incomplete = -1;
    bk_err err = { 0 };
    assert_int_equal(bk_critical_path(ranks, counts, 3, out, 8, &n, &incomplete, &err), BK_OK);
    assert_int_equal(n, 4);
    assert_int_equal(incomplete, 0);
    const uint64_t want[] = { 7, 9, 8, 4 };
    assert_memory_equal(out, want, sizeof want);

    /* rank 2 has one more iteration, rank 1 one fewer: only the common 3 count */
    counts[1] = 3;
    counts[2] = 5;
    assert_int_equal(bk_critical_path(ranks, counts, 3, out, 8, &n, &incomplete, &err), BK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(incomplete, 1);

    assert_int_equal(bk_critical_path(ranks, counts, 3, out, 2, &n, &incomplete, &err),
                     BK_ERR_INPUT);
    assert_has(err.msg, "need 3");
    bk_err_clear(&err);
    assert_int_equal(bk_critical_path(ranks, counts, 0, out, 8, &n, &incomplete, &err),
                     BK_ERR_INPUT);
}

static void test_sort(void **state)
{
    (void)state;
    bk_rng rng;
    bk_rng_seed(&rng, 3);
    size_t n = 10007;
    uint64_t *a = take(n), *b = take(n);
    for (size_t i = 0; i < n; i++) /* mixed magnitudes: low bytes and a few huge values */
        a[i] = b[i] = i % 97 == 0 ? bk_rng_next(&rng) : bk_rng_next(&rng) % 5000;
    bk_err err = { 0 };
    assert_int_equal(bk_sort_u64(a, n, &err), BK_OK);
    qsort(b, n, sizeof *b, cmp_u64);
    assert_memory_equal(a, b, n * sizeof *a);
}

static void test_weighted_cost_by_hand(void **state)
{
    (void)state;
    bk_score_input in;
    two_shapes(&in);
    uint64_t b0[] = { 40, 10, 30, 20 }, b1[] = { 100, 300, 200 };
    uint64_t c0[] = { 10, 10, 10 }, c1[] = { 100, 100 };
    uint64_t p0[] = { 50, 50 }, p1[] = { 250, 150, 400 };
    in.arms[BK_ARM_B] = (bk_score_arm){ .present = 1, .cp = { b0, b1 }, .n = { 4, 3 } };
    in.arms[BK_ARM_C] = (bk_score_arm){ .present = 1, .cp = { c0, c1 }, .n = { 3, 2 } };
    in.arms[BK_ARM_BP] = (bk_score_arm){ .present = 1, .cp = { p0, p1 }, .n = { 2, 3 } };
    in.drift_limit = 10.0; /* keep B' pooled */
    bk_score out = score_ok(&in);
    /* B: 0.25 * 20 + 0.75 * 200 */
    assert_true(out.arms[BK_ARM_B].cost_ns == 155.0);
    /* C: 0.25 * 10 + 0.75 * 100 */
    assert_true(out.arms[BK_ARM_C].cost_ns == 77.5);
    /* B': 0.25 * 50 + 0.75 * 250 */
    assert_true(out.arms[BK_ARM_BP].cost_ns == 200.0);
    /* pooled: shape 0 {10,20,30,40,50,50} -> 30; shape 1 {100,150,200,250,300,400} -> 200 */
    assert_string_equal(out.baseline, "B+B'");
    assert_true(out.base_cost_ns == 0.25 * 30 + 0.75 * 200);
    assert_true(out.speedup == (0.25 * 30 + 0.75 * 200) / 77.5);
    assert_true(out.drift == 200.0 / 155.0 - 1.0);
    assert_int_equal(out.arms[BK_ARM_B].n[1], 3);
}

/* ---- verdicts ---- */

static void test_clear_pass(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 11);
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_string_equal(out.status, "reproduction_pending");
    assert_string_equal(bk_verdict_name(out.verdict), "PASS");
    assert_string_equal(out.baseline, "B+B'");
    assert_true(out.speedup_lo > 1.01 && out.speedup_lo <= out.speedup &&
                out.speedup <= out.speedup_hi);
    assert_true(fabs(out.speedup - 1000.0 / 900.0) < 0.01);
    assert_has(out.reasons, "clears 1+min_gain");
    for (int a = 0; a < BK_NARMS; a++) {
        assert_true(out.arms[a].scored);
        assert_true(out.arms[a].cost_lo_ns <= out.arms[a].cost_ns &&
                    out.arms[a].cost_ns <= out.arms[a].cost_hi_ns);
    }
    assert_true(out.min_gain == 0.01 && out.resamples == 2000 && out.confidence == 0.95);
}

static void test_clear_fail(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 1100, 1000, 12);
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_string_equal(out.status, "failed");
    assert_true(out.speedup_hi < 1.01);
    assert_has(out.reasons, "slower or no material gain");

    /* a gain smaller than min_gain also fails, even though C is faster */
    bracket(&in, 995, 1000, 13);
    in.min_gain = 0.05;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_true(out.speedup > 1.0);
}

/* Too few timed iterations a round for an interval of a median: NO_DECISION with the
 * reason, however clear the medians; at the minimum (6 at confidence 0.95, the smallest n
 * with 2 x 0.5^n <= 0.05) the clear gain passes. One iteration gave a zero-width interval
 * and a PASS or FAIL on an A/A before this rule. */
static void test_too_few_iterations(void **state)
{
    (void)state;
    assert_int_equal(bk_score_min_iters(0.95), 6);
    assert_int_equal(bk_score_min_iters(0.99), 8);
    assert_int_equal(bk_score_min_iters(0.9), 5);
    for (size_t n = 1; n <= 6; n++) {
        bk_score_input in;
        bk_rng rng;
        bk_rng_seed(&rng, 40 + n);
        bk_score_input_init(&in);
        in.nshapes = 2;
        in.weights[0] = in.weights[1] = 0.5;
        in.quality = BK_QUALITY_PASS;
        fill_arm(&in, BK_ARM_B, &rng, 400, 980, 1020);
        fill_arm(&in, BK_ARM_C, &rng, 400, 700, 710);
        fill_arm(&in, BK_ARM_BP, &rng, 400, 980, 1020);
        in.arms[BK_ARM_C].n[1] = n; /* one shape of C short */
        bk_score out = score_ok(&in);
        if (n < 6) {
            assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
            assert_has(out.reasons, "too few timed iterations to decide: arm C has");
            assert_has(out.reasons, "needs at least 6");
        } else {
            assert_int_equal(out.verdict, BK_VERDICT_PASS);
        }
    }
}

static void test_straddle(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 1000.0 / 1.01, 1000, 14);
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_string_equal(out.status, "no_decision");
    assert_true(out.speedup_lo <= 1.01 && out.speedup_hi >= 1.01);
    assert_has(out.reasons, "interval straddles 1+min_gain");
}

static void test_quality_fail_beats_fast_candidate(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 500, 1000, 15);
    in.quality = BK_QUALITY_FAIL;
    bk_strlcpy(in.quality_reason, "output 3: NaN at element 17", sizeof in.quality_reason);
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_true(out.speedup_lo > 1.5); /* the numbers are still recorded */
    assert_true(strncmp(out.reasons, "quality failed: output 3: NaN", 29) == 0);

    /* quality FAIL wins over a missing arm too */
    in.arms[BK_ARM_BP].present = 0;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_FAIL);
    assert_has(out.reasons, "arm B' missing");
}

static void test_missing_and_crashed_arms(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 16);
    in.arms[BK_ARM_C].present = 0;
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "arm C missing");
    assert_false(out.have_speedup);
    assert_true(out.arms[BK_ARM_B].scored); /* what could be costed still is */

    bracket(&in, 900, 1000, 16);
    in.arms[BK_ARM_BP].failed = 1;
    bk_strlcpy(in.arms[BK_ARM_BP].reason, "engine rank 1 crashed (signal 11)",
               sizeof in.arms[BK_ARM_BP].reason);
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "arm B' failed: engine rank 1 crashed (signal 11)");
    assert_string_equal(out.baseline, "B");
    assert_false(out.have_drift);

    bracket(&in, 900, 1000, 16);
    in.arms[BK_ARM_B].n[1] = 0;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "arm B has no timed iterations for shape 1");
}

static void test_quality_states(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 17);
    in.quality = BK_QUALITY_MISSING;
    bk_strlcpy(in.quality_reason, "T timed out", sizeof in.quality_reason);
    bk_score out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "quality evidence missing: T timed out");

    in.quality = BK_QUALITY_NOT_RUN;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_has(out.reasons, "quality not run");

    /* v7's first look: B and C alone, quality not yet run, B' absent */
    in.bc_only = 1;
    in.arms[BK_ARM_BP].present = 0;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_string_equal(out.baseline, "B");
    assert_false(out.arms[BK_ARM_BP].scored);
    assert_true(out.speedup == out.arms[BK_ARM_B].cost_ns / out.arms[BK_ARM_C].cost_ns);
}

static void test_drift_policies(void **state)
{
    (void)state;
    /* B' drifted 10% slower; C 4% faster than B: pooled would say ~9% */
    bk_score_input in;
    bracket(&in, 960, 1100, 18);
    bk_score out = score_ok(&in);
    assert_true(out.have_drift && out.drift_exceeded);
    assert_true(fabs(out.drift - 0.10) < 0.01);
    assert_int_equal(out.bp_excluded, 1);
    assert_string_equal(out.baseline, "B");
    assert_true(out.arms[BK_ARM_BP].scored); /* kept in the record */
    assert_true(out.speedup == out.arms[BK_ARM_B].cost_ns / out.arms[BK_ARM_C].cost_ns);
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_has(out.reasons, "B' kept in the record and excluded");

    in.drift_policy = BK_DRIFT_STRICT;
    out = score_ok(&in);
    assert_int_equal(out.verdict, BK_VERDICT_NO_DECISION);
    assert_int_equal(out.bp_excluded, 0);
    assert_string_equal(out.baseline, "B+B'");
    assert_has(out.reasons, "policy strict");

    /* within the limit both policies pool */
    in.drift_limit = 0.2;
    out = score_ok(&in);
    assert_false(out.drift_exceeded);
    assert_string_equal(out.baseline, "B+B'");
    assert_int_equal(out.verdict, BK_VERDICT_PASS);
    assert_true(out.speedup > out.arms[BK_ARM_B].cost_ns / out.arms[BK_ARM_C].cost_ns);
}

static void test_bad_input(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 900, 1000, 19);
    bk_score out;
    bk_err err = { 0 };
    in.weights[1] = 0.4;
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "weights sum to 0.9");
    in.weights[1] = 0.5;
    in.confidence = 1.0;
    bk_err_clear(&err);
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "confidence");
    in.confidence = 0.95;
    in.resamples = 0;
    bk_err_clear(&err);
    assert_int_equal(bk_score_compute(&in, &out, NULL, &err), BK_ERR_INPUT);
    assert_has(err.msg, "resamples");
}

/* ---- the bootstrap ---- */

static void test_bootstrap_reproducible(void **state)
{
    (void)state;
    bk_score_input in;
    bracket(&in, 990, 1000, 20);
    bk_score a = score_ok(&in), b = score_ok(&in);
    assert_memory_equal(&a.speedup_lo, &b.speedup_lo, sizeof a.speedup_lo);
    assert_memory_equal(&a.speedup_hi, &b.speedup_hi, sizeof a.speedup_hi);
    assert_memory_equal(&a.base_lo_ns, &b.base_lo_ns, sizeof a.base_lo_ns);
    for (int k = 0; k < BK_NARMS; k++) {
        assert_memory_equal(&a.arms[k].cost_lo_ns, &b.arms[k].cost_lo_ns, sizeof(double));
        assert_memory_equal(&a.arms[k].cost_hi_ns, &b.arms[k].cost_hi_ns, sizeof(double));
    }
    assert_string_equal(a.reasons, b.reasons);

    in.seed = 21;
    bk_score c = score_ok(&in);
    assert_true(c.speedup == a.speedup); /* the point estimate needs no randomness */
    assert_true(c.speedup_lo != a.speedup_lo || c.speedup_hi != a.speedup_hi);
    assert_true(c.seed == 21);
}

/* The O(1) order-statistic draw against a brute-force resample-and-sort. */
static void test_median_draw_matches_resampling(void **state)
{
    (void)state;
    enum { N = 6, M = (N - 1) / 2 + 1, TRIALS = 200000 };
    int fast[N] = { 0 }, slow[N] = { 0 };
    bk_rng rng;
    bk_rng_seed(&rng, 5);
    for (int t = 0; t < TRIALS; t++) {
        size_t idx = (size_t)(N * bk_rng_beta(&rng, M, N - M + 1));
        fast[idx > N - 1 ? N - 1 : idx]++;
        int cnt[N] = { 0 }; /* resample N indices, take the M-th smallest */
        for (int i = 0; i < N; i++)
            cnt[bk_rng_next(&rng) % N]++;
        int seen = 0, j = 0;
        while ((seen += cnt[j]) < M)
            j++;
        slow[j]++;
    }
    for (int j = 0; j < N; j++) /* 5 standard errors at most (p near 0.3: ~0.005) */
        assert_true(fabs((double)fast[j] - slow[j]) / TRIALS < 0.006);
}

static void coverage_set(bk_score_input *in, bk_rng *rng, size_t n)
{
    /* B and B': uniform [1000, 3000) us, median 2000 us; C: [800, 2400), median 1600 */
    bk_score_input_init(in);
    in->nshapes = 1;
    in->weights[0] = 1.0;
    in->quality = BK_QUALITY_PASS;
    in->drift_limit = 1.0;
    int arms[] = { BK_ARM_B, BK_ARM_C, BK_ARM_BP };
    for (int k = 0; k < 3; k++) {
        double lo = arms[k] == BK_ARM_C ? 800e3 : 1000e3, hi = arms[k] == BK_ARM_C ? 2400e3 : 3000e3;
        in->arms[arms[k]] = (bk_score_arm){ .present = 1, .n = { n } };
        in->arms[arms[k]].cp[0] = uniform(rng, n, lo, hi);
    }
}

static void test_interval_coverage(void **state)
{
    (void)state;
    const double truth = 2000.0 / 1600.0;
    bk_rng rng;
    bk_rng_seed(&rng, 99);
    bk_score_input in;

    /* one large sample: the interval holds the true ratio and is narrow */
    coverage_set(&in, &rng, 100001);
    bk_score out = score_ok(&in);
    assert_true(out.speedup_lo <= truth && truth <= out.speedup_hi);
    assert_true(out.speedup_hi - out.speedup_lo < 0.02);

    /* many small samples: about 95% of the 95% intervals hold it */
    int covered = 0;
    for (int t = 0; t < 100; t++) {
        free_pool(NULL);
        coverage_set(&in, &rng, 301);
        in.seed = (uint64_t)t + 1000;
        in.resamples = 1000;
        out = score_ok(&in);
        covered += out.speedup_lo <= truth && truth <= out.speedup_hi;
    }
    assert_in_range(covered, 88, 100);
}

/* ---- the RNG ---- */

static void test_rng(void **state)
{
    (void)state;
    bk_rng a, b;
    bk_rng_seed(&a, 0); /* splitmix64 from 0: its published first outputs */
    assert_true(a.s[0] == 0xe220a8397b1dcdafull && a.s[1] == 0x6e789e6aa1b965f4ull);
    a.s[0] = 1, a.s[1] = 2, a.s[2] = 3, a.s[3] = 4; /* xoshiro256** reference outputs */
    assert_true(bk_rng_next(&a) == 11520u);
    assert_true(bk_rng_next(&a) == 0u);
    assert_true(bk_rng_next(&a) == 1509978240u);
    assert_true(bk_rng_next(&a) == 1215971899390074240ull);

    bk_rng_seed(&a, 42);
    bk_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) { /* same seed, same stream, bit for bit */
        double x = bk_rng_beta(&a, 3.0, 0.7), y = bk_rng_beta(&b, 3.0, 0.7);
        assert_memory_equal(&x, &y, sizeof x);
    }
    bk_rng_seed(&b, 43);
    assert_true(bk_rng_next(&a) != bk_rng_next(&b));
    double sg = 0, sg_small = 0, sb = 0, sn = 0, sn2 = 0;
    const int T = 100000;
    for (int i = 0; i < T; i++) {
        double g = bk_rng_gamma(&a, 3.0);
        double u = bk_rng_uniform(&a);
        assert_true(u >= 0.0 && u < 1.0);
        sg += g;
        sg_small += bk_rng_gamma(&a, 0.5);
        sb += bk_rng_beta(&a, 2.0, 5.0);
        double z = bk_rng_normal(&a);
        sn += z;
        sn2 += z * z;
    }
    assert_true(fabs(sg / T - 3.0) < 0.03);       /* mean a */
    assert_true(fabs(sg_small / T - 0.5) < 0.01); /* the shape < 1 boost */
    assert_true(fabs(sb / T - 2.0 / 7.0) < 0.005);
    assert_true(fabs(sn / T) < 0.015 && fabs(sn2 / T - 1.0) < 0.02);
    assert_true(isnan(bk_rng_gamma(&a, 0.0)) && isnan(bk_rng_beta(&a, -1.0, 1.0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_lower_median, free_pool),
        cmocka_unit_test_teardown(test_critical_path, free_pool),
        cmocka_unit_test_teardown(test_sort, free_pool),
        cmocka_unit_test_teardown(test_weighted_cost_by_hand, free_pool),
        cmocka_unit_test_teardown(test_clear_pass, free_pool),
        cmocka_unit_test_teardown(test_clear_fail, free_pool),
        cmocka_unit_test_teardown(test_straddle, free_pool),
        cmocka_unit_test_teardown(test_too_few_iterations, free_pool),
        cmocka_unit_test_teardown(test_quality_fail_beats_fast_candidate, free_pool),
        cmocka_unit_test_teardown(test_missing_and_crashed_arms, free_pool),
        cmocka_unit_test_teardown(test_quality_states, free_pool),
        cmocka_unit_test_teardown(test_drift_policies, free_pool),
        cmocka_unit_test_teardown(test_bad_input, free_pool),
        cmocka_unit_test_teardown(test_bootstrap_reproducible, free_pool),
        cmocka_unit_test_teardown(test_median_draw_matches_resampling, free_pool),
        cmocka_unit_test_teardown(test_interval_coverage, free_pool),
        cmocka_unit_test_teardown(test_rng, free_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
