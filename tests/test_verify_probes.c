/* test_verify_probes.c - the shapes `bracket verify` checks: a real candidate's domain edges
 * and one past each; a diagnostic wrapper's probes follow what it serves (its base's domain,
 * widened by the default base), and where there is no default base (cuda, or a fake one
 * here) a probe past its base's edges is left out with a note instead of failing the call.
 * A probe outside the incumbent's domain too is left out, the list stops at BK_MAX_SHAPES,
 * and MoE shapes that differ only in experts are two. Needs no GPU: the builder only reads
 * the catalog's domains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog.h"
#include "tests/cuda_half.h"
#include "runner/verify_probes.h"

#define AR "collective.allreduce_residual_rmsnorm"

/* The plan's shapes (tokens 1 and 32, hidden 4096): all the builder reads of a plan. */
static void make_plan(bk_plan *p)
{
    memset(p, 0, sizeof *p);
    p->workload.nshapes = 2;
    p->workload.shapes[0] = (bk_shape){ .tokens = 1, .hidden = 4096, .weight = 0.5 };
    p->workload.shapes[1] = (bk_shape){ .tokens = 32, .hidden = 4096, .weight = 0.5 };
}

#define MOE "moe.fused_experts_reduce"

/* The context for candidate `cand` of target `tg` against incumbent `inc` (NULL: the
 * backend's usual one) at a lane of 2, with `params` (NULL: none) for a diagnostic's bases. */
static void context(bk__verify_probes *c, const char *tg, const char *cand, const char *inc,
                    json_t *params, bk_backend backend)
{
    memset(c, 0, sizeof *c);
    c->tg = bk_catalog_target(tg);
    c->v = bk_catalog_variant(tg, cand);
    c->inc = bk_catalog_variant(tg, inc ? inc
                                    : backend == BK_BACKEND_CPU ? "shm_twopass"
                                                                : "nccl_then_rmsnorm");
    c->world = 2;
    c->dtype = "bf16";
    c->backend = backend;
    assert_non_null(c->tg);
    assert_non_null(c->v);
    assert_non_null(c->inc);
    bk_catalog_diag_bases(c->v, params, backend, &c->base, &c->fallback);
}

/* The shapes verify would check for plan p in context c, as "tokens x hidden" words in the
 * builder's order (a MoE shape's word ends in "/e<experts>"); c keeps the notes. Returns
 * how many. */
static size_t shapes_of(const bk_plan *p, bk__verify_probes *c, int domain_shapes, char *out,
                        size_t len)
{
    char *text = bk__verify_shapes_json(p, c, domain_shapes);
    assert_non_null(text);
    json_t *a = json_loads(text, 0, NULL);
    size_t i, used = 0;
    json_t *j;
    out[0] = '\0';
    json_array_foreach(a, i, j)
    {
        const json_int_t e = json_integer_value(json_object_get(j, "experts"));
        int k = snprintf(out + used, len - used, "%s%lldx%lld", i ? " " : "",
                         (long long)json_integer_value(json_object_get(j, "tokens")),
                         (long long)json_integer_value(json_object_get(j, "hidden")));
        used += k > 0 ? (size_t)k : 0;
        if (e && used < len) {
            k = snprintf(out + used, len - used, "/e%lld", (long long)e);
            used += k > 0 ? (size_t)k : 0;
        }
        assert_true(used < len);
    }
    const size_t n = json_array_size(a);
    json_decref(a);
    free(text);
    return n;
}

/* The probes of candidate `cand` (params as JSON text, NULL: none) on `backend`, for the
 * plan of make_plan; c keeps the notes. */
static void probes(const char *cand, const char *params, bk_backend backend, int fake_cuda,
                   bk__verify_probes *c, char *out, size_t len)
{
    bk_plan p;
    json_t *pj = params ? json_loads(params, 0, NULL) : NULL;
    make_plan(&p);
    context(c, AR, cand, NULL, pj, backend);
    if (fake_cuda) /* the cpu catalog as a backend without a default base would be */
        c->fallback = NULL;
    shapes_of(&p, c, 1, out, len);
    json_decref(pj);
}

/* A real candidate: its domain's edges, one past each (routed to the incumbent): below the
 * smallest hidden 7, as 8 - 8 is no size. */
static void test_real_candidate_edges(void **state)
{
    (void)state;
    bk__verify_probes c;
    char got[512];
    probes("shm_oneshot_fused", NULL, BK_BACKEND_CPU, 0, &c, got, sizeof got);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 512x4096 513x4096 1x7 1x8 1x12 "
                             "1x16384 1x16392");
    assert_string_equal(c.notes, "");
}

