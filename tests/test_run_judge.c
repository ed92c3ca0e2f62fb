/* test_run_judge.c - how an arm's failed lane ranks are named in its reason: an engine the
 * runner killed as the run was terminated, and a reason longer than its buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/run.h"
#include "runner/terminate.h"

#define WORLD 16

static bk_run *make_run(bk_arm_run *a, bk_rank_data *r, int world)
{
    bk_run *run = calloc(1, sizeof *run);
    assert_non_null(run);
    run->plan.workload.iters = 10;
    run->plan.workload.nshapes = 1;
    memset(a, 0, sizeof *a);
    memset(r, 0, sizeof *r * (size_t)world);
    a->name = "C";
    a->world = world;
    a->r = r;
    for (int i = 0; i < world; i++) {
        r[i].mpi_rank = 2 + i;
        snprintf(r[i].host, sizeof r[i].host, "node-%02d", i);
        r[i].reported = 1;
        r[i].proc.done = 1;
    }
    return run;
}

/* SIGTERM reached rank 0; the runner killed the engine: said once, not "ended by killed" */
static void test_killed_as_terminated(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[1];
    bk_run *run = make_run(&a, r, 1);
    a.terminated = 1;
    r[0].proc.killed = 1;
    r[0].proc.signal = SIGTERM;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 0);
    assert_non_null(strstr(a.reason, "engine killed by the runner (signal 15) as the run was "
                                     "terminated"));
    assert_null(strstr(a.reason, "ended by killed"));
    /* an engine that ended of the signal itself is "ended by" it */
    r[0].proc.killed = 0;
    bk_run_judge_arm(run, &a);
    assert_non_null(strstr(a.reason, "engine ended by signal 15 "));
    free(run);
}

/* Every rank crashed and their lines do not fit: the reason ends after a whole word. */
static void test_reason_cut_by_words(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[WORLD];
    bk_run *run = make_run(&a, r, WORLD);
    char full[4096] = "", line[256];
    for (int i = 0; i < WORLD; i++) {
        r[i].proc.signal = SIGSEGV;
        bk_proc_describe(&r[i].proc, line, sizeof line);
        size_t len = strlen(full);
        snprintf(full + len, sizeof full - len, "%sarm C lane rank %d (node-%02d, MPI rank %d): "
                 "engine crashed: %s", i ? "; " : "", i, i, 2 + i, line);
    }
    assert_true(strlen(full) >= sizeof a.reason);
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 0);
    size_t n = strlen(a.reason);
    assert_true(n > 3 && n < sizeof a.reason);
    assert_string_equal(a.reason + n - 3, "...");
    /* what is kept is the full text up to a word's end */
    assert_memory_equal(a.reason, full, n - 3);
    assert_true(strchr(" ;,:", full[n - 3]) != NULL);
    free(run);
}

/* The unfinished record's `stopped` names its arm, and only that exact text reads back;
 * its score is NO_DECISION with the reasons prefixed, as bk_terminate_mark_as does. */
static void test_unfinished_stopped_and_mark(void **state)
{
    (void)state;
    char buf[256];
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) {
        bk_run_stopped_unfinished(idx, buf, sizeof buf);
        assert_int_equal(bk_run_unfinished_arm(buf), idx);
    }
    bk_run_stopped_unfinished(BK_ARM_IDX_BP, buf, sizeof buf);
    assert_string_equal(buf, "unfinished: written before arm B'; the run did not replace it");
    assert_int_equal(bk_run_unfinished_arm(""), -1);
    assert_int_equal(bk_run_unfinished_arm("terminated by SIGTERM before arm C"), -1);
    assert_int_equal(bk_run_unfinished_arm("unfinished: written before arm X; the run did not "
                                           "replace it"), -1);
    assert_int_equal(bk_run_unfinished_arm("unfinished: written before arm C"), -1);

    bk_score sc;
    memset(&sc, 0, sizeof sc);
    sc.verdict = BK_VERDICT_PASS;
    bk_strlcpy(sc.status, "reproduction_pending", sizeof sc.status);
    bk_strlcpy(sc.reasons, "arm B' missing", sizeof sc.reasons);
    bk_terminate_mark_unfinished(&sc, "C");
    assert_int_equal(sc.verdict, BK_VERDICT_NO_DECISION);
    assert_string_equal(sc.status, "no_decision");
    assert_string_equal(sc.reasons, "unfinished: the run ended during or before arm C without "
                                    "writing its final record; arm B' missing");
    sc.reasons[0] = '\0';
    bk_terminate_mark_unfinished(&sc, "T");
    assert_string_equal(sc.reasons, "unfinished: the run ended during or before arm T without "
                                    "writing its final record");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_as_terminated),
        cmocka_unit_test(test_reason_cut_by_words),
        cmocka_unit_test(test_unfinished_stopped_and_mark),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
