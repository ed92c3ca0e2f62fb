/* test_plan.c - the bracket.plan/1 loader: the demo plan, defaults, normalised weights,
 * one precise message per malformed plan, --set overrides, dump/parse round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/plan.h"

/* ---- helpers ---- */

static const char *source_dir(void)
{
    const char *d = getenv("BK_SOURCE_DIR");
    return d && d[0] ? d : BK_SOURCE_DIR;
}

/* SOURCE/rel into a static buffer (one at a time). */
static const char *src_path(const char *rel)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", source_dir(), rel);
    return buf;
}

static void load_ok(const char *rel, const char *const *sets, int nsets, bk_plan *p)
{
    bk_err err = { 0 };
    bk_status st = bk_plan_load(src_path(rel), sets, nsets, p, &err);
    if (st != BK_OK)
        fail_msg("%s: %s", rel, err.msg);
    assert_int_equal(err.code, BK_OK);
}

/* Loading must fail with BK_ERR_INPUT, a message containing `want`, and a
 * zeroed plan. */
static void expect_load_error(const char *rel, const char *const *sets, int nsets,
                              const char *want)
{
    bk_err err = { 0 };
    bk_plan p;
    memset(&p, 0x5a, sizeof p);
    assert_int_equal(bk_plan_load(src_path(rel), sets, nsets, &p, &err), BK_ERR_INPUT);
    if (!strstr(err.msg, want))
        fail_msg("%s: expected \"%s\" in \"%s\"", rel, want, err.msg);
    assert_null(p.doc);
    assert_string_equal(p.name, "");
}

/* The demo plan with one member replaced (v) or removed (v NULL), as text.
 * `where` is a '/'-separated path of keys and array indexes ("workload/shapes/1"). */
static char *demo_with(const char *where, const char *key, json_t *v)
{
    json_error_t je;
    json_t *root = json_load_file(src_path("plans/demo-cpu.json"), 0, &je), *node = root;
    char buf[256];
    assert_non_null(root);
    snprintf(buf, sizeof buf, "%s", where);
    for (char *seg = strtok(buf, "/"); seg; seg = strtok(NULL, "/"))
        node = json_is_array(node) ? json_array_get(node, (size_t)atoi(seg))
                                   : json_object_get(node, seg);
    assert_non_null(node);
    if (v)
        assert_int_equal(json_object_set_new(node, key, v), 0);
    else
        assert_int_equal(json_object_del(node, key), 0);
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    assert_non_null(text);
    return text;
}

/* Parsing `text` as "plans/x.json" must fail with exactly `want`. */
static void expect_parse_error(char *text, const char *want)
{
    bk_err err = { 0 };
    bk_plan p;
    assert_int_equal(bk_plan_parse(text, "plans/x.json", NULL, 0, &p, &err), BK_ERR_INPUT);
    free(text);
    if (strcmp(err.msg, want) != 0)
        fail_msg("expected \"%s\", got \"%s\"", want, err.msg);
    assert_null(p.doc);
}

/* ---- good plans ---- */

static void test_demo_plan(void **state)
{
    (void)state;
    bk_plan p;
    load_ok("plans/demo-cpu.json", NULL, 0, &p);
    assert_string_equal(p.name, "demo-cpu-allreduce-rmsnorm");
    assert_non_null(strstr(p.path, "plans/demo-cpu.json"));
    assert_int_equal(strlen(p.arena.stack_digest), 71);
    assert_int_equal(p.arena.incumbent_generation, 1);
    assert_string_equal(p.arena.model, "MiniMax-M3");
    assert_string_equal(p.arena.substrate, "sglang");
    assert_string_equal(p.arena.target_catalog, "bracket.catalog/1");
    assert_string_equal(p.arena.architecture, "x86_64");
    assert_int_equal(p.arena.tp, 2);
    assert_int_equal(p.arena.ep, 1);
    assert_string_equal(p.arena.dtype, "bf16");
    assert_string_equal(p.arena.graph_mode, "eager");
    assert_string_equal(p.target, "collective.allreduce_residual_rmsnorm");
    assert_string_equal(p.incumbent.name, "shm_twopass");
    assert_string_equal(p.incumbent.source_digest, "");
    assert_string_equal(p.candidate.name, "shm_oneshot_fused");
    assert_int_equal(strncmp(p.candidate.source_digest, "sha256:", 7), 0);
    assert_true(json_is_object(p.candidate.params) && json_is_object(p.incumbent.params));
    assert_int_equal(p.workload.phase, BK_PHASE_DECODE);
    assert_int_equal(p.workload.nshapes, 2);
    assert_int_equal(p.workload.shapes[0].tokens, 1);
    assert_int_equal(p.workload.shapes[1].tokens, 32);
    assert_int_equal(p.workload.shapes[1].hidden, 4096);
    assert_int_equal(p.workload.shapes[1].experts, 0);
    assert_float_equal(p.workload.shapes[0].weight, 0.5, 1e-12);
    assert_int_equal(p.workload.warmup_iters, 20);
    assert_int_equal(p.workload.iters, 300);
    assert_int_equal(p.workload.seed, 1);
    assert_int_equal(p.protocol.version, BK_PROTO_V8);
    assert_float_equal(p.protocol.confidence, 0.95, 1e-12);
    assert_float_equal(p.protocol.min_gain, 0.02, 1e-12);
    assert_float_equal(p.protocol.drift_limit, 0.05, 1e-12);
    assert_int_equal(p.protocol.drift_policy, BK_DRIFT_EXCLUDE_LATER);
    assert_int_equal(p.protocol.bootstrap_resamples, 2000);
    assert_float_equal(p.quality.rtol, 1e-2, 1e-15);
    assert_float_equal(p.quality.atol, 1e-2, 1e-15);
    assert_int_equal(p.lane_policy, BK_LANES_DISJOINT);
    assert_int_equal(p.backend, BK_BACKEND_CPU);
    assert_float_equal(p.timeouts.arm_s, 120, 0);
    assert_float_equal(p.timeouts.rendezvous_s, 30, 0);
    assert_string_equal(bk_backend_name(p.backend), "cpu");
    assert_string_equal(bk_phase_name(p.workload.phase), "decode");
    assert_string_equal(bk_lane_policy_name(p.lane_policy), "disjoint");
    assert_string_equal(bk_drift_policy_name(p.protocol.drift_policy), "exclude_later");
    bk_plan_free(&p);
    assert_null(p.doc);
}