/* An incumbent that cannot run on the lane (NCCL where the lane shares a GPU): the plan's
 * shapes and the probes it would serve are left out, each with a note; the rest stay. */
static void test_incumbent_blocked(void **state)
{
    (void)state;
    bk__verify_probes c;
    bk_plan p;
    char got[512];
    make_plan(&p);
    p.workload.shapes[1].tokens = 600; /* past shm_oneshot_fused's 512 */
    context(&c, AR, "shm_oneshot_fused", NULL, NULL, BK_BACKEND_CPU);
    c.inc_blocked = "cannot run here";
    assert_int_equal(shapes_of(&p, &c, 1, got, sizeof got), 6);
    assert_string_equal(got, "1x4096 7x4096 64x4096 512x4096 1x8 1x16384");
    assert_string_equal(c.notes,
        "shape tokens 600, hidden 4096 left out: outside the candidate's domain, so it would go "
        "to the incumbent shm_twopass, which cannot run here\n"
        "probe tokens 513, hidden 4096 left out: outside the candidate's domain, so it would go "
        "to the incumbent shm_twopass, which cannot run here\n"
        "probe tokens 1, hidden 7 left out: outside the candidate's domain, so it would go to "
        "the incumbent shm_twopass, which cannot run here\n"
        "probe tokens 1, hidden 12 left out: outside the candidate's domain, so it would go to "
        "the incumbent shm_twopass, which cannot run here\n"
        "probe tokens 1, hidden 16392 left out: outside the candidate's domain, so it would go "
        "to the incumbent shm_twopass, which cannot run here\n");
    /* a wrapper's table domain takes every shape: nothing of it goes to the incumbent */
    context(&c, AR, "lazy", NULL, NULL, BK_BACKEND_CPU);
    c.inc_blocked = "cannot run here";
    make_plan(&p);
    assert_int_equal(shapes_of(&p, &c, 1, got, sizeof got), 5);
    assert_string_equal(c.notes, "");
}

/* On cpu a wrapper's default base (shm_twopass) takes what its base does not, so it serves
 * every shape: the probes are those of the whole domain, none left out, as before. */
static void test_diagnostic_cpu_default_base(void **state)
{
    (void)state;
    bk__verify_probes c;
    char got[512];
    probes("lazy", "{\"base\":\"shm_oneshot_fused\"}", BK_BACKEND_CPU, 0, &c, got, sizeof got);
    assert_ptr_equal(c.base, bk_catalog_variant(AR, "shm_oneshot_fused"));
    assert_ptr_equal(c.fallback, bk_catalog_variant(AR, "shm_twopass"));
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 1x1");
    assert_string_equal(c.notes, "");
    probes("lazy", NULL, BK_BACKEND_CPU, 0, &c, got, sizeof got);
    assert_ptr_equal(c.base, bk_catalog_variant(AR, "shm_twopass"));
    assert_null(c.fallback);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 1x1");
    assert_string_equal(c.notes, "");
}

/* With no default base a wrapper serves its base's domain alone: the probes take its base's
 * edges, and those past them are left out, each with a note, not called to fail. */
static void test_diagnostic_no_default_base(void **state)
{
    (void)state;
    bk__verify_probes c;
    char got[512];
    probes("lazy", "{\"base\":\"shm_oneshot_fused\"}", BK_BACKEND_CPU, 1, &c, got, sizeof got);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 512x4096 1x8 1x16384");
    assert_non_null(strstr(c.notes, "probe tokens 513, hidden 4096 left out: outside the "
                                     "domain of candidate.params.base shm_oneshot_fused "
                                     "(tokens 513 > max 512), and lazy has no default base on "
                                     "cpu to call there instead, so its call would fail\n"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 12 left out: outside the domain "
                                     "of candidate.params.base shm_oneshot_fused"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 16392 left out: outside the "
                                     "domain of candidate.params.base shm_oneshot_fused"));
    if (!bk_test_cuda_half(AR, "ipc_oneshot_fused", __func__))
        return;
    probes("lazy", "{\"base\":\"ipc_oneshot_fused\"}", BK_BACKEND_CUDA, 0, &c, got, sizeof got);
    assert_null(c.fallback);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 128x4096 1x8 1x16384");
    assert_non_null(strstr(c.notes, "probe tokens 129, hidden 4096 left out: outside the "
                                     "domain of candidate.params.base ipc_oneshot_fused "
                                     "(tokens 129 > max 128), and lazy has no default base on "
                                     "cuda to call there instead, so its call would fail\n"));
    assert_null(strstr(c.notes, "hidden 1 "));
}

