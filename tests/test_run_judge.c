/* test_run_judge.c - how an arm's failed lane ranks are named in its reason: an engine the
 * runner killed as the run was terminated, a reason longer than its buffer, each piece of
 * evidence that fails an arm; the signal's name out of a reason; v7's B/C look. */
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

/* a lane rank that ended well with all its samples: iters x nshapes = 10 */
static void clean_rank(bk_rank_data *d)
{
    d->status_seen = d->status_ok = 1;
    d->samples_got = d->samples_claimed = 10;
}

/* judge the one-rank arm, expect it failed with `why` in its reason */
static void expect_failed(bk_run *run, bk_arm_run *a, const char *why)
{
    a->ok = 1;
    a->reason[0] = '\0';
    bk_run_judge_arm(run, a);
    assert_int_equal(a->ok, 0);
    if (!strstr(a->reason, why))
        fail_msg("reason '%s' lacks '%s'", a->reason, why);
}

/* Each piece of evidence fails the arm on its own, named: a clean rank is ok, and every
 * one of these spoils it. Both sample counts must equal iters x nshapes, not just reach
 * it; any exit code but 0 is a failure (a record can hold a negative one). */
static void test_each_failure_named(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[1];
    bk_run *run = make_run(&a, r, 1);
    clean_rank(&r[0]);
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    assert_string_equal(a.reason, "");

    r[0].proc.exit_code = -1;
    expect_failed(run, &a, "engine failed (");
    r[0].proc.exit_code = 0;
    r[0].status_seen = 0;
    expect_failed(run, &a, "no final status received");
    r[0].status_seen = 1;
    r[0].status_ok = 0;
    bk_strlcpy(r[0].status_msg, "out of memory", sizeof r[0].status_msg);
    expect_failed(run, &a, "engine reported failure: out of memory");
    r[0].status_msg[0] = '\0'; /* a failure without a word of why: said so, not left blank */
    expect_failed(run, &a, "engine reported failure: (no reason given)");
    r[0].status_ok = 1;
    r[0].samples_claimed = 9; /* all arrived, but the engine says it sent fewer */
    expect_failed(run, &a, "samples missing: got 10, sent 9, expected 10");
    r[0].samples_claimed = 10;
    r[0].samples_got = 11; /* more arrived than the plan times */
    expect_failed(run, &a, "samples missing: got 11, sent 10, expected 10");
    clean_rank(&r[0]);

    /* killed after a peer failed is not a crash */
    r[0].proc.killed = 1;
    r[0].proc.signal = SIGKILL;
    expect_failed(run, &a, "engine killed after a peer failed");
    assert_null(strstr(a.reason, "crashed"));
    r[0].proc.killed = 0;
    r[0].proc.signal = 0;

    /* an audit needs every output tensor of every shape */
    uint16_t t0 = 0, t1 = 0;
    void *tensors[2] = { &t0, NULL };
    run->noutputs = 2;
    a.audit = 1;
    r[0].tensors = tensors;
    expect_failed(run, &a, "output tensors missing from the audit");
    tensors[1] = &t1;
    a.ok = 1;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    free(run);
}

/* A lane of 4 whose rank 2 hung before its hello: ranks 0, 1 and 3 said hello and waited at
 * the rendezvous; 0 failed there at the arm's end, and the runner killed the rest. Rank 0's
 * line says only "no answer from the coordinator", so rank 2 is named as the one never at
 * the rendezvous; 1 and 3, killed after it, are not. A rank already named by a line of its
 * own is not named again, and where it failed before its hello, others without one are not
 * named either (they may only have been slower to start); nor is any where no rank said
 * hello, or where a signal to the run cut the arm. */
