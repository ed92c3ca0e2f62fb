/* test_bf16_sum.c - how far a bf16 allreduce's own rounding (NCCL's: world - 1 roundings of
 * partial sums) takes residual_out from the exact sum, replayed on the CPU
 * (bk_target.bf16_sum_excess), and the warning `plan check` and `bracket run` give when a
 * plan's quality tolerance is below it (bk_catalog_bf16_sum_note). On the H200 NCCL at world
 * 8 (ranks on hosts of their own) measured 1.44 x a tolerance of 2e-2 at 37 x 6144 on the
 * GPU tests' inputs, which a replay of the same kind reproduced to the digit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/catalog.h"

#define AR "collective.allreduce_residual_rmsnorm"
#define BUDGET ((size_t)1 << 22) /* a shape's replay budget in plans of up to 4 shapes */

static void test_excess_grows_with_the_world(void **state)
{
    (void)state;
    const bk_target *t = bk_catalog_target(AR);
    assert_non_null(t);
    assert_non_null(t->bf16_sum_excess);
    const bk_shape s = { .tokens = 32, .hidden = 6144, .weight = 1 };
    const double w1 = t->bf16_sum_excess(&s, 1, 2, 1, 1e-2, 1e-2, BUDGET);
    const double w2 = t->bf16_sum_excess(&s, 1, 2, 2, 1e-2, 1e-2, BUDGET);
    const double w4 = t->bf16_sum_excess(&s, 1, 2, 4, 1e-2, 1e-2, BUDGET);
    const double w8 = t->bf16_sum_excess(&s, 1, 2, 8, 1e-2, 1e-2, BUDGET);
    print_message("excess at rtol = atol = 1e-2: world 1 %.3f, 2 %.3f, 4 %.3f, 8 %.3f\n", w1, w2,
                  w4, w8);
    assert_true(w1 == 0.0); /* nothing summed */
    /* one rounding of x0 + x1 and one of + residual: a few tenths of the tolerance */
    assert_true(w2 > 0.1 && w2 < 0.75);
    assert_true(w4 > w2 && w4 > 1.0);
    assert_true(w8 > w4 && w8 > 2.0 && w8 < 5.0);
    /* a tolerance 4x larger takes it in */
    assert_true(t->bf16_sum_excess(&s, 1, 2, 8, 4e-2, 4e-2, BUDGET) < 1.0);
    /* the same bits every time (the target's own inputs, by seed and shape) */
    assert_true(t->bf16_sum_excess(&s, 1, 2, 8, 1e-2, 1e-2, BUDGET) == w8);
    /* a wide lane is sampled, not skipped */
    assert_true(t->bf16_sum_excess(&s, 1, 2, 256, 1e-2, 1e-2, BUDGET) > w8);
}

/* The worst excess over the shapes a bf16-summing variant serves (what `bracket verify`
 * says before its float64 checks): only those shapes count; none, or world 1, gives 0. */
static void test_worst_over_served_shapes(void **state)
{
    (void)state;
    static const bk_variant sums = { .name = "sums_in_bf16", .bf16_sum = 1 };
    static const bk_variant exact = { .name = "sums_in_fp32", .bf16_sum = 0 };
    char path[1024];
    bk_err err = { 0 };
    bk_plan p;
    snprintf(path, sizeof path, "%s/plans/demo-cpu.json", BK_SOURCE_DIR);
    assert_int_equal(bk_plan_load(path, NULL, 0, &p, &err), BK_OK);
    assert_true(p.workload.nshapes >= 2);
    const bk_variant *by[BK_MAX_SHAPES] = { NULL };
    int at = 7;
    assert_true(bk_catalog_bf16_sum_worst(&p, by, 8, 1, &at) == 0.0);
    assert_int_equal(at, -1);
    by[0] = &exact;
    by[1] = &sums;
    const double e = bk_catalog_bf16_sum_worst(&p, by, 8, 1, &at);
    assert_int_equal(at, 1);
    const bk_target *t = bk_catalog_target(AR);
    assert_true(e == t->bf16_sum_excess(&p.workload.shapes[1], 1, 1, 8, p.quality.rtol,
                                        p.quality.atol, BUDGET));
    assert_true(e > 0.0);
    assert_true(bk_catalog_bf16_sum_worst(&p, by, 1, 1, &at) == 0.0);
    assert_int_equal(at, -1);
    bk_plan_free(&p);
}

