/* test_straggler.c - which lane ranks count as stragglers (BK_STRAGGLER_FACTOR x the lane's
 * lower median of per-rank costs), and the note an arm's reason gets (none where ranks of a
 * lane share a GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* An arm of two ranks, one shape of 3 iterations: rank 1's samples 5x rank 0's. */
static void slow_arm(bk_run *run, bk_arm_run *a, bk_rank_data r[2], uint64_t ns[2][3],
                     uint64_t *rows[2])
{
    memset(run, 0, sizeof *run);
    memset(a, 0, sizeof *a);
    memset(r, 0, 2 * sizeof *r);
    run->plan.workload.iters = 3;
    run->plan.workload.nshapes = 1;
    run->plan.workload.shapes[0].weight = 1.0;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++)
            ns[k][i] = k ? 5000 : 1000;
        rows[k] = ns[k];
        r[k].ns = &rows[k];
        r[k].mpi_rank = 2 + k;
        strcpy(r[k].host, "node7");
    }
    a->name = "C";
    a->world = 2;
    a->r = r;
    a->ok = 1;
}

/* The note names the slow rank, its host and MPI rank; where ranks of the lane share a GPU
 * (shared lanes on fewer GPUs) their own times are their turns on it: no note. */
static void test_note_and_shared_gpu(void **state)
{
    (void)state;
    bk_run run;
    bk_arm_run a;
    bk_rank_data r[2];
    uint64_t ns[2][3], *rows[2];
    slow_arm(&run, &a, r, ns, rows);
    bk_straggler_note(&run, &a);
    assert_non_null(strstr(a.reason, "straggler: lane rank 1 (host node7, MPI rank 3) cost 5.0 "
                                     "us, 5.0x the lane's median 1.0 us"));
    assert_int_equal(a.ok, 1);
    slow_arm(&run, &a, r, ns, rows);
    run.lane_gpu_shared = 1;
    bk_straggler_note(&run, &a);
    assert_string_equal(a.reason, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_in_an_even_lane),
        cmocka_unit_test(test_one_slow_rank),
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_note_and_shared_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
