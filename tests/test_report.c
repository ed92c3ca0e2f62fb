/* test_report.c - the printed report (bk_report_header, bk_report_print) of the saved record
 * in tests/fixtures/records/pre-repeats (read back and scored as `bracket score` does), and of
 * that run edited one field at a time: idle ranks, rounds, routed shapes, bitwise equality,
 * drift, the candidate's share, diagnostic variants and what came again after a broken
 * connection each print only where they apply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/report.h"
#include "runner/run.h"

#define FIXTURE "tests/fixtures/records/pre-repeats/record.json"

typedef struct {
    bk_run run;
    bk_score sc;
} scored;

static int setup(void **state)
{
    const char *d = getenv("BK_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/" FIXTURE, d && d[0] ? d : BK_SOURCE_DIR);
    scored *s = calloc(1, sizeof *s);
    bk_err err = { 0 };
    if (!s)
        return -1;
    if (bk_record_read(path, &s->run, &err) != BK_OK ||
        bk_run_evaluate(&s->run, 0, &s->sc, &err) != BK_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        bk_run_free(&s->run);
        free(s);
        return -1;
    }
    /* the header's lanes, ranks and routing share come from the record too (bk_record_read) */
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    scored *s = *state;
    bk_run_free(&s->run);
    free(s);
    return 0;
}

/* The header (head != 0) or the report, as text; the caller frees it. */
static char *text(const scored *s, int head)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    if (head)
        bk_report_header(f, &s->run);
    else
        bk_report_print(f, &s->run, &s->sc);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#define HAS(t, s)                                                                             \
    do {                                                                                      \
        if (!strstr((t), (s)))                                                                \
            fail_msg("no '%s' in:\n%s", (s), (t));                                            \
    } while (0)
#define LACKS(t, s)                                                                           \
    do {                                                                                      \
        if (strstr((t), (s)))                                                                 \
            fail_msg("'%s' in:\n%s", (s), (t));                                               \
    } while (0)

/* The record as it is: one round, a bitwise pass, drift within its limit, the candidate
 * serving every shape, no diagnostic variant: none of the notes for those. */
static void test_fixture_as_recorded(void **state)
{
    scored *s = *state;
    char *t = text(s, 0);
    HAS(t, "quality: pass (A equals T bit for bit)\n");
    HAS(t, "drift:   B'/B - 1 = -6.61% (limit 10.00%)\n");
    HAS(t, "  B   shm_twopass            n 200     cost      49.28 us  [    48.83,     49.77]  "
           "r0:exit 0 r1:exit 0\n");
    LACKS(t, "rounds, round");
    LACKS(t, "ran the incumbent");
    LACKS(t, "exceeded");
    LACKS(t, "times the drift limit");
    LACKS(t, "the candidate serves");
    LACKS(t, "DIAGNOSTIC");
    HAS(t, "verdict: FAIL (failed)\n");
    free(t);
    t = text(s, 1);
    LACKS(t, "idle");
    HAS(t, "bracket 0.1.0  run 20"); /* the record's bracket_version */
    HAS(t, "  plan       it-cpu (the plan in /"); /* the record's plan, not a file of its own */
    HAS(t, "/record.json)  sha256:");
    HAS(t, "  routing    the candidate serves 100.0% of the workload's weight\n");
    free(t);
}

