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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_as_terminated),
        cmocka_unit_test(test_reason_cut_by_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
