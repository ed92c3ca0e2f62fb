/* test_straggler.c - which lane ranks count as stragglers (BK_STRAGGLER_FACTOR x the lane's
 * lower median of per-rank costs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runner/straggler.h"

static void test_none_in_an_even_lane(void **state)
{
    (void)state;
    double cost[4] = { 100, 110, 105, 180 };
    int who[4];
    double ref = 0;
    assert_int_equal(bk_stragglers(cost, 4, BK_STRAGGLER_FACTOR, who, &ref), 0);
    assert_true(ref == 105);
}

static void test_one_slow_rank(void **state)
{
    (void)state;
    double cost[4] = { 100, 100, 450, 101 };
    int who[4];
    double ref = 0;
    assert_int_equal(bk_stragglers(cost, 4, BK_STRAGGLER_FACTOR, who, &ref), 1);
    assert_int_equal(who[0], 2);
    assert_true(ref == 100);
}

static void test_two_ranks(void **state)
{
    (void)state;
    double cost[2] = { 400, 100 }; /* lower median: the faster rank */
    int who[2];
    double ref = 0;
    assert_int_equal(bk_stragglers(cost, 2, BK_STRAGGLER_FACTOR, who, &ref), 1);
    assert_int_equal(who[0], 0);
    assert_int_equal(bk_stragglers(cost, 1, BK_STRAGGLER_FACTOR, who, &ref), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_in_an_even_lane),
        cmocka_unit_test(test_one_slow_rank),
        cmocka_unit_test(test_two_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