static void test_defaults_and_weights(void **state)
{
    (void)state;
    bk_plan p;
    load_ok("tests/fixtures/plans/minimal.json", NULL, 0, &p);
    assert_int_equal(p.arena.tp, 4); /* written 4.0 */
    assert_int_equal(p.arena.ep, 1);
    assert_string_equal(p.arena.quantization, "none");
    assert_string_equal(p.arena.graph_mode, "eager");
    assert_string_equal(p.arena.calib_speed, "uncalibrated");
    assert_string_equal(p.arena.calib_quality, "uncalibrated");
    assert_int_equal(p.workload.phase, BK_PHASE_PREFILL);
    assert_float_equal(p.workload.shapes[0].weight, 0.75, 1e-12);
    assert_float_equal(p.workload.shapes[1].weight, 0.25, 1e-12);
    assert_int_equal(p.workload.shapes[0].experts, 8);
    assert_int_equal(p.workload.shapes[0].topk, 2);
    assert_int_equal(p.workload.shapes[0].intermediate, 512);
    assert_int_equal(p.workload.shapes[1].topk, 0);
    assert_int_equal(p.workload.warmup_iters, 20);
    assert_int_equal(p.workload.seed, 1);
    assert_int_equal(p.protocol.version, BK_PROTO_V8);
    assert_float_equal(p.protocol.confidence, 0.95, 1e-12);
    assert_float_equal(p.protocol.min_gain, 0.01, 1e-12);
    assert_float_equal(p.protocol.drift_limit, 0.02, 1e-12);
    assert_int_equal(p.protocol.bootstrap_resamples, 2000);
    assert_int_equal(p.protocol.repeats, 1);
    assert_float_equal(p.quality.rtol, 1e-2, 1e-15);
    /* the MoE target's default: its bf16 rounding near 0 (kernels/moe.c) */
    assert_float_equal(p.quality.atol, 1e-2, 1e-15);
    assert_int_equal(p.lane_policy, BK_LANES_DISJOINT);
    assert_int_equal(p.backend, BK_BACKEND_AUTO);
    assert_float_equal(p.timeouts.arm_s, 120, 0);
    assert_float_equal(p.timeouts.rendezvous_s, 30, 0);

    /* the plan as run shows every default; the weights stay as written */
    char *dump = bk_plan_dump(&p);
    assert_non_null(dump);
    const char *want[] = { "\"tp\":4}", "\"ep\":1", "\"quantization\":\"none\"",
                           "\"graph_mode\":\"eager\"", "\"speed\":\"uncalibrated\"",
                           "\"warmup_iters\":20", "\"seed\":1", "\"version\":\"v8\"",
                           "\"bootstrap_resamples\":2000", "\"drift_policy\":\"exclude_later\"",
                           "\"repeats\":1",
                           "\"lanes\":{\"policy\":\"disjoint\"}", "\"backend\":\"auto\"",
                           "\"arm_s\":120", "\"rendezvous_s\":30", "\"weight\":3}",
                           "\"incumbent\":{\"params\":{},\"variant\":\"inc\"}" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(dump, want[i]))
            fail_msg("dump lacks %s: %s", want[i], dump);
    assert_null(strstr(dump, "\"topk\":0")); /* absent MoE fields stay absent */
    free(dump);
    bk_plan_free(&p);
}

/* Same plan: every field but the pointers and the path. */
static void assert_same_plan(const bk_plan *a, const bk_plan *b)
{
    bk_plan x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    x.doc = y.doc = NULL;
    x.incumbent.params = y.incumbent.params = x.candidate.params = y.candidate.params = NULL;
    memset(x.path, 0, sizeof x.path);
    memset(y.path, 0, sizeof y.path);
    assert_memory_equal(&x, &y, sizeof x);
}

/* quality left out: rtol 1e-2 for every target; atol 1e-3, but 1e-2 for the MoE target
 * (minimal.json above), whose own incumbent fails 1e-3 */
static void test_quality_defaults_by_target(void **state)
{
    (void)state;
    char *text = demo_with("", "quality", NULL);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_parse(text, "plans/x.json", NULL, 0, &p, &err), BK_OK);
    free(text);
    assert_string_equal(p.target, "collective.allreduce_residual_rmsnorm");
    assert_float_equal(p.quality.rtol, 1e-2, 1e-15);
    assert_float_equal(p.quality.atol, 1e-3, 1e-15);
    bk_plan_free(&p);
}