static void test_no_hello_named(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[4];
    bk_run *run = make_run(&a, r, 4);
    for (int i = 0; i < 4; i++) {
        r[i].hello = i != 2;
        r[i].proc.killed = i != 0;
        r[i].proc.signal = i ? SIGTERM : 0;
    }
    r[0].proc.exit_code = 1;
    r[0].status_seen = 1;
    bk_strlcpy(r[0].status_msg, "rendezvous: no answer from the coordinator at ipc://x within "
               "4.8 s", sizeof r[0].status_msg);
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 0);
    assert_string_equal(a.reason,
                        "arm C lane rank 0 (node-00, MPI rank 2): engine failed (exit 1): "
                        "rendezvous: no answer from the coordinator at ipc://x within 4.8 s; "
                        "arm C lane rank 2 (node-02, MPI rank 4): never said hello to the "
                        "rendezvous, where the lane's ranks that did waited for it (its engine: "
                        "killed by the runner (signal 15))");
    /* an agent that never reported (nothing known of its engine): its own line names it */
    r[2].reported = 0;
    r[2].proc.killed = 0;
    r[2].proc.signal = 0;
    expect_failed(run, &a, "arm C lane rank 2 (node-02, MPI rank 4): no report from the agent");
    assert_null(strstr(a.reason, "never said hello"));
    r[2].reported = 1;
    /* rank 2 failed of itself (its start failed): its own line names it, once */
    r[2].proc.exit_code = 1;
    expect_failed(run, &a, "arm C lane rank 2 (node-02, MPI rank 4): engine failed (exit 1)");
    assert_null(strstr(a.reason, "never said hello"));
    /* ... and then ranks 1 and 3, killed before their hellos, were only slower to start:
     * not named as the ones waited for */
    r[1].hello = r[3].hello = 0;
    expect_failed(run, &a, "arm C lane rank 2 (node-02, MPI rank 4): engine failed (exit 1)");
    assert_null(strstr(a.reason, "never said hello"));
    r[1].hello = r[3].hello = 1;
    r[2].proc.killed = 1;
    r[2].proc.signal = SIGTERM;
    r[2].proc.exit_code = 0;
    /* a signal to the run: its own reason (bk_run_arm), no hello line */
    a.terminated = 1;
    expect_failed(run, &a, "engine failed (exit 1)");
    assert_null(strstr(a.reason, "never said hello"));
    a.terminated = 0;
    /* no rank said hello: no rank waited for another there */
    for (int i = 0; i < 4; i++)
        r[i].hello = 0;
    expect_failed(run, &a, "engine failed (exit 1)");
    assert_null(strstr(a.reason, "never said hello"));
    /* every rank said hello: the rendezvous met */
    for (int i = 0; i < 4; i++)
        r[i].hello = 1;
    expect_failed(run, &a, "engine failed (exit 1)");
    assert_null(strstr(a.reason, "never said hello"));
    free(run);
}

/* Seven ranks of a lane of 8 said hello and each failed at the rendezvous with a long
 * message, more than the reason holds; rank 7 never said hello. Its line is kept, at the end,
 * whole even under a round's prefix, and the others' lines give way. */
static void test_no_hello_kept_when_full(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[8];
    bk_run *run = make_run(&a, r, 8);
    for (int i = 0; i < 7; i++) {
        r[i].hello = 1;
        r[i].proc.exit_code = 1;
        r[i].status_seen = 1;
        snprintf(r[i].status_msg, sizeof r[i].status_msg, "rendezvous: no answer from the "
                 "coordinator at ipc:///tmp/a-long-private-folder-name-%d/rv within 8.0 s (run "
                 "20261207T162534Z-it-cpu-911e6e, arm C, lane rank %d of 8; it answers once "
                 "every lane rank said hello)", i, i);
    }
    r[7].proc.killed = 1;
    r[7].proc.signal = SIGTERM;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 0);
    const char *want = "; arm C lane rank 7 (node-07, MPI rank 9): never said hello to the "
                       "rendezvous, where the lane's ranks that did waited for it (its engine: "
                       "killed by the runner (signal 15))";
    size_t n = strlen(a.reason);
    const size_t w = strlen(want);
    assert_true(n < sizeof a.reason && n > w);
    if (strcmp(a.reason + n - w, want) != 0)
        fail_msg("reason does not end with rank 7's line: %s", a.reason);
    assert_non_null(strstr(a.reason, "arm C lane rank 0 (node-00, MPI rank 2): engine failed"));
    int lines = 0; /* the lines before: some left out for the room kept */
    for (const char *p = a.reason; (p = strstr(p, "engine failed (exit 1)")) != NULL; p++)
        lines++;
    assert_true(lines >= 1 && lines < 7);
    /* the same arm in round 16 of 16 (run.c puts "round 16 of 16: " before the round's
     * reason and cuts it to the reason's size): the room kept for that keeps rank 7 whole */
    char line[sizeof a.reason + 64], whole[sizeof a.reason];
    snprintf(line, sizeof line, "round 16 of 16: %s", a.reason);
    assert_int_equal(bk_strlcpy_words(whole, line, sizeof whole), 0);
    /* rank 6 failed before its hello, and its line found no room: the hello lines name it
     * (its engine: exit 1), and rank 7 */
    r[6].hello = 0;
    bk_run_judge_arm(run, &a);
    assert_non_null(strstr(a.reason, "; arm C lane rank 6 (node-06, MPI rank 8): never said "
                                     "hello to the rendezvous, where the lane's ranks that did "
                                     "waited for it (its engine: exit 1)"));
    n = strlen(a.reason);
    assert_true(n > w && strcmp(a.reason + n - w, want) == 0);
    r[6].hello = 1;
    /* rank 0, whose line is written first, failed before its hello: the cause, named by its
     * own line; no hello lines, and the lines are not cut for the room they would have had
     * (written again with the whole reason) */
    r[0].hello = 0;
    bk_run_judge_arm(run, &a);
    assert_null(strstr(a.reason, "never said hello"));
    assert_true(strlen(a.reason) > sizeof a.reason - 100);
    free(run);
}

