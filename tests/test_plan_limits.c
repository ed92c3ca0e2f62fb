/* test_plan_limits.c - the edges of the plan's limits (plans/README.md) and of --set paths:
 * a value exactly at a limit is taken and one past it is refused, naming the field; digests
 * are held to "sha256:" and 64 lowercase hex digits; shapes are duplicates only when every
 * size matches; weights that overflow or vanish are named; a --set path that is malformed,
 * too long or too deep, or that indexes past an array's end, is refused before validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/plan.h"

#define DEMO "plans/demo-cpu.json"
#define HEX64 "d29c2ec23883f2e9f7f59594aeb44e90da4ab1d140c5136abc376f56381585c1"

static const char *demo_path(void)
{
    static char buf[1024];
    const char *d = getenv("BK_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", d && d[0] ? d : BK_SOURCE_DIR, DEMO);
    return buf;
}

/* The demo plan with `sets` must load. */
static void set_ok(bk_plan *p, const char *const *sets, int n)
{
    bk_err err = { 0 };
    if (bk_plan_load(demo_path(), sets, n, p, &err) != BK_OK)
        fail_msg("%s: %s", sets[0], err.msg);
}

/* The demo plan with the one `set` must be refused as BK_ERR_INPUT with `want` in the message
 * (after the "PATH/demo-cpu.json: " label when `want` starts with the field). */
static void set_bad(const char *set, const char *want)
{
    bk_err err = { 0 };
    bk_plan p;
    const char *sets[] = { set };
    assert_int_equal(bk_plan_load(demo_path(), sets, 1, &p, &err), BK_ERR_INPUT);
    if (!strstr(err.msg, want))
        fail_msg("--set %s: expected \"%s\" in \"%s\"", set, want, err.msg);
    assert_null(p.doc);
}

/* ---- integers and numbers at their limits ---- */

static void test_number_edges(void **state)
{
    (void)state;
    bk_plan p;
    const char *at[] = { "arena.tp=16", "arena.ep=16", "workload.warmup_iters=0",
                         "protocol.drift_limit=0", "quality.rtol=0", "quality.atol=0",
                         "protocol.bootstrap_resamples=100", "workload.iters=10000000",
                         "arena.incumbent_generation=0" };
    set_ok(&p, at, 9);
    assert_int_equal(p.arena.tp * p.arena.ep, 256); /* BK_LANE_MAX exactly */
    assert_int_equal(p.workload.warmup_iters, 0);
    assert_float_equal(p.protocol.drift_limit, 0, 0);
    assert_float_equal(p.quality.rtol, 0, 0);
    assert_int_equal(p.protocol.bootstrap_resamples, 100);
    bk_plan_free(&p);
    set_bad("protocol.bootstrap_resamples=99",
            "demo-cpu.json: protocol.bootstrap_resamples: must be an integer >= 100, got 99");
    set_bad("arena.incumbent_generation=-1",
            "demo-cpu.json: arena.incumbent_generation: must be an integer >= 0, got -1");
    set_bad("workload.shapes[0].tokens=0",
            "demo-cpu.json: workload.shapes[0].tokens: must be an integer >= 1, got 0");
    set_bad("workload.warmup_iters=-1",
            "demo-cpu.json: workload.warmup_iters: must be an integer >= 0, got -1");
    set_bad("quality.rtol=-0.5", "demo-cpu.json: quality.rtol: must be a number >= 0, got -0.5");
    /* integral but past int64: said past its bound, never a wrapped integer (nor called no
     * integer, as 1e20 is one) */
    set_bad("arena.tp=1e19", "demo-cpu.json: arena.tp: must be an integer <= 1024, got 1e19");
    set_bad("arena.tp=-1e19", "demo-cpu.json: arena.tp: must be an integer >= 1, got -1e19");
    set_bad("workload.shapes[0].tokens=1e20", "demo-cpu.json: workload.shapes[0].tokens: must "
            "be an integer <= 9223372036854775807, got 1e20");
    set_bad("workload.seed=1e19", "demo-cpu.json: workload.seed: must be an integer <= "
            "9223372036854775807, got 1e19");
    set_bad("arena.tp=1.5", "demo-cpu.json: arena.tp: must be an integer in 1..1024, got 1.5");
    /* 9.1e18 is under 2^63: an integer a plan holds, written either way */
    const char *big_seed[] = { "workload.seed=9.1e18" };
    set_ok(&p, big_seed, 1);
    assert_true(p.workload.seed == 9100000000000000000ull);
    bk_plan_free(&p);
    set_bad("workload.seed=9.3e18", "demo-cpu.json: workload.seed: must be an integer <= "
            "9223372036854775807, got 9.3e18");
    set_bad("protocol.confidence=0.5",
            "demo-cpu.json: protocol.confidence: must be a number in (0.5, 1), got 0.5");
}

