/* test_memory.c - rank 0's peak bytes for a plan, worked by hand for the it-cpu fixture,
 * and the memory this host and cgroup still have. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/memory.h"

static uint64_t peak(const char *const *sets, int nsets)
{
    const char *d = getenv("BK_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/plans/it-cpu.json",
             d && d[0] ? d : BK_SOURCE_DIR);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_load(path, sets, nsets, &p, &err), BK_OK);
    uint64_t b = bk_rank0_peak_bytes(&p);
    bk_plan_free(&p);
    return b;
}

/* it-cpu: 2 shapes (1 and 8 tokens x 4096), 300 iterations, lanes of 2 (tp 2).
 * Audit outputs (out, residual_out; bf16) of A and T from 2 lane ranks:
 * 2 arms x 2 ranks x 2 outputs x (4096 + 32768) x 2 B = 589824 B. */
static void test_peak_by_hand(void **state)
{
    (void)state;
    /* one round: slots 8 B x 2 ranks x 600 x (3 + 2 arms) = 48000; the scorer's
     * 72 B x 600 = 43200 beats the packed file's 10 B x 2 x 600 x 3 = 36000 */
    assert_int_equal(peak(NULL, 0), 48000 + 43200 + 589824);
    /* 4 rounds: slots 8 x 2 x 600 x 14 = 134400; scorer 72 x 600 x 4 = 172800 beats
     * the packed file's 10 x 2 x 600 x 12 = 144000 */
    const char *four[] = { "protocol.repeats=4" };
    assert_int_equal(peak(four, 1), 134400 + 172800 + 589824);
    /* lanes of 64, 10^7 iterations, 16 rounds: 2e7 per round; slots 8 x 64 x 2e7 x 50;
     * the packed file 10 x 64 x 2e7 x 48 beats the scorer's 72 x 2e7 x 16; outputs
     * 2 x 64 x 147456 */
    const char *big[] = { "arena.tp=64", "workload.iters=10000000", "protocol.repeats=16" };
    assert_int_equal(peak(big, 3), 512000000000ull + 614400000000ull + 18874368ull);
}

static void test_available(void **state)
{
    (void)state;
    uint64_t have = 0, total_kb = 0;
    int known = bk_mem_available(&have);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        skip(); /* not Linux: nothing to compare with */
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %" SCNu64 " kB", &total_kb) == 1)
            break;
    fclose(f);
    assert_true(total_kb > 0);
    assert_int_equal(known, 1);
    assert_true(have > 0);
    assert_true(have <= total_kb * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peak_by_hand),
        cmocka_unit_test(test_available),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