/* A probe outside the candidate's domain is routed to the incumbent; one outside the
 * incumbent's too could be served by nobody, so it is left out with a note. An A/A plan of
 * shm_oneshot_fused has both edges alike: the probes one past its edges (513 tokens, hidden
 * 12 and 16392) are left out. */
static void test_probes_outside_the_incumbent_too(void **state)
{
    (void)state;
    bk__verify_probes c;
    bk_plan p;
    char got[512];
    make_plan(&p);
    context(&c, AR, "shm_oneshot_fused", "shm_oneshot_fused", NULL, BK_BACKEND_CPU);
    shapes_of(&p, &c, 1, got, sizeof got);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 512x4096 1x8 1x16384");
    assert_non_null(strstr(c.notes, "probe tokens 513, hidden 4096 left out: outside the "
                                     "incumbent shm_oneshot_fused's domain too (tokens 513 > "
                                     "max 512)\n"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 12 left out: outside the incumbent "
                                     "shm_oneshot_fused's domain too (hidden 12 not a multiple "
                                     "of 8)\n"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 16392 left out: outside the "
                                     "incumbent shm_oneshot_fused's domain too (hidden 16392 > "
                                     "max 16384)\n"));
    if (!bk_test_cuda_half(AR, "ipc_oneshot_fused", __func__))
        return;
    /* on cuda nccl_then_rmsnorm takes any token count, but no hidden past 8..16384 */
    probes("ipc_oneshot_fused", NULL, BK_BACKEND_CUDA, 0, &c, got, sizeof got);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 128x4096 129x4096 1x8 1x16384");
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 12 left out: outside the incumbent "
                                     "nccl_then_rmsnorm's domain too (hidden 12 not a multiple "
                                     "of 8)\n"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 16392 left out: outside the "
                                     "incumbent nccl_then_rmsnorm's domain too (hidden 16392 > "
                                     "max 16384)\n"));
}

/* verify's list is a plan: BK_MAX_SHAPES shapes at most. A plan of BK_MAX_SHAPES - 2 shapes
 * takes the first two probes (1 and 7 tokens) and no more; each probe past the cap is left
 * out with a note. */
static void test_probes_stop_at_the_shape_cap(void **state)
{
    (void)state;
    bk__verify_probes c;
    static bk_plan p; /* large: off the stack */
    static char got[2048];
    memset(&p, 0, sizeof p);
    p.workload.nshapes = BK_MAX_SHAPES - 2;
    for (int i = 0; i < p.workload.nshapes; i++) /* tokens 100.., none a probe's */
        p.workload.shapes[i] = (bk_shape){ .tokens = 100 + i, .hidden = 4096, .weight = 1.0 };
    context(&c, AR, "shm_oneshot_fused", NULL, NULL, BK_BACKEND_CPU);
    assert_int_equal(shapes_of(&p, &c, 1, got, sizeof got), BK_MAX_SHAPES);
    const char *tail = got + strlen(got) - strlen(" 161x4096 1x4096 7x4096");
    assert_string_equal(tail, " 161x4096 1x4096 7x4096");
    assert_non_null(strstr(c.notes, "probe tokens 64, hidden 4096 left out: a plan holds 64 "
                                     "shapes at most\n"));
    assert_non_null(strstr(c.notes, "probe tokens 513, hidden 4096 left out: a plan holds 64 "
                                     "shapes at most\n"));
    assert_non_null(strstr(c.notes, "probe tokens 1, hidden 16392 left out: a plan holds 64 "
                                     "shapes at most\n"));
    assert_null(strstr(c.notes, "probe tokens 7,"));
}

/* A MoE plan's shapes that differ only in their expert count are two shapes: verify keeps
 * both (and still drops an exact repeat). */
static void test_moe_shapes_differ_in_experts(void **state)
{
    (void)state;
    bk__verify_probes c;
    bk_plan p;
    char got[512];
    memset(&p, 0, sizeof p);
    p.workload.nshapes = 3;
    p.workload.shapes[0] = (bk_shape){ .tokens = 16, .hidden = 4096, .weight = 0.5,
                                       .experts = 8, .topk = 2, .intermediate = 1024 };
    p.workload.shapes[1] = p.workload.shapes[0];
    p.workload.shapes[1].experts = 16;
    p.workload.shapes[2] = p.workload.shapes[0];
    context(&c, MOE, "moe_fused_combine", "moe_serial", NULL, BK_BACKEND_CPU);
    assert_int_equal(shapes_of(&p, &c, 0, got, sizeof got), 2);
    assert_string_equal(got, "16x4096/e8 16x4096/e16");
    assert_string_equal(c.notes, "");
}