/* The shapes an engine's status says it served with the incumbent must be those the run's
 * routing gives the candidate's arms (bk_plan_routed at set-up: shm_oneshot_fused serves
 * 1 x 4096, not 600 x 4096, past its 512 tokens, nor hidden 12); the incumbent's arms route
 * nothing. A status that said nothing of it (a record from before), or a run whose routing
 * is not known (a record without routing.shapes), is not judged by it. */
static void test_routing_judged(void **state)
{
    (void)state;
    bk_arm_run a;
    bk_rank_data r[1];
    bk_run *run = make_run(&a, r, 1);
    bk_strlcpy(run->plan.target, "collective.allreduce_residual_rmsnorm", sizeof run->plan.target);
    bk_strlcpy(run->plan.incumbent.name, "shm_twopass", sizeof run->plan.incumbent.name);
    bk_strlcpy(run->plan.candidate.name, "shm_oneshot_fused", sizeof run->plan.candidate.name);
    bk_strlcpy(run->plan.arena.dtype, "bf16", sizeof run->plan.arena.dtype);
    run->backend = BK_BACKEND_CPU;
    run->plan.workload.nshapes = 3;
    run->plan.workload.shapes[0] = (bk_shape){ .tokens = 1, .hidden = 4096, .weight = 1 };
    run->plan.workload.shapes[1] = (bk_shape){ .tokens = 600, .hidden = 4096, .weight = 1 };
    run->plan.workload.shapes[2] = (bk_shape){ .tokens = 8, .hidden = 12, .weight = 1 };
    bk_strlcpy(a.variant, "shm_oneshot_fused", sizeof a.variant);
    clean_rank(&r[0]);
    r[0].samples_got = r[0].samples_claimed = 30;
    assert_true(bk_plan_routed(&run->plan, "shm_oneshot_fused", 1, BK_BACKEND_CPU) == 6);
    assert_true(bk_plan_routed(&run->plan, "shm_twopass", 1, BK_BACKEND_CPU) == 0);
    run->cand_routed = 6; /* shapes 1 and 2, as the run's set-up finds them */
    run->cand_routed_known = 1;
    assert_true(bk_arm_want_routed(run, &a) == 6);
    r[0].routed_known = 1;
    r[0].routed = 6;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    r[0].routed = 0;
    expect_failed(run, &a, "arm C lane rank 0 (node-00, MPI rank 2): engine served shape(s) "
                           "none with the incumbent; the variant's domain routes 1, 2");
    r[0].routed = 7;
    expect_failed(run, &a, "engine served shape(s) 0, 1, 2 with the incumbent; the variant's "
                           "domain routes 1, 2");
    r[0].routed_known = 0; /* a record from before: not judged by it */
    a.ok = 1;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    r[0].routed_known = 1; /* the run's routing unknown: not judged either */
    run->cand_routed_known = 0;
    a.ok = 1;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    run->cand_routed_known = 1;
    /* judged by the run's routing, not this build's catalog: a run whose catalog routed
     * shape 2 alone */
    run->cand_routed = 4;
    r[0].routed = 4;
    a.ok = 1;
    bk_run_judge_arm(run, &a);
    assert_int_equal(a.ok, 1);
    run->cand_routed = 6;
    /* every shape of 64 routed, said whole: 64 numbers fit the reason */
    run->plan.workload.nshapes = 64;
    for (int i = 3; i < 64; i++)
        run->plan.workload.shapes[i] = (bk_shape){ .tokens = 600 + i, .hidden = 4096, .weight = 1 };
    r[0].samples_got = r[0].samples_claimed = 640;
    r[0].routed = UINT64_MAX;
    expect_failed(run, &a, "engine served shape(s) 0, 1, 2, 3, ");
    assert_non_null(strstr(a.reason, ", 61, 62, 63 with the incumbent; the variant's domain "
                                     "routes 1, 2"));
    run->plan.workload.nshapes = 3;
    r[0].samples_got = r[0].samples_claimed = 30;
    r[0].routed = 0;
    /* the incumbent's arm: nothing routed */
    bk_strlcpy(a.variant, "shm_twopass", sizeof a.variant);
    assert_true(bk_arm_want_routed(run, &a) == 0);
    r[0].routed_known = 1;
    r[0].routed = 2;
    expect_failed(run, &a, "engine served shape(s) 1 with the incumbent; the variant's domain "
                           "routes none");
    free(run);
}