/* A share is rounded to one decimal, but never to all or none when it is neither. */
static void test_share_text(void **state)
{
    (void)state;
    char b[48];
    const struct { double share; const char *want; } cases[] = {
        { 1.0, "100.0%" },          { 0.0, "0.0%" },           { 0.5, "50.0%" },
        { 0.9994, "99.9%" },        { 0.9995, "more than 99.9%" }, /* 99.950000000000006 */
        { 0.9999, "more than 99.9%" }, { 0.00051, "0.1%" },   { 0.00049, "less than 0.1%" },
        { 1e-300, "less than 0.1%" },  { 0.123, "12.3%" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bk_share_text(cases[i].share, b, sizeof b);
        if (strcmp(b, cases[i].want) != 0)
            fail_msg("share %.17g: '%s', expected '%s'", cases[i].share, b, cases[i].want);
    }
}

/* The header names the bracket that ran the record; a record of another version also names
 * the bracket scoring it now. */
static void test_version(void **state)
{
    scored *s = *state;
    char was[sizeof s->run.version];
    memcpy(was, s->run.version, sizeof was);
    snprintf(s->run.version, sizeof s->run.version, "0.0.9-rc1");
    char *t = text(s, 1);
    char want[256];
    snprintf(want, sizeof want, "bracket 0.0.9-rc1  run %s  (scored by bracket %s)\n",
             s->run.run_id, BK_VERSION);
    HAS(t, want);
    free(t);
    snprintf(s->run.version, sizeof s->run.version, "%s", BK_VERSION); /* this build's own */
    t = text(s, 1);
    LACKS(t, "scored by");
    free(t);
    memcpy(s->run.version, was, sizeof was);
}

/* Ranks in neither lane: one alone, two as "a,b", three or more as a span. */
static void test_idle_ranks(void **state)
{
    scored *s = *state;
    static const struct { int world; const char *line; } v[] = {
        { 5, "  idle       MPI rank 4: in neither lane, no engine runs there (the lanes take 4 "
             "of the 5 ranks)\n" },
        { 6, "  idle       MPI ranks 4,5: in neither lane, no engine runs there (the lanes take "
             "4 of the 6 ranks)\n" },
        { 7, "  idle       MPI ranks 4-6: in neither lane, no engine runs there (the lanes take "
             "4 of the 7 ranks)\n" },
        { 64, "  idle       MPI ranks 4-63: in neither lane, no engine runs there (the lanes "
              "take 4 of the 64 ranks)\n" },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        s->run.world_size = v[i].world;
        char *t = text(s, 1);
        HAS(t, v[i].line);
        free(t);
    }
    s->run.world_size = 4;
}

/* What came again after broken connections: one line, naming only what did, singular for
 * one; none of it, no line. */
static void test_came_again(void **state)
{
    scored *s = *state;
    const char *head = "wire:    came again (sent again after a connection to rank 0 broke or was "
                       "not ready), each taken once:";
    char *t = text(s, 0);
    LACKS(t, "came again");
    free(t);
    s->run.wire.repeated = 12;
    s->run.wire.repeated_hellos = 1;
    t = text(s, 0);
    char want[256];
    snprintf(want, sizeof want, "%s 12 samples, 1 hello\n", head);
    HAS(t, want);
    assert_int_equal(count(t, "came again"), 1);
    free(t);
    s->run.wire.repeated = 0;
    s->run.wire.repeated_tensors = 2;
    s->run.wire.repeated_hellos = 0;
    t = text(s, 0);
    snprintf(want, sizeof want, "%s 2 audit tensors\n", head);
    HAS(t, want);
    free(t);
    s->run.wire.repeated_tensors = 0;
}

/* The set-up's bf16-sum warning (run.sum_note) comes again under a failed quality, and only
 * there: a --quiet run prints no header, and `bracket score` prints none. */
static void test_bf16_note_under_failed_quality(void **state)
{
    scored *s = *state;
    bk_strlcpy(s->run.sum_note, "the incumbent nccl_then_rmsnorm sums the ranks' x in bf16",
               sizeof s->run.sum_note);
    char *t = text(s, 0);
    LACKS(t, "sums the ranks' x"); /* quality passed */
    free(t);
    s->run.quality.state = BK_QUALITY_FAIL;
    bk_strlcpy(s->run.quality.reason, "A differs from T", sizeof s->run.quality.reason);
    t = text(s, 0);
    HAS(t, "quality: fail: A differs from T\n  note: the incumbent nccl_then_rmsnorm sums the "
           "ranks' x in bf16\n");
    free(t);
    t = text(s, 1); /* the header keeps its warning */
    HAS(t, "  warning    the incumbent nccl_then_rmsnorm");
    free(t);
    s->run.sum_note[0] = '\0';
    t = text(s, 0);
    HAS(t, "quality: fail: A differs from T\n");
    LACKS(t, "sums the ranks' x");
    free(t);
}

/* A plan with fewer timed iterations a round than a decision needs is warned of in the
 * header, before the arms run (the verdict can only be NO_DECISION). */
static void test_few_iters_warned(void **state)
{
    scored *s = *state;
    char *t = text(s, 1);
    LACKS(t, "workload.iters");
    free(t);
    s->run.plan.workload.iters = 5; /* 6 needed at confidence 0.95 */
    t = text(s, 1);
    HAS(t, "  warning    workload.iters 5 is below the 6 timed iterations a round needs for an "
           "interval of a median at confidence 0.95: every arm runs, and the verdict is "
           "NO_DECISION\n");
    free(t);
    s->run.plan.workload.iters = 6;
    t = text(s, 1);
    LACKS(t, "workload.iters");
    free(t);
}

/* Decode timed eagerly on the cuda backend is noted in the header (the arena's guide: a
 * graph-off gain is evidence about a debugging mode), and in short under the verdict (which
 * -q keeps); not on the cpu backend, not with graph mode, not for prefill. */
static void test_eager_decode_noted(void **state)
{
    scored *s = *state;
    const bk_backend b = s->run.backend;
    const bk_phase ph = s->run.plan.workload.phase;
    char mode[sizeof s->run.plan.arena.graph_mode];
    bk_strlcpy(mode, s->run.plan.arena.graph_mode, sizeof mode);
    const char *note = "  note       decode is timed eagerly (arena.graph_mode \"eager\"; a plan "
                       "without it gets eager): serving stacks replay decode steps as CUDA "
                       "graphs";
    s->run.plan.workload.phase = BK_PHASE_DECODE;
    bk_strlcpy(s->run.plan.arena.graph_mode, "eager", sizeof s->run.plan.arena.graph_mode);
    s->run.backend = BK_BACKEND_CPU;
    char *t = text(s, 1);
    LACKS(t, "timed eagerly");
    free(t);
    s->run.backend = BK_BACKEND_CUDA;
    t = text(s, 1);
    HAS(t, note);
    free(t);
    t = text(s, 0); /* without the header (-q), under the verdict in short */
    LACKS(t, note);
    HAS(t, "  (decode timed eagerly: evidence about a debugging mode, not the arena, unless it "
           "publishes eager decode)\n");
    free(t);
    s->run.plan.workload.phase = BK_PHASE_PREFILL;
    t = text(s, 1);
    LACKS(t, "timed eagerly");
    free(t);
    s->run.plan.workload.phase = BK_PHASE_DECODE;
    bk_strlcpy(s->run.plan.arena.graph_mode, "graph", sizeof s->run.plan.arena.graph_mode);
    t = text(s, 1);
    LACKS(t, "timed eagerly");
    free(t);
    s->run.backend = b;
    s->run.plan.workload.phase = ph;
    bk_strlcpy(s->run.plan.arena.graph_mode, mode, sizeof s->run.plan.arena.graph_mode);
}

/* A shape outside the candidate's domain ran the incumbent in C, and C alone says so. */
static void test_routed_shape_named_in_c_only(void **state)
{
    scored *s = *state;
    s->run.plan.workload.shapes[1].tokens = 1024; /* past shm_oneshot_fused's 512 */
    s->run.routing_share = bk_routing_share(&s->run.plan, s->run.backend, 1); /* as set-up */
    char *t = text(s, 0);
    HAS(t, "        shape 1 (tokens 1024, hidden 4096, weight 0.5): median 89.52 us");
    assert_int_equal(count(t, "(ran the incumbent: "), 1);
    const char *c = strstr(t, "  C   shm_oneshot_fused"), *bp = strstr(t, "  B'  shm_twopass");
    assert_non_null(c);
    assert_non_null(bp);
    const char *routed = strstr(t, "(ran the incumbent: ");
    assert_true(routed > c && routed < bp);
    HAS(t, "  (the candidate serves 50.0% of the workload's weight; the other calls ran the "
           "incumbent)\n");
    free(t);
    s->run.plan.workload.shapes[1].tokens = 8;
}

/* A pass whose A differs from T in some bits says how many and how far. */
static void test_pass_not_bitwise(void **state)
{
    scored *s = *state;
    assert_int_equal(s->run.quality.state, BK_QUALITY_PASS);
    char keep = s->run.quality.per[1].digest_t[10];
    s->run.quality.per[1].digest_t[10] = keep == '0' ? '1' : '0';
    s->run.quality.per[1].max_abs = 0.0078125;
    s->run.quality.per[1].max_rel = 0.00390625;
    char *t = text(s, 0);
    HAS(t, "quality: pass (A differs from T bitwise in 1 of 4 shape x output(s), within rtol "
           "0.01, atol 0.01: max abs err 0.00781, max rel err 0.00391)\n");
    LACKS(t, "bit for bit");
    free(t);
    s->run.quality.per[1].digest_t[10] = keep;
}

/* Drift past its limit: "exceeded", with "B' kept, excluded" when B' left the baseline;
 * the note on the machine's speed only past twice the limit, under exclude_later. */
static void test_drift_notes(void **state)
{
    scored *s = *state;
    const bk_score keep = s->sc;
    s->sc.drift = -0.15;
    s->sc.drift_exceeded = 1;
    char *t = text(s, 0);
    HAS(t, "drift:   B'/B - 1 = -15.00% (limit 10.00%)  exceeded\n");
    LACKS(t, "times the drift limit");
    free(t);
    s->sc.bp_excluded = 1;
    t = text(s, 0);
    HAS(t, "drift:   B'/B - 1 = -15.00% (limit 10.00%)  exceeded: B' kept, excluded\n");
    LACKS(t, "times the drift limit"); /* 1.5 times the limit */
    free(t);
    s->sc.drift = 0.25;
    t = text(s, 0);
    HAS(t, "  note: B' moved 2.5 times the drift limit from B: the machine's speed changed "
           "during the bracket;\n");
    /* what guards against it, from the run's own settings: repeats 3 only where it ran fewer */
    const int repeats = s->run.plan.protocol.repeats;
    s->run.plan.protocol.repeats = 1;
    free(t);
    t = text(s, 0);
    HAS(t, "B vs C alone decides it. protocol.drift_policy \"strict\" (no verdict on such a "
           "drift) or protocol.repeats 3 (this run: 1) guards against that\n");
    s->run.plan.protocol.repeats = 4;
    free(t);
    t = text(s, 0);
    HAS(t, "B vs C alone decides it. 4 rounds an arm did not steady the machine: "
           "protocol.drift_policy \"strict\" gives no verdict on such a drift; a quieter "
           "machine is the cure\n");
    LACKS(t, "protocol.repeats 3");
    free(t);
    s->run.plan.protocol.repeats = repeats;
    s->sc = keep;
}

/* A diagnostic incumbent or candidate is called out, a real one never. */
static void test_diagnostic_called_out(void **state)
{
    scored *s = *state;
    char keep[sizeof s->run.plan.candidate.name];
    memcpy(keep, s->run.plan.candidate.name, sizeof keep);
    snprintf(s->run.plan.candidate.name, sizeof s->run.plan.candidate.name, "slowed");
    char *t = text(s, 0);
    HAS(t, "  (candidate slowed is a DIAGNOSTIC variant: a self-check of this bracket, never a "
           "qualification result)\n");
    assert_int_equal(count(t, "DIAGNOSTIC"), 1);
    free(t);
    memcpy(s->run.plan.candidate.name, keep, sizeof keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fixture_as_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_came_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bf16_note_under_failed_quality, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eager_decode_noted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_few_iters_warned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version, setup, teardown),
        cmocka_unit_test(test_share_text),
        cmocka_unit_test_setup_teardown(test_routed_shape_named_in_c_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass_not_bitwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drift_notes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_diagnostic_called_out, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