/* The plan-level note: on cuda only nccl_then_rmsnorm sums in bf16. */
static void test_plan_note(void **state)
{
    (void)state;
    if (!bk_catalog_variant(AR, "nccl_then_rmsnorm")) {
        print_message("SKIPPED: built without CUDA, so the catalog has no nccl_then_rmsnorm\n");
        skip();
    }
    char path[1024], note[1024];
    bk_err err = { 0 };
    bk_plan p;
    snprintf(path, sizeof path, "%s/plans/demo-cuda.json", BK_SOURCE_DIR);
    static const char *const tp8[] = { "arena.tp=8" };
    assert_int_equal(bk_plan_load(path, tp8, 1, &p, &err), BK_OK);
    const double e = bk_catalog_bf16_sum_note(&p, BK_BACKEND_CUDA, note, sizeof note);
    print_message("tp 8: %.3f: %s\n", e, note);
    assert_true(e > 2.0);
    assert_non_null(strstr(note, "the incumbent nccl_then_rmsnorm sums the ranks' x in bf16"));
    assert_non_null(strstr(note, "at 8 ranks"));
    assert_non_null(strstr(note, "(rtol 0.01, atol 0.01; the worst sampled element in shape "));
    assert_non_null(strstr(note, "may fail a candidate that is right to one rounding"));
    bk_plan_free(&p);
    /* tp 2: below 0.75 of the tolerance, no note */
    static const char *const tp2[] = { "arena.tp=2" };
    assert_int_equal(bk_plan_load(path, tp2, 1, &p, &err), BK_OK);
    assert_true(bk_catalog_bf16_sum_note(&p, BK_BACKEND_CUDA, note, sizeof note) < 0.75);
    assert_string_equal(note, "");
    bk_plan_free(&p);
    /* an A/A of the incumbent rounds alike on both sides: nothing between A and T */
    static const char *const aa[] = { "arena.tp=8", "candidate.variant=nccl_then_rmsnorm" };
    assert_int_equal(bk_plan_load(path, aa, 2, &p, &err), BK_OK);
    assert_true(bk_catalog_bf16_sum_note(&p, BK_BACKEND_CUDA, note, sizeof note) == 0.0);
    assert_string_equal(note, "");
    bk_plan_free(&p);
    /* shapes the candidate routes to the incumbent (past ipc_oneshot_fused's 128 tokens):
     * A is the incumbent's own call there, rounding as T does, so nothing between them */
    static const char *const routed[] = {
        "arena.tp=8", "workload.shapes=[{\"tokens\":256,\"hidden\":4096,\"weight\":0.5},"
                      "{\"tokens\":1024,\"hidden\":4096,\"weight\":0.5}]"
    };
    assert_int_equal(bk_plan_load(path, routed, 2, &p, &err), BK_OK);
    assert_true(bk_routing_share(&p, BK_BACKEND_CUDA, 1) == 0.0);
    assert_true(bk_catalog_bf16_sum_note(&p, BK_BACKEND_CUDA, note, sizeof note) == 0.0);
    assert_string_equal(note, "");
    bk_plan_free(&p);
    /* a tolerance that covers the incumbent's rounding: the excess is said, no note */
    static const char *const wide[] = { "arena.tp=8", "quality.rtol=0.04", "quality.atol=0.04" };
    assert_int_equal(bk_plan_load(path, wide, 3, &p, &err), BK_OK);
    assert_true(bk_catalog_bf16_sum_note(&p, BK_BACKEND_CUDA, note, sizeof note) < 0.75);
    assert_string_equal(note, "");
    bk_plan_free(&p);
}

/* A target whose replay records the budgets it is given and answers with the shape's
 * index, so that the worst says which shape won. */
static size_t g_budgets[BK_MAX_SHAPES];
static int g_calls;
static double fake_excess(const bk_shape *s, uint64_t seed, int shape_index, int world,
                          double rtol, double atol, size_t budget)
{
    (void)s, (void)seed, (void)world, (void)rtol, (void)atol;
    if (g_calls < BK_MAX_SHAPES)
        g_budgets[g_calls] = budget;
    g_calls++;
    return shape_index;
}

/* The replay's budget is shared past 4 shapes (64 shapes of 8192 x 16384 at TP 2 took rank 0
 * 4.3 s of set-up at 2^22 each), never under 2^16 a shape, and the worst over a plan replays
 * every bf16-summed shape once, each within the budget of their count. */
static void test_budget_shared(void **state)
{
    (void)state;
    static const bk_variant sums = { .name = "sums_in_bf16", .bf16_sum = 1 };
    static const bk_target fake = { .name = "fake", .bf16_sum_excess = fake_excess };
    assert_int_equal(bk_catalog_bf16_sum_budget(1), (size_t)1 << 22);
    assert_int_equal(bk_catalog_bf16_sum_budget(4), (size_t)1 << 22);
    assert_int_equal(bk_catalog_bf16_sum_budget(5), ((size_t)1 << 24) / 5);
    assert_int_equal(bk_catalog_bf16_sum_budget(64), (size_t)1 << 18);
    assert_int_equal(bk_catalog_bf16_sum_budget(1000), (size_t)1 << 16);
    static bk_plan p; /* large: off the stack */
    memset(&p, 0, sizeof p);
    const bk_variant *by[BK_MAX_SHAPES] = { NULL };
    p.workload.nshapes = BK_MAX_SHAPES;
    for (int n = 1; n <= BK_MAX_SHAPES; n *= 4) {
        for (int i = 0; i < BK_MAX_SHAPES; i++) /* n of the 64, spread: by[63] among them */
            by[i] = (BK_MAX_SHAPES - 1 - i) % (BK_MAX_SHAPES / n) == 0 ? &sums : NULL;
        g_calls = 0;
        int at = -1;
        const double e = bk__bf16_sum_worst(&fake, &p, by, 2, 1, &at);
        assert_int_equal(g_calls, n);
        for (int c = 0; c < n; c++)
            assert_int_equal(g_budgets[c], bk_catalog_bf16_sum_budget(n));
        assert_int_equal(at, BK_MAX_SHAPES - 1);
        assert_true(e == BK_MAX_SHAPES - 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excess_grows_with_the_world),
        cmocka_unit_test(test_budget_shared),
        cmocka_unit_test(test_worst_over_served_shapes),
        cmocka_unit_test(test_plan_note),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