/* `verify --target`'s plan for candidate `cand` on `backend` at a lane of `world`: it loads
 * and passes the catalog's check, its incumbent is the target's on that backend, its one
 * shape the target's example, its tolerance 1e-2; a --set applies to it. */
static void target_plan_is(const char *tg_name, const char *cand, bk_backend backend, int world)
{
    const bk_target *tg = bk_catalog_target(tg_name);
    char *text = bk__verify_target_plan(tg, cand, backend, world);
    assert_non_null(text);
    bk_plan p;
    bk_err err = { 0 };
    const char *sets[] = { "workload.seed=9" };
    if (bk_plan_parse(text, "--target", sets, 1, &p, &err) != BK_OK)
        fail_msg("%s: %s", text, err.msg);
    if (bk_catalog_check_plan(&p, backend, &err) != BK_OK)
        fail_msg("%s: %s", text, err.msg);
    assert_string_equal(p.target, tg_name);
    assert_string_equal(p.candidate.name, cand);
    assert_string_equal(p.incumbent.name, tg->incumbent[backend]);
    assert_int_equal(p.backend, backend);
    assert_int_equal(p.arena.tp * p.arena.ep, world);
    assert_int_equal(p.workload.nshapes, 1);
    assert_int_equal(p.workload.shapes[0].tokens, tg->example.tokens);
    assert_int_equal(p.workload.shapes[0].hidden, tg->example.hidden);
    assert_int_equal(p.workload.shapes[0].experts, tg->example.experts);
    assert_int_equal(p.workload.shapes[0].topk, tg->example.topk);
    assert_int_equal(p.workload.shapes[0].intermediate, tg->example.intermediate);
    assert_true(p.quality.rtol == 1e-2 && p.quality.atol == 1e-2);
    assert_int_equal(p.workload.seed, 9);
    bk_plan_free(&p);
    free(text);
}

static void test_target_plan(void **state)
{
    (void)state;
    target_plan_is(AR, "shm_oneshot_fused", BK_BACKEND_CPU, 2);
    target_plan_is(AR, "corrupt", BK_BACKEND_CPU, 4);
    target_plan_is(MOE, "moe_fused_combine", BK_BACKEND_CPU, 2);
    /* a name the catalog lacks still makes a plan: its check names the variant */
    const bk_target *tg = bk_catalog_target(AR);
    char *text = bk__verify_target_plan(tg, "nope", BK_BACKEND_CPU, 2);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_parse(text, "--target", NULL, 0, &p, &err), BK_OK);
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "candidate.variant: no variant 'nope'"));
    bk_plan_free(&p);
    free(text);
    if (!bk_test_cuda_half(AR, "ipc_twoshot_fused", __func__))
        return;
    target_plan_is(AR, "ipc_twoshot_fused", BK_BACKEND_CUDA, 2);
    target_plan_is(MOE, "moe_fused_combine_cuda", BK_BACKEND_CUDA, 8);
}

/* The lane verify --target defaults to: 2 where the domain takes it, else its smallest. */
static void test_target_default_world(void **state)
{
    (void)state;
    bk_variant v = { .name = "fake" };
    assert_int_equal(bk__verify_default_world(NULL), 2);
    assert_int_equal(bk__verify_default_world(&v), 2); /* worlds 0: any */
    v.domain.worlds = (1u << 1) | (1u << 2) | (1u << 4) | (1u << 8);
    assert_int_equal(bk__verify_default_world(&v), 2);
    v.domain.worlds = (1u << 4) | (1u << 8);
    assert_int_equal(bk__verify_default_world(&v), 4);
    v.domain.worlds = 1u << 1;
    assert_int_equal(bk__verify_default_world(&v), 1);
    assert_int_equal(bk__verify_default_world(bk_catalog_variant(AR, "shm_oneshot_fused")), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_candidate_edges),
        cmocka_unit_test(test_incumbent_blocked),
        cmocka_unit_test(test_diagnostic_cpu_default_base),
        cmocka_unit_test(test_diagnostic_no_default_base),
        cmocka_unit_test(test_probes_outside_the_incumbent_too),
        cmocka_unit_test(test_probes_stop_at_the_shape_cap),
        cmocka_unit_test(test_moe_shapes_differ_in_experts),
        cmocka_unit_test(test_target_plan),
        cmocka_unit_test(test_target_default_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
