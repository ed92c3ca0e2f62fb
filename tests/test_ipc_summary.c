/* test_ipc_summary.c - what bench_ipc_allreduce says of its table (tests/bench/ipc_summary.h):
 * speed-ups over NCCL + norm at 32 tokens or fewer, the crossovers, the two-shot's start and
 * the fastest IPC variant at 8 tokens, on made-up tables whose answers are known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/bench/ipc_summary.h"

#define ROWS 9 /* 1 .. 256 tokens */

/* NCCL + norm 12 us flat; the one-shot 3 us to 16 tokens, then 6, 12, 20, 40, 80; the two-shot
 * 5 us to 32 tokens, then 8, 10, 15 (faster than the one-shot from 32 tokens on). */
static void fill(double *t)
{
    static const double one[ROWS] = { 3, 3, 3, 3, 3, 6, 12, 20, 40 };
    static const double two[ROWS] = { 5, 5, 5, 5, 5, 5, 8, 10, 15 };
    for (int r = 0; r < ROWS; r++) {
        t[r * IPC_NVAR + IPC_NCCL] = 12;
        t[r * IPC_NVAR + IPC_ONESHOT] = one[r];
        t[r * IPC_NVAR + IPC_TWOSHOT] = two[r];
    }
}

static void test_crossovers(void **state)
{
    (void)state;
    double t[ROWS * IPC_NVAR];
    ipc_summary s;
    fill(t);
    ipc_summarize(t, ROWS, &s);
    /* one-shot: 4x at 1-16 tokens, 2x at 32 */
    assert_true(s.min_speedup[IPC_ONESHOT] == 2.0 && s.max_speedup[IPC_ONESHOT] == 4.0);
    assert_int_equal(s.faster_upto[IPC_ONESHOT], 32);
    assert_int_equal(s.first_slower[IPC_ONESHOT], 64); /* 12 against 12: not faster */
    assert_true(s.min_speedup[IPC_TWOSHOT] == 2.4 && s.max_speedup[IPC_TWOSHOT] == 2.4);
    assert_int_equal(s.faster_upto[IPC_TWOSHOT], 128);
    assert_int_equal(s.first_slower[IPC_TWOSHOT], 256);
    assert_int_equal(s.twoshot_from, 32);
    assert_true(s.best8_us == 3.0);
    assert_int_equal(s.best8_v, IPC_ONESHOT);
}

/* Rows a variant did not run (outside its domain: -1) are left out, not counted as losses;
 * a two-shot that loses again at the largest row has no start; nothing at 8 tokens, no
 * best. */
static void test_missing_rows(void **state)
{
    (void)state;
    double t[ROWS * IPC_NVAR];
    ipc_summary s;
    fill(t);
    t[8 * IPC_NVAR + IPC_ONESHOT] = -1; /* the one-shot's domain ends at 128 */
    t[3 * IPC_NVAR + IPC_ONESHOT] = -1;
    t[3 * IPC_NVAR + IPC_TWOSHOT] = -1;
    ipc_summarize(t, ROWS, &s);
    assert_int_equal(s.faster_upto[IPC_ONESHOT], 32);
    assert_true(s.best8_us == 0.0);
    assert_int_equal(s.twoshot_from, 32); /* 256 left out: 32 to 128 decide */
    t[7 * IPC_NVAR + IPC_TWOSHOT] = 30;   /* slower than the one-shot's 20 at 128 */
    ipc_summarize(t, ROWS, &s);
    assert_int_equal(s.twoshot_from, 0);
    t[8 * IPC_NVAR + IPC_ONESHOT] = 40;   /* both at 256 again: the two-shot wins there */
    t[7 * IPC_NVAR + IPC_TWOSHOT] = 20;   /* a tie at 128 is no win */
    ipc_summarize(t, ROWS, &s);
    assert_int_equal(s.twoshot_from, 256);
    /* slower than NCCL from the first row on */
    for (int r = 0; r < ROWS; r++)
        t[r * IPC_NVAR + IPC_ONESHOT] = 13;
    ipc_summarize(t, ROWS, &s);
    assert_int_equal(s.faster_upto[IPC_ONESHOT], 0);
    assert_int_equal(s.first_slower[IPC_ONESHOT], 1);
}

/* The summary of table t (ROWS rows) at world 8, hidden 6144 (the TP 8 goal's shape),
 * printed into buf (len bytes). */
static void print_summary(const double *t, char *buf, size_t len)
{
    ipc_summary s;
    ipc_summarize(t, ROWS, &s);
    FILE *f = fmemopen(buf, len - 1, "w");
    assert_non_null(f);
    ipc_summary_print(f, &s, 8, 6144);
    fclose(f);
    print_message("%s", buf);
}

/* The printed lines name the goals and say whether the table meets them. */
static void test_print(void **state)
{
    (void)state;
    double t[ROWS * IPC_NVAR];
    char buf[2048] = "";
    fill(t);
    t[3 * IPC_NVAR + IPC_ONESHOT] = 5.5; /* 8 tokens */
    print_summary(t, buf, sizeof buf);
    assert_non_null(strstr(buf, "summary (world 8, hidden 6144):"));
    assert_non_null(strstr(buf, "ipc_oneshot_fused: 2.00-4.00x the speed of nccl_then_rmsnorm "
                                "at 32 tokens or fewer (goal 3x: not met); faster up to 32 "
                                "tokens; not faster from 64"));
    assert_non_null(strstr(buf, "ipc_twoshot_fused: 2.40-2.40x"));
    assert_non_null(
        strstr(buf, "ipc_twoshot_fused faster than ipc_oneshot_fused from 32 tokens on"));
    assert_non_null(strstr(buf, "8 tokens: ipc_twoshot_fused 5.00 us, the faster IPC variant "
                                "(goal 6 us at TP 8: met)"));
}

/* The goal's shape without an IPC time at 8 tokens: said to be unmeasured, never met. */
static void test_print_unmeasured(void **state)
{
    (void)state;
    double t[ROWS * IPC_NVAR];
    char buf[2048] = "";
    fill(t);
    t[3 * IPC_NVAR + IPC_ONESHOT] = -1;
    t[3 * IPC_NVAR + IPC_TWOSHOT] = -1;
    print_summary(t, buf, sizeof buf);
    assert_non_null(strstr(buf, "8 tokens: no IPC variant ran (goal 6 us at TP 8: unmeasured)"));
    assert_null(strstr(buf, ": met)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crossovers),
        cmocka_unit_test(test_missing_rows),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_print_unmeasured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
