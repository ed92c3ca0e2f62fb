/* test_verify_probes.c - the shapes `bracket verify` checks: a real candidate's domain edges
 * and one past each; a diagnostic wrapper's probes follow what it serves (its base's domain,
 * widened by the default base), and where there is no default base (cuda, or a fake one
 * here) a probe past its base's edges is left out with a note instead of failing the call.
 * Needs no GPU: the builder only reads the catalog's domains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog.h"
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

/* The probes of candidate `cand` (params as JSON text, NULL: none) on `backend`, as
 * "tokens x hidden" words in the builder's order; c keeps the notes. */
static void probes(const char *cand, const char *params, bk_backend backend, int fake_cuda,
                   bk__verify_probes *c, char *out, size_t len)
{
    bk_plan p;
    json_t *pj = params ? json_loads(params, 0, NULL) : NULL;
    make_plan(&p);
    memset(c, 0, sizeof *c);
    c->tg = bk_catalog_target(AR);
    c->v = bk_catalog_variant(AR, cand);
    c->inc = bk_catalog_variant(AR, backend == BK_BACKEND_CPU ? "shm_twopass"
                                                              : "nccl_then_rmsnorm");
    c->world = 2;
    c->dtype = "bf16";
    c->backend = backend;
    assert_non_null(c->v);
    bk_catalog_diag_bases(c->v, pj, backend, &c->base, &c->fallback);
    if (fake_cuda) /* the cpu catalog as a backend without a default base would be */
        c->fallback = NULL;
    char *text = bk__verify_shapes_json(&p, c, 1);
    json_t *a = json_loads(text, 0, NULL);
    size_t i, used = 0;
    json_t *j;
    out[0] = '\0';
    json_array_foreach(a, i, j)
    {
        int k = snprintf(out + used, len - used, "%s%lldx%lld", i ? " " : "",
                         (long long)json_integer_value(json_object_get(j, "tokens")),
                         (long long)json_integer_value(json_object_get(j, "hidden")));
        used += k > 0 ? (size_t)k : 0;
    }
    json_decref(a);
    json_decref(pj);
    free(text);
}

/* A real candidate: its domain's edges, one past each (routed to the incumbent). */
static void test_real_candidate_edges(void **state)
{
    (void)state;
    bk__verify_probes c;
    char got[512];
    probes("shm_oneshot_fused", NULL, BK_BACKEND_CPU, 0, &c, got, sizeof got);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 512x4096 513x4096 1x8 1x12 "
                             "1x16384 1x16392");
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
    if (!bk_catalog_variant(AR, "ipc_oneshot_fused"))
        return; /* a build without CUDA */
    probes("lazy", "{\"base\":\"ipc_oneshot_fused\"}", BK_BACKEND_CUDA, 0, &c, got, sizeof got);
    assert_null(c.fallback);
    assert_string_equal(got, "1x4096 32x4096 7x4096 64x4096 128x4096 1x8 1x16384");
    assert_non_null(strstr(c.notes, "probe tokens 129, hidden 4096 left out: outside the "
                                     "domain of candidate.params.base ipc_oneshot_fused "
                                     "(tokens 129 > max 128), and lazy has no default base on "
                                     "cuda to call there instead, so its call would fail\n"));
    assert_null(strstr(c.notes, "hidden 1 "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_candidate_edges),
        cmocka_unit_test(test_diagnostic_cpu_default_base),
        cmocka_unit_test(test_diagnostic_no_default_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
