/* test_memory.c - rank 0's peak bytes for a plan, worked by hand for the it-cpu fixture,
 * split into samples and audit outputs for the refusal's advice, and the memory this host
 * and cgroup still have. */
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

static bk_plan load(const char *const *sets, int nsets)
{
    const char *d = getenv("BK_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/plans/it-cpu.json",
             d && d[0] ? d : BK_SOURCE_DIR);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_load(path, sets, nsets, &p, &err), BK_OK);
    return p;
}

/* The refusal names what holds the memory and advises on the larger part: one huge shape's
 * audit outputs are not helped by fewer iterations, many iterations not by smaller shapes. */
static void test_too_big_says_what_holds_it(void **state)
{
    (void)state;
    char msg[1024];
    /* 2^21 tokens x 1024: 2 outputs x 2^31 elements x 2 B x 2 ranks x 2 audit arms = 32 GiB,
     * the samples 300 x 2 shapes of it-cpu as by hand above, but one shape: 45600 B */
    const char *huge[] = { "workload.shapes=[{\"tokens\":4,\"hidden\":64,\"weight\":1},"
                           "{\"tokens\":2097152,\"hidden\":1024,\"weight\":1}]" };
    bk_plan p = load(huge, 1);
    bk_rank0_peak k;
    bk_rank0_peak_split(&p, &k);
    assert_int_equal(k.top_shape, 1);
    assert_int_equal(k.top_outputs, 32ull << 30);
    assert_int_equal(k.outputs, (32ull << 30) + 2 * 2 * 2 * 256 * 2);
    assert_int_equal(k.samples, 48000 + 43200);
    assert_int_equal(k.total, k.samples + k.outputs);
    assert_int_equal(bk_rank0_peak_bytes(&p), k.total);
    bk_rank0_too_big_text(&p, 1ull << 30, msg, sizeof msg);
    assert_string_equal(msg, "rank 0 would hold about 32.0 GiB for this plan (89.1 KiB for the "
                             "samples of 3 timed arms x 1 round(s), lanes of 2 ranks, 2 shape(s) "
                             "x 300 iterations; 32.0 GiB for the audit outputs, every lane rank's "
                             "output tensors of each shape from arms A and T) but this host (or "
                             "its cgroup) has 1.0 GiB available; lower tokens x hidden of the "
                             "largest shapes (workload.shapes[1], tokens 2097152 x hidden 1024, "
                             "holds 32.0 GiB of the audit outputs)");
    bk_plan_free(&p);
    /* the samples' plan of test_peak_by_hand: the advice is the iterations and rounds */
    const char *big[] = { "arena.tp=64", "workload.iters=10000000", "protocol.repeats=16" };
    p = load(big, 3);
    bk_rank0_peak_split(&p, &k);
    assert_int_equal(k.samples, 512000000000ull + 614400000000ull);
    assert_int_equal(k.outputs, 18874368ull);
    bk_rank0_too_big_text(&p, 1ull << 30, msg, sizeof msg);
    assert_non_null(strstr(msg, "rank 0 would hold about 1049.1 GiB for this plan (1049.0 GiB "
                                "for the samples of 3 timed arms x 16 round(s), lanes of 64 "
                                "ranks, 2 shape(s) x 10000000 iterations; 18.0 MiB for the "
                                "audit outputs"));
    assert_non_null(strstr(msg, "; lower workload.iters, protocol.repeats or the number of "
                                "shapes"));
    bk_plan_free(&p);
    char b[32];
    assert_string_equal(bk_mem_text(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(bk_mem_text(3u << 20, b, sizeof b), "3.0 MiB");
    assert_string_equal(bk_mem_text(5ull << 30, b, sizeof b), "5.0 GiB");
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
        cmocka_unit_test(test_too_big_says_what_holds_it),
        cmocka_unit_test(test_available),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