/* a tolerance that checks little is said (plan check, verify, the run's header) */
static void test_loose_quality(void **state)
{
    (void)state;
    bk_plan p;
    char buf[512];
    load_ok("plans/demo-cpu.json", NULL, 0, &p);
    assert_int_equal(bk_plan_loose_quality_text(&p, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    p.quality.atol = 0.999;
    p.quality.rtol = 0.999;
    assert_int_equal(bk_plan_loose_quality_text(&p, buf, sizeof buf), 0);
    p.quality.atol = 1e9;
    assert_int_equal(bk_plan_loose_quality_text(&p, buf, sizeof buf), 1);
    assert_string_equal(buf, "quality.atol 1e+09 lets any output within 1e+09 of the reference "
                             "pass, more than the targets' outputs are in size: the quality "
                             "check (the audit, bracket verify) checks little");
    p.quality.rtol = 1;
    assert_int_equal(bk_plan_loose_quality_text(&p, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "quality.rtol 1 lets an output of 0 pass wherever the reference "
                                "is; quality.atol 1e+09"));
    bk_plan_free(&p);
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *files[] = { "plans/demo-cpu.json", "tests/fixtures/plans/minimal.json" };
    for (int f = 0; f < 2; f++) {
        bk_plan a, b;
        bk_err err = { 0 };
        load_ok(files[f], NULL, 0, &a);
        char *d1 = bk_plan_dump(&a);
        assert_non_null(d1);
        assert_int_equal(bk_plan_parse(d1, "dumped", NULL, 0, &b, &err), BK_OK);
        char *d2 = bk_plan_dump(&b);
        assert_string_equal(d1, d2);
        assert_same_plan(&a, &b);
        assert_true(json_equal(a.candidate.params, b.candidate.params));
        free(d1);
        free(d2);
        bk_plan_free(&a);
        bk_plan_free(&b);
    }
}

static void test_free_zeroed(void **state)
{
    (void)state;
    bk_plan p;
    memset(&p, 0, sizeof p);
    bk_plan_free(&p);
    bk_plan_free(&p);
    bk_plan_free(NULL);
    assert_null(bk_plan_dump(&p));
}

/* ---- malformed plans: one precise message each ---- */

static void test_bad_fixtures(void **state)
{
    (void)state;
    static const struct {
        const char *file, *want;
    } cases[] = {
        { "bad-syntax.json", "bad-syntax.json:8:47: syntax error: '}' expected near '\"dtype\"'" },
        { "bad-duplicate-key.json", "bad-duplicate-key.json:7:25: syntax error: duplicate "
                                    "object key" },
        { "bad-unknown-key.json", "bad-unknown-key.json: arena.colour: unknown key" },
        { "bad-digest.json", "bad-digest.json: arena.stack_digest: must be \"sha256:\" "
                             "followed by 64 lowercase hex digits, got \"sha256:D29C" },
        { "bad-empty-shapes.json", "bad-empty-shapes.json: workload.shapes: must be a "
                                   "non-empty array of shapes, got []" },
        { "bad-duplicate-shape.json", "bad-duplicate-shape.json: workload.shapes[2]: "
                                      "duplicate of workload.shapes[0]" },
        { "bad-missing-iters.json", "bad-missing-iters.json: workload.iters: missing (an integer "
                                  "in 1..10000000)" },
        { "bad-bool-number.json", "bad-bool-number.json: workload.iters: must be an integer "
                                  "in 1..10000000, got true" },
        { "bad-non-integral.json", "bad-non-integral.json: arena.tp: must be an integer in "
                                   "1..1024, got 2.5" },
        { "bad-enum.json", "bad-enum.json: workload.phase: must be one of \"decode\", "
                           "\"prefill\", \"chunked_prefill\", got \"decoding\"" },
        { "does-not-exist.json", "does-not-exist.json: cannot read: No such file or "
                                 "directory" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/fixtures/plans/%s", cases[i].file);
        expect_load_error(rel, NULL, 0, cases[i].want);
    }
    expect_load_error("tests/fixtures/plans", NULL, 0, "plans: cannot read: Is a directory");
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_parse_error(strdup("{\n  \"schema\": \"bracket.plan/1\",\n  \"name\" \"x\"\n}"),
                       "plans/x.json:3:12: syntax error: ':' expected near '\"x\"'");
    /* a NUL in a string: said in the plan's terms, not by jansson's decoder flag */
    expect_parse_error(strdup("{\"schema\": \"bracket.plan/1\", \"name\": \"a\\u0000b\"}"),
                       "plans/x.json:1:47: syntax error: \\u0000 (a NUL character) is not "
                       "allowed in a plan's strings");
    expect_parse_error(strdup("[1, 2]"), "plans/x.json: the plan must be a JSON object");
    expect_parse_error(demo_with("arena", "tp", json_integer(0)),
                       "plans/x.json: arena.tp: must be an integer >= 1, got 0");
    expect_parse_error(demo_with("arena", "tp", json_integer(2048)),
                       "plans/x.json: arena.tp: must be an integer <= 1024, got 2048");
    expect_parse_error(demo_with("arena", "ep", json_string("2")),
                       "plans/x.json: arena.ep: must be an integer in 1..1024, got \"2\"");
    expect_parse_error(demo_with("protocol", "confidence", json_string("high")),
                       "plans/x.json: protocol.confidence: must be a number in (0.5, 1), got "
                       "\"high\"");
    expect_parse_error(demo_with("protocol", "confidence", json_real(1.0)),
                       "plans/x.json: protocol.confidence: must be a number in (0.5, 1), got "
                       "1.0");
    expect_parse_error(demo_with("protocol", "min_gain", json_real(1.0)),
                       "plans/x.json: protocol.min_gain: must be a number in [0, 1), got 1.0");
    expect_parse_error(demo_with("protocol", "repeats", json_integer(0)),
                       "plans/x.json: protocol.repeats: must be an integer >= 1, got 0");
    expect_parse_error(demo_with("protocol", "repeats", json_integer(17)),
                       "plans/x.json: protocol.repeats: must be an integer <= 16, got 17");
    expect_parse_error(demo_with("protocol", "repeats", json_real(2.5)),
                       "plans/x.json: protocol.repeats: must be an integer in 1..16, got 2.5");
    expect_parse_error(demo_with("timeouts", "arm_s", json_false()),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got false");
    /* an arm's deadline in nanoseconds must fit: at most 7 days, and a sane rendezvous */
    expect_parse_error(demo_with("timeouts", "arm_s", json_real(2e10)),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got "
                       "20000000000.0");
    expect_parse_error(demo_with("timeouts", "arm_s", json_real(1e308)),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got "
                       "1e308");
    expect_parse_error(demo_with("timeouts", "rendezvous_s", json_real(7200)),
                       "plans/x.json: timeouts.rendezvous_s: must be a number in [1, 3600], "
                       "got 7200.0");
    /* and long enough for engines to start and meet: a tiny positive time-out is no plan */
    expect_parse_error(demo_with("timeouts", "arm_s", json_real(1e-300)),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got 1e-300");
    expect_parse_error(demo_with("timeouts", "arm_s", json_real(0.999)),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got 0.999");
    expect_parse_error(demo_with("timeouts", "rendezvous_s", json_real(0.001)),
                       "plans/x.json: timeouts.rendezvous_s: must be a number in [1, 3600], "
                       "got 0.001");
    expect_parse_error(demo_with("timeouts", "arm_s", json_integer(0)),
                       "plans/x.json: timeouts.arm_s: must be a number in [1, 604800], got 0");
    /* a lane holds at most BK_LANE_MAX ranks: refused here, not first by `bracket run` */
    expect_parse_error(demo_with("arena", "tp", json_integer(300)),
                       "plans/x.json: arena.tp x arena.ep: 300 x 1 = 300 exceeds 256 ranks a "
                       "lane (tp x ep must be in 1..256)");
    expect_parse_error(demo_with("arena", "ep", json_integer(200)),
                       "plans/x.json: arena.tp x arena.ep: 2 x 200 = 400 exceeds 256 ranks a "
                       "lane (tp x ep must be in 1..256)");
    expect_parse_error(demo_with("workload/shapes/1", "hidden", json_integer(0)),
                       "plans/x.json: workload.shapes[1].hidden: must be an integer >= 1, got 0");
    expect_parse_error(demo_with("workload/shapes/0", "weight", json_integer(0)),
                       "plans/x.json: workload.shapes[0].weight: must be a number > 0, got 0");
    expect_parse_error(demo_with("workload/shapes/0", "topk", json_integer(0)),
                       "plans/x.json: workload.shapes[0].topk: must be an integer >= 1, got 0");
    expect_parse_error(demo_with("workload", "shapes", json_pack("[i]", 3)),
                       "plans/x.json: workload.shapes[0]: must be an object, got 3");
    expect_parse_error(demo_with("arena", "dtype", json_string("int8")),
                       "plans/x.json: arena.dtype: must be one of \"bf16\", \"fp16\", \"fp32\", "
                       "got \"int8\"");
    expect_parse_error(demo_with("", "backend", json_string("rocm")),
                       "plans/x.json: backend: must be one of \"auto\", \"cpu\", \"cuda\", got "
                       "\"rocm\"");
    expect_parse_error(demo_with("", "schema", json_string("bracket.plan/2")),
                       "plans/x.json: schema: must be \"bracket.plan/1\", got \"bracket.plan/2\"");
    expect_parse_error(demo_with("", "name", json_string("my plan")),
                       "plans/x.json: name: may hold only letters, digits, '.', '_' and '-', "
                       "got \"my plan\"");
    expect_parse_error(demo_with("", "name", json_string("")),
                       "plans/x.json: name: must be a non-empty string, got \"\"");
    /* blanks alone are no name */
    expect_parse_error(demo_with("arena", "model", json_string("   ")),
                       "plans/x.json: arena.model: must not be blank, got \"   \"");
    /* a control character anywhere (a value, a key, params): printed and recorded as it is,
     * where it would reach the terminal; records hold none. A tab is text (it was taken
     * before, and moves the cursor, nothing more), blanks alone are still no name */
    expect_parse_error(demo_with("arena", "model", json_string("\t ")),
                       "plans/x.json: arena.model: must not be blank, got \"\\t \"");
    expect_parse_error(demo_with("arena", "model", json_string("\t\n")),
                       "plans/x.json: arena.model: must not contain control characters (byte "
                       "0x0a at offset 1)");
    expect_parse_error(demo_with("arena", "model", json_string("M3\x1b[2J")),
                       "plans/x.json: arena.model: must not contain control characters (byte "
                       "0x1b at offset 2)");
    expect_parse_error(demo_with("arena", "quantization", json_string("fp8 \xc2\x9b" "2J")),
                       "plans/x.json: arena.quantization: must not contain control characters "
                       "(byte 0xc2 at offset 4)");
    expect_parse_error(demo_with("candidate", "params", json_pack("{s:[i,s]}", "k", 1, "a\nb")),
                       "plans/x.json: candidate.params.k[1]: must not contain control "
                       "characters (byte 0x0a at offset 1)");
    expect_parse_error(demo_with("candidate", "params", json_pack("{s:i}", "k\x7f", 1)),
                       "plans/x.json: candidate.params (a key): must not contain control "
                       "characters (byte 0x7f at offset 1)");
    expect_parse_error(demo_with("arena", "target_catalog", json_string("bracket.catalog/0")),
                       "plans/x.json: arena.target_catalog: must be \"bracket.catalog/1\", got "
                       "\"bracket.catalog/0\"");
    /* a missing or empty digest is told the rule, not just "a non-empty string" */
    expect_parse_error(demo_with("candidate", "source_digest", NULL),
                       "plans/x.json: candidate.source_digest: missing (\"sha256:\" followed by "
                       "64 lowercase hex digits)");
    expect_parse_error(demo_with("candidate", "source_digest", json_string("")),
                       "plans/x.json: candidate.source_digest: must be \"sha256:\" followed by "
                       "64 lowercase hex digits, got \"\"");
    expect_parse_error(demo_with("arena", "stack_digest", NULL),
                       "plans/x.json: arena.stack_digest: missing (\"sha256:\" followed by 64 "
                       "lowercase hex digits)");
    expect_parse_error(demo_with("incumbent", "source_digest", json_string("sha256:00")),
                       "plans/x.json: incumbent.source_digest: unknown key");
    expect_parse_error(demo_with("candidate", "params", json_array()),
                       "plans/x.json: candidate.params: must be an object, got []");
    expect_parse_error(demo_with("", "lanes", json_string("disjoint")),
                       "plans/x.json: lanes: must be an object, got \"disjoint\"");
    expect_parse_error(demo_with("", "arena", NULL), "plans/x.json: arena: missing (an object)");
    expect_parse_error(demo_with("workload", "phase", NULL),
                       "plans/x.json: workload.phase: missing (one of \"decode\", \"prefill\", "
                       "\"chunked_prefill\")");
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    expect_parse_error(demo_with("", "name", json_string(longname)),
                       "plans/x.json: name: must be shorter than 128 bytes (UTF-8), got "
                       "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...");
    json_t *many = json_array();
    for (int i = 0; i <= BK_MAX_SHAPES; i++)
        json_array_append_new(many, json_pack("{sisisf}", "tokens", i + 1, "hidden", 64,
                                              "weight", 1.0));
    expect_parse_error(demo_with("workload", "shapes", many),
                       "plans/x.json: workload.shapes: must hold at most 64 shapes, got 65");
}

/* ---- --set ---- */

static void test_set_ok(void **state)
{
    (void)state;
    const char *sets[] = { "candidate.variant=shm_twopass", "workload.shapes[0].tokens=8",
                           "workload.shapes.1.hidden=2048", "protocol.version=\"v7\"",
                           "candidate.params.block.size=4", "arena.tp=4.0" };
    bk_plan p;
    load_ok("plans/demo-cpu.json", sets, 6, &p);
    assert_string_equal(p.candidate.name, "shm_twopass");
    assert_int_equal(p.workload.shapes[0].tokens, 8);
    assert_int_equal(p.workload.shapes[1].hidden, 2048);
    assert_int_equal(p.protocol.version, BK_PROTO_V7);
    assert_int_equal(p.arena.tp, 4);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(p.candidate.params, "block"), "size")),
                     4);
    char *dump = bk_plan_dump(&p);
    assert_non_null(strstr(dump, "\"variant\":\"shm_twopass\""));
    assert_non_null(strstr(dump, "{\"hidden\":4096,\"tokens\":8,\"weight\":0.5}"));
    assert_non_null(strstr(dump, "\"params\":{\"block\":{\"size\":4}}"));
    assert_non_null(strstr(dump, "\"tp\":4}"));
    free(dump);
    bk_plan_free(&p);

    /* a params value written as a whole number with a zero fraction (2.0, 1e3) is the
     * integer (a variant's integer parameter takes it, the plan records it); others stay */
    const char *whole[] = { "candidate.params={\"at_iter\":2.0,\"element\":1e3,\"f\":0.5,"
                            "\"huge\":1e300,\"neg\":-4.0,\"s\":\"2.0\"}",
                            "incumbent.params.rank=1.0" };
    load_ok("plans/demo-cpu.json", whole, 2, &p);
    const json_t *cp = p.candidate.params;
    assert_true(json_is_integer(json_object_get(cp, "at_iter")));
    assert_int_equal(json_integer_value(json_object_get(cp, "at_iter")), 2);
    assert_int_equal(json_integer_value(json_object_get(cp, "element")), 1000);
    assert_int_equal(json_integer_value(json_object_get(cp, "neg")), -4);
    assert_true(json_is_real(json_object_get(cp, "f")));
    assert_true(json_is_real(json_object_get(cp, "huge"))); /* past 2^53: no exact integer */
    assert_true(json_is_string(json_object_get(cp, "s")));
    assert_true(json_is_integer(json_object_get(p.incumbent.params, "rank")));
    dump = bk_plan_dump(&p);
    assert_non_null(strstr(dump, "\"at_iter\":2,"));
    free(dump);
    bk_plan_free(&p);

    /* text that only starts like a number stays text */
    const char *texts[] = { "arena.model=405B", "arena.substrate=1.5.3", "arena.quantization=1e" };
    load_ok("plans/demo-cpu.json", texts, 3, &p);
    assert_string_equal(p.arena.model, "405B");
    assert_string_equal(p.arena.substrate, "1.5.3");
    assert_string_equal(p.arena.quantization, "1e");
    bk_plan_free(&p);

    /* sections the file leaves out can be created by a --set */
    const char *more[] = { "timeouts.arm_s=5", "arena.calibration.speed=cal-7",
                           "workload.iters=1e3", "arena.quantization=\"8\"",
                           "workload.shapes[2]={\"tokens\":64,\"hidden\":64,\"weight\":4}" };
    load_ok("tests/fixtures/plans/minimal.json", more, 5, &p);
    assert_int_equal(p.workload.iters, 1000);
    assert_string_equal(p.arena.quantization, "8");
    assert_int_equal(p.workload.nshapes, 3);
    assert_float_equal(p.workload.shapes[2].weight, 0.5, 1e-12);
    assert_float_equal(p.timeouts.arm_s, 5, 0);
    assert_float_equal(p.timeouts.rendezvous_s, 30, 0);
    assert_string_equal(p.arena.calib_speed, "cal-7");
    bk_plan_free(&p);

    /* the shortest time-outs, and quoted strings with escapes (the quotes are not kept) */
    const char *edge[] = { "timeouts.arm_s=1", "timeouts.rendezvous_s=1",
                           "arena.model=\"tab\\there \\u00e9\"", "arena.dtype= \"fp16\"",
                           "arena.substrate=say \"hi\"" };
    load_ok("tests/fixtures/plans/minimal.json", edge, 5, &p);
    assert_float_equal(p.timeouts.arm_s, 1, 0);
    assert_float_equal(p.timeouts.rendezvous_s, 1, 0);
    assert_string_equal(p.arena.model, "tab\there \xc3\xa9");
    assert_string_equal(p.arena.dtype, "fp16");
    assert_string_equal(p.arena.substrate, "say \"hi\"");
    bk_plan_free(&p);
}

/* bk_plan_name_set on a copy of msg in a buffer of len bytes: the message becomes want */
static void expect_named(const char *label, const char *const *sets, int nsets,
                         const char *msg, size_t len, const char *want)
{
    char buf[1024];
    assert_true(len <= sizeof buf);
    snprintf(buf, len, "%s", msg);
    bk_plan_name_set(label, sets, nsets, buf, len);
    assert_string_equal(buf, want);
}

/* bk_plan_name_set: which --set a later check's refusal names, and how */
static void test_name_set(void **state)
{
    (void)state;
    const char *sets[] = { "arena.tp=2", "workload.shapes[0].hidden=4097", "arena.tp=64",
                           "candidate.params={\"rank\":5}", "noequals",
                           "workload.shapes[1].tokens=3", "workload.shapes[1].hidden=8",
                           "workload.shapes[1].tokens=5", "workload.shapes[2].weight=1" };
    static const struct {
        const char *msg, *want;
    } cases[] = {
        /* the field is the set's (the last of its path), or inside it */
        { "p.json: arena.tp: bad", "p.json: arena.tp: bad (from --set \"arena.tp=64\")" },
        { "p.json: candidate.params.rank: bad",
          "p.json: candidate.params.rank: bad (from --set \"candidate.params={\"rank\":5}\")" },
        /* one of the fields "A x B" */
        { "p.json: arena.tp x arena.ep: lane",
          "p.json: arena.tp x arena.ep: lane (from --set \"arena.tp=64\")" },
        /* the set lies inside the refused field */
        { "p.json: workload.shapes[0]: hidden",
          "p.json: workload.shapes[0]: hidden (--set \"workload.shapes[0].hidden=4097\" "
          "changed it)" },
        /* ... each --set inside it, the last of each path (tokens=3 gave way to tokens=5) */
        { "p.json: workload.shapes[1]: too large",
          "p.json: workload.shapes[1]: too large (--set \"workload.shapes[1].hidden=8\" and "
          "--set \"workload.shapes[1].tokens=5\" changed it)" },
        { "p.json: workload.shapes: none",
          "p.json: workload.shapes: none (--set \"workload.shapes[0].hidden=4097\", --set "
          "\"workload.shapes[1].hidden=8\", --set \"workload.shapes[1].tokens=5\" and --set "
          "\"workload.shapes[2].weight=1\" changed it)" },
        /* the field's own --set names it alone, whatever else lies inside */
        { "p.json: workload.shapes[1].tokens: bad",
          "p.json: workload.shapes[1].tokens: bad (from --set \"workload.shapes[1].tokens=5\")" },
        /* a field no --set touched, a path that only begins alike, another label, no path */
        { "p.json: arena.ep: bad", "p.json: arena.ep: bad" },
        { "p.json: arena.tpx: bad", "p.json: arena.tpx: bad" },
        { "p.json: workload.shapes[3]: hidden", "p.json: workload.shapes[3]: hidden" },
        { "q.json: arena.tp: bad", "q.json: arena.tp: bad" },
        { "p.json: arena.tp", "p.json: arena.tp" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_named("p.json", sets, 9, cases[i].msg, 512, cases[i].want);
    /* a long --set (a list of shapes) is named by its path */
    char longset[400] = "workload.shapes=[", msg[512] = "p.json: workload.shapes[3].tokens: bad";
    while (strlen(longset) < 300)
        strcat(longset, "{\"tokens\":1,\"hidden\":8,\"weight\":1},");
    const char *one[] = { longset };
    bk_plan_name_set("p.json", one, 1, msg, sizeof msg);
    assert_string_equal(msg, "p.json: workload.shapes[3].tokens: bad (from --set "
                             "\"workload.shapes=...\")");
    /* ... and a path longer than that is cut between characters, never inside one */
    char key[400] = "candidate.params.", umsg[1024];
    while (strlen(key) < 317)
        strcat(key, "\xc3\xa9"); /* é: 17 + 2 x 150 bytes */
    char uset[410];
    snprintf(uset, sizeof uset, "%s=1", key);
    snprintf(umsg, sizeof umsg, "p.json: %s: bad", key);
    const char *uone[] = { uset };
    bk_plan_name_set("p.json", uone, 1, umsg, sizeof umsg);
    const char *from = strstr(umsg, " (from --set \"");
    assert_non_null(from);
    /* 200 bytes would end inside the 92nd é: 199 of the path, then "=..." */
    assert_int_equal(strlen(from), strlen(" (from --set \"") + 199 + strlen("=...\")"));
    assert_int_equal(strncmp(from + strlen(" (from --set \"") + 197, "\xc3\xa9=...\")", 7), 0);
    /* a suffix the buffer cannot hold whole is left out, never cut */
    expect_named("p.json", sets, 5, "p.json: arena.tp: bad", 24, "p.json: arena.tp: bad");
    /* more --set inside than the message holds: the last, and how many others */
    const char *many[] = { "workload.shapes[0].tokens=11111111111111111111",
                           "workload.shapes[1].tokens=22222222222222222222",
                           "workload.shapes[2].tokens=33333333333333333333" };
    expect_named("p.json", many, 3, "p.json: workload.shapes: bad", 160,
                 "p.json: workload.shapes: bad (--set "
                 "\"workload.shapes[2].tokens=33333333333333333333\" and 2 other --set "
                 "changed it)");
    /* a --set that a later one of a path around it replaced is not named */
    const char *around[] = { "workload.shapes[0].weight=5",
                             "workload.shapes[0]={\"tokens\":1,\"hidden\":8,\"weight\":1}",
                             "workload.shapes[1].weight=2" };
    expect_named("p.json", around, 3, "p.json: workload.shapes: bad", 400,
                 "p.json: workload.shapes: bad (--set \"workload.shapes[0]={\"tokens\":1,"
                 "\"hidden\":8,\"weight\":1}\" and --set \"workload.shapes[1].weight=2\" "
                 "changed it)");
    /* the message is made printable (BK_FAIL): a label, a set's path or value with a control
     * character in it is compared, and named, made so too */
    const char *ctl[] = { "arena.model=a\x1b[2Jb", "candidate.params.r\tk=1" };
    expect_named("d\x1br/p.json", ctl, 2, "d?r/p.json: arena.model: bad", 200,
                 "d?r/p.json: arena.model: bad (from --set \"arena.model=a?[2Jb\")");
    expect_named("p.json", ctl, 2, "p.json: candidate.params.r k: bad", 200,
                 "p.json: candidate.params.r k: bad (from --set \"candidate.params.r k=1\")");
}

static void test_set_errors(void **state)
{
    (void)state;
    static const struct {
        const char *set, *want;
    } cases[] = {
        { "noequals", "--set \"noequals\": expected dotted.path=value" },
        { "=3", "--set \"=3\": expected dotted.path=value" },
        { "arena..tp=2", "--set \"arena..tp=2\": bad path" },
        { "workload.shapes[x].tokens=2", "--set \"workload.shapes[x].tokens=2\": bad path" },
        { "arena.colour=red", "--set \"arena.colour=red\": arena.colour: unknown key" },
        /* a value a --set gave says so: the file may be fine */
        { "arena.tp=0", "demo-cpu.json: arena.tp: must be an integer >= 1, got 0 (from --set "
          "\"arena.tp=0\")" },
        { "workload.shapes=[{\"tokens\":0,\"hidden\":64,\"weight\":1}]",
          "workload.shapes[0].tokens: must be an integer >= 1, got 0 (from --set "
          "\"workload.shapes=[" },
        { "arena.tp=two", "demo-cpu.json: arena.tp: must be an integer in 1..1024, got \"two\"" },
        { "colour.red=1", "--set \"colour.red=1\": colour: unknown key" },
        { "workload.shapes[5].tokens=1",
          "--set \"workload.shapes[5].tokens=1\": workload.shapes[5]: index out of range (2 "
          "elements)" },
        { "name.first=x", "--set \"name.first=x\": name is not an object" },
        /* a JSON escape that makes a control character: refused as in the file */
        { "arena.model=\"M\\u001b[2J\"", "demo-cpu.json: arena.model: must not contain "
          "control characters (byte 0x1b at offset 1)" },
        { "arena[0]=x", "--set \"arena[0]=x\": arena is not an array" },
        { "workload.shapes[2]={\"tokens\":1,\"hidden\":4096,\"weight\":1}",
          "demo-cpu.json: workload.shapes[2]: duplicate of workload.shapes[0]" },
        /* a value written as a JSON object or array must be valid JSON, never a string */
        { "candidate.params={\"fraction\":0.1,\"fraction\":9}",
          "--set \"candidate.params={\"fraction\":0.1,\"fraction\":9}\": the value is not "
          "valid JSON: duplicate object key near '\"fraction\"' at character 26 of the value" },
        { "candidate.params={\"fraction\":0.1,}",
          "--set \"candidate.params={\"fraction\":0.1,}\": the value is not valid JSON: "
          "string or '}' expected near '}' at character 17 of the value" },
        { "workload.shapes=[{\"tokens\":1,\"hidden\":64,\"weight\":1},]",
          "the value is not valid JSON: unexpected token near ']' at character 38" },
        { "timeouts.arm_s=2e10",
          "demo-cpu.json: timeouts.arm_s: must be a number in [1, 604800], got 20000000000.0" },
        { "timeouts.rendezvous_s=1e300",
          "demo-cpu.json: timeouts.rendezvous_s: must be a number in [1, 3600], got 1" },
        { "timeouts.arm_s=1e-300",
          "demo-cpu.json: timeouts.arm_s: must be a number in [1, 604800], got 1e-300" },
        /* a value written as a quoted string must be a valid JSON string, as in the file
         * (where "a\u0000b" is a syntax error), never a string with the quotes in it */
        { "arena.model=\"a\\u0000b\"",
          "--set \"arena.model=\"a\\u0000b\"\": the value is not a valid JSON string: "
          "\\u0000 is not allowed" },
        { "arena.model=\"unterminated",
          "--set \"arena.model=\"unterminated\": the value is not a valid JSON string: "
          "premature end of input" },
        { "arena.model=\"two\" \"strings\"",
          "the value is not a valid JSON string: end of file expected" },
        { "arena.tp=300", "demo-cpu.json: arena.tp x arena.ep: 300 x 1 = 300 exceeds 256" },
        /* a number too big to hold is said as in the file, not taken as its text (which
         * read "must be an integer >= 0, got \"9223372036854775808\"") */
        { "workload.seed=9223372036854775808",
          "--set \"workload.seed=9223372036854775808\": the value is not a number a plan can "
          "hold: too big integer near '9223372036854775808' at character 19 of the value" },
        { "workload.shapes[0].weight=-1E+400",
          "the value is not a number a plan can hold: real number overflow near '-1E+400'" },
        /* a key --set added that the plan does not know is the --set's mistake, not the
         * file's (which read "demo-cpu.json: quality.rtoll: unknown key") */
        { "quality.rtoll=0.1", "--set \"quality.rtoll=0.1\": quality.rtoll: unknown key" },
        { "workload.shapes[1].tokenz=3",
          "--set \"workload.shapes[1].tokenz=3\": workload.shapes[1].tokenz: unknown key" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_load_error("plans/demo-cpu.json", &cases[i].set, 1, cases[i].want);
    /* the --set that stands (the last of a path) is named; one of another path is not */
    const char *two[] = { "arena.tp=0", "arena.tp=-1", "arena.ep=1" };
    expect_load_error("plans/demo-cpu.json", two, 3, "arena.tp: must be an integer >= 1, got -1 "
                      "(from --set \"arena.tp=-1\")");
    const char *other[] = { "arena.ep=1", "workload.shapes[0].hidden=5" };
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_load(src_path("plans/demo-cpu.json"), other, 2, &p, &err), BK_OK);
    bk_plan_free(&p);
    /* a plan named with a control character (made printable in the message) still has its
     * unknown key blamed on the --set, and a refused value named with its --set */
    FILE *f = fopen(src_path("plans/demo-cpu.json"), "rb");
    assert_non_null(f);
    static char text[1 << 16];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *colour[] = { "arena.colour=red" }, *tp[] = { "arena.tp=0" };
    assert_int_equal(bk_plan_parse(text, "d\tir/p.json", colour, 1, &p, &err), BK_ERR_INPUT);
    assert_string_equal(err.msg, "--set \"arena.colour=red\": arena.colour: unknown key");
    bk_err_clear(&err);
    assert_int_equal(bk_plan_parse(text, "d\x1bir/p.json", tp, 1, &p, &err), BK_ERR_INPUT);
    assert_string_equal(err.msg, "d?ir/p.json: arena.tp: must be an integer >= 1, got 0 (from "
                                 "--set \"arena.tp=0\")");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_plan),   cmocka_unit_test(test_defaults_and_weights),
        cmocka_unit_test(test_quality_defaults_by_target),
        cmocka_unit_test(test_loose_quality),
        cmocka_unit_test(test_round_trip),  cmocka_unit_test(test_free_zeroed),
        cmocka_unit_test(test_bad_fixtures), cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_set_ok),      cmocka_unit_test(test_set_errors),
        cmocka_unit_test(test_name_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