/* ---- strings ---- */

static void test_string_edges(void **state)
{
    (void)state;
    char set[300];
    memset(set, 0, sizeof set);
    strcpy(set, "name=");
    memset(set + 5, 'a', 127); /* 127 characters fit a 128-byte field */
    bk_plan p;
    const char *sets[] = { set };
    set_ok(&p, sets, 1);
    assert_int_equal(strlen(p.name), 127);
    bk_plan_free(&p);
    set[5 + 127] = 'a'; /* 128 do not: refused, never cut */
    set_bad(set, "demo-cpu.json: name: must be shorter than 128 bytes (UTF-8)");
    set_bad("name=a/b", "demo-cpu.json: name: may hold only letters, digits, '.', '_' and '-', "
                        "got \"a/b\"");
    set_bad("name=a:b", "demo-cpu.json: name: may hold only");
    /* an enum given another type names the choices, whatever the type */
    set_bad("arena.dtype=3", "demo-cpu.json: arena.dtype: must be one of \"bf16\", \"fp16\", "
                             "\"fp32\", got 3");
    set_bad("lanes.policy=null", "demo-cpu.json: lanes.policy: must be one of \"disjoint\", "
                                 "\"shared\", got null");
}

static void test_digest_rule(void **state)
{
    (void)state;
    const char *rule = "must be \"sha256:\" followed by 64 lowercase hex digits";
    const char *bad[] = {
        "arena.stack_digest=sha256:00",                 /* too short */
        "arena.stack_digest=sha512:" HEX64,             /* another prefix */
        "arena.stack_digest=sha256:" HEX64 "0",         /* too long */
        "arena.stack_digest=sha256:g" HEX64 "",         /* 65 digits, one not hex */
        "candidate.source_digest=sha256:" "g29c2ec23883f2e9f7f59594aeb44e90da4ab1d140c5136abc376f"
        "56381585c1",                                   /* 'g' is not hex */
        "candidate.source_digest=sha256:" "D29C2EC23883F2E9F7F59594AEB44E90DA4AB1D140C5136ABC376F"
        "56381585C1",                                   /* uppercase */
        "candidate.source_digest=7",                    /* not a string */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        set_bad(bad[i], rule);
    bk_plan p;
    const char *ok[] = { "arena.stack_digest=sha256:" HEX64 };
    set_ok(&p, ok, 1);
    assert_string_equal(p.arena.stack_digest, "sha256:" HEX64);
    bk_plan_free(&p);
}

/* ---- shapes ---- */

static void test_shape_edges(void **state)
{
    (void)state;
    bk_plan p;
    /* duplicates only when every size matches: one differing size makes another shape */
    const char *distinct[] = {
        "workload.shapes=[{\"tokens\":1,\"hidden\":64,\"weight\":1},"
        "{\"tokens\":1,\"hidden\":128,\"weight\":1},"
        "{\"tokens\":1,\"hidden\":64,\"weight\":1,\"experts\":8,\"topk\":2,\"intermediate\":32},"
        "{\"tokens\":1,\"hidden\":64,\"weight\":1,\"experts\":4,\"topk\":2,\"intermediate\":32},"
        "{\"tokens\":1,\"hidden\":64,\"weight\":1,\"experts\":8,\"topk\":1,\"intermediate\":32},"
        "{\"tokens\":1,\"hidden\":64,\"weight\":1,\"experts\":8,\"topk\":2,\"intermediate\":64}]",
    };
    set_ok(&p, distinct, 1);
    assert_int_equal(p.workload.nshapes, 6);
    bk_plan_free(&p);
    set_bad("workload.shapes=[{\"tokens\":1,\"hidden\":64,\"weight\":1,\"experts\":8},"
            "{\"tokens\":1,\"hidden\":64,\"weight\":2,\"experts\":8}]",
            "demo-cpu.json: workload.shapes[1]: duplicate of workload.shapes[0] (same sizes)");
    /* exactly BK_MAX_SHAPES shapes are a plan */
    char set[8192];
    size_t used = (size_t)snprintf(set, sizeof set, "workload.shapes=[");
    for (int i = 0; i < BK_MAX_SHAPES; i++)
        used += (size_t)snprintf(set + used, sizeof set - used,
                                 "%s{\"tokens\":%d,\"hidden\":64,\"weight\":1}", i ? "," : "",
                                 i + 1);
    snprintf(set + used, sizeof set - used, "]");
    const char *many[] = { set };
    set_ok(&p, many, 1);
    assert_int_equal(p.workload.nshapes, BK_MAX_SHAPES);
    bk_plan_free(&p);
    /* relative weights: a sum past a double, or a share that rounds to 0, is named */
    set_bad("workload.shapes=[{\"tokens\":1,\"hidden\":64,\"weight\":1e308},"
            "{\"tokens\":2,\"hidden\":64,\"weight\":1e308}]",
            "demo-cpu.json: workload.shapes: the weights sum to more than a double holds");
    set_bad("workload.shapes=[{\"tokens\":1,\"hidden\":64,\"weight\":1e300},"
            "{\"tokens\":2,\"hidden\":64,\"weight\":1e-300}]",
            "demo-cpu.json: workload.shapes[1].weight: negligible against the other weights");
}

/* ---- --set paths ---- */

static void test_set_paths(void **state)
{
    (void)state;
    set_bad("workload.shapes[2].tokens=1",
            "--set \"workload.shapes[2].tokens=1\": workload.shapes[2]: index out of range (2 "
            "elements)");
    set_bad("workload.shapes[].tokens=1", "--set \"workload.shapes[].tokens=1\": bad path");
    set_bad("workload.shapes[0]x.tokens=1", "--set \"workload.shapes[0]x.tokens=1\": bad path");
    set_bad("workload.shapes[0].tokens[=1", "bad path");
    /* only the plan's sections and what is inside params may be created */
    set_bad("incumbent.paramz.x=1", "--set \"incumbent.paramz.x=1\": incumbent.paramz: unknown "
                                    "key");
    bk_plan p;
    const char *deep[] = { "incumbent.params.a.b=1" };
    set_ok(&p, deep, 1);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(p.incumbent.params, "a"), "b")), 1);
    bk_plan_free(&p);
    /* 32 steps at most */
    char set[600] = "incumbent.params";
    for (int i = 0; i < 30; i++)
        strcat(set, ".a");
    strcat(set, "=1");
    const char *s32[] = { set };
    set_ok(&p, s32, 1);
    bk_plan_free(&p);
    snprintf(set, sizeof set, "incumbent.params");
    for (int i = 0; i < 31; i++)
        strcat(set, ".a");
    strcat(set, "=1");
    char want[700];
    snprintf(want, sizeof want, "--set \"%s\": bad path", set);
    set_bad(set, want);
    /* a path of 511 characters is read, one of 512 is refused */
    char longp[600];
    memset(longp, 0, sizeof longp);
    memset(longp, 'k', 512);
    strcat(longp, "=1");
    snprintf(want, sizeof want, "--set \"%s\": expected dotted.path=value", longp);
    set_bad(longp, want);
    longp[511] = '=';
    longp[512] = '1';
    longp[513] = '\0';
    set_bad(longp, "--set \"kkkkkkkk"); /* taken as a path, then an unknown key of the --set */
}

/* A plan given as text (records embed theirs) refuses duplicate keys like a file. */
static void test_parse_duplicates(void **state)
{
    (void)state;
    bk_err err = { 0 };
    bk_plan p;
    assert_int_equal(bk_plan_parse("{\"schema\":\"bracket.plan/1\",\"schema\":\"x\"}", "rec",
                                   NULL, 0, &p, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "rec:1:"));
    assert_non_null(strstr(err.msg, "duplicate object key"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_number_edges),  cmocka_unit_test(test_string_edges),
        cmocka_unit_test(test_digest_rule),   cmocka_unit_test(test_shape_edges),
        cmocka_unit_test(test_set_paths),     cmocka_unit_test(test_parse_duplicates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