/* The signal's name out of an arm's reason: "terminated by NAME during arm X; ..." ends the
 * name at " during arm " even when a rank's message further on says " before ". */
static void test_terminated_name(void **state)
{
    (void)state;
    bk_arm_run a;
    memset(&a, 0, sizeof a);
    a.ran = 1;
    char name[32];
    bk_strlcpy(a.reason, "terminated by SIGTERM during arm C; arm C lane rank 0 (h, MPI rank "
               "1): engine failed (exit 1): died before the barrier", sizeof a.reason);
    assert_int_equal(bk_arm_terminated(&a, name, sizeof name), 1);
    assert_string_equal(name, "SIGTERM");
    bk_strlcpy(a.reason, "round 2 of 3: terminated by SIGINT before round 2 of 3",
               sizeof a.reason);
    assert_int_equal(bk_arm_terminated(&a, name, sizeof name), 1);
    assert_string_equal(name, "SIGINT");
}

/* v7's look decides from B and C alone with quality not yet run, whatever the record's
 * final quality became: a B/C PASS whose audit A later failed to complete (quality missing)
 * still made B' unnecessary. */
static void test_v7_look_ignores_final_quality(void **state)
{
    (void)state;
    enum { ITERS = 20 };
    bk_run *run = calloc(1, sizeof *run);
    assert_non_null(run);
    bk_plan *p = &run->plan;
    p->workload.nshapes = 1;
    p->workload.shapes[0].weight = 1.0;
    p->workload.iters = ITERS;
    p->workload.seed = 7;
    p->protocol.version = BK_PROTO_V7;
    p->protocol.confidence = 0.95;
    p->protocol.min_gain = 0.01;
    p->protocol.drift_limit = 0.02;
    p->protocol.bootstrap_resamples = 200;
    bk_rank_data r[2];
    memset(r, 0, sizeof r);
    uint64_t b[ITERS], c[ITERS], *bs[1] = { b }, *cs[1] = { c };
    size_t seen[2][1] = { { ITERS }, { ITERS } };
    for (int i = 0; i < ITERS; i++) {
        b[i] = 1000 + (uint64_t)i;
        c[i] = 500 + (uint64_t)i; /* twice as fast */
    }
    r[0].ns = bs;
    r[1].ns = cs;
    r[0].ns_seen = seen[0];
    r[1].ns_seen = seen[1];
    for (int k = 0; k < 2; k++) {
        bk_arm_run *a = &run->arms[k == 0 ? BK_ARM_IDX_B : BK_ARM_IDX_C];
        a->name = k == 0 ? "B" : "C";
        a->world = 1;
        a->r = &r[k];
        a->ran = a->ok = 1;
    }
    run->quality.state = BK_QUALITY_MISSING;
    bk_strlcpy(run->quality.reason, "audit A did not complete", sizeof run->quality.reason);
    char buf[128] = "";
    assert_int_equal(bk_run_v7_decided(run, buf, sizeof buf), 1);
    assert_string_equal(buf, "v7: B/C decided (PASS), B' not run");
    free(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_as_terminated),
        cmocka_unit_test(test_reason_cut_by_words),
        cmocka_unit_test(test_unfinished_stopped_and_mark),
        cmocka_unit_test(test_each_failure_named),
        cmocka_unit_test(test_no_hello_named),
        cmocka_unit_test(test_no_hello_kept_when_full),
        cmocka_unit_test(test_routing_judged),
        cmocka_unit_test(test_terminated_name),
        cmocka_unit_test(test_v7_look_ignores_final_quality),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
