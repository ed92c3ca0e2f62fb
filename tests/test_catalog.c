/* test_catalog.c - catalog lookups and iteration, capability domains with their reasons,
 * routing shares, what a plan's variants serve (the incumbent every shape, a diagnostic
 * wrapper its base's domain), and plan checks whose errors name the plan's dotted paths.
 * Plans are built by hand here, filling only the fields the catalog reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "kernels/catalog.h"
#include "tests/cuda_half.h"

#define AR "collective.allreduce_residual_rmsnorm"

/* ---- a hand-built plan ---- */

static json_t *g_params[2];

static void make_plan(bk_plan *p, const char *incumbent, const char *candidate)
{
    static const bk_shape shapes[] = {
        { .tokens = 1, .hidden = 4096, .weight = 0.5 },
        { .tokens = 1024, .hidden = 4096, .weight = 0.25 },
        { .tokens = 32, .hidden = 4096, .weight = 0.25 },
    };
    memset(p, 0, sizeof *p);
    bk_strlcpy(p->target, AR, sizeof p->target);
    bk_strlcpy(p->arena.dtype, "bf16", sizeof p->arena.dtype);
    p->arena.tp = 2;
    p->arena.ep = 1;
    bk_strlcpy(p->incumbent.name, incumbent, sizeof p->incumbent.name);
    bk_strlcpy(p->candidate.name, candidate, sizeof p->candidate.name);
    json_object_clear(g_params[0]);
    json_object_clear(g_params[1]);
    p->incumbent.params = g_params[0];
    p->candidate.params = g_params[1];
    p->workload.nshapes = 3;
    p->workload.iters = 300;
    memcpy(p->workload.shapes, shapes, sizeof shapes);
    p->backend = BK_BACKEND_CPU;
}

static void expect_error(const bk_plan *p, bk_backend b, bk_status code, const char *msg)
{
    bk_err err = { 0 };
    bk_status st = bk_catalog_check_plan(p, b, &err);
    if (st != code || strncmp(err.msg, msg, strlen(msg)) != 0)
        fail_msg("expected %d '%s...', got %d '%s'", code, msg, st, err.msg);
}

/* ---- lookups ---- */

static void test_lookups_and_iteration(void **state)
{
    (void)state;
    const bk_target *t = bk_catalog_target(AR);
    assert_non_null(t);
    assert_int_equal(t->ntensors, 5);
    assert_string_equal(t->tensor_names[3], "out");
    assert_null(bk_catalog_target("collective.nope"));
    assert_null(bk_catalog_target(NULL));
    assert_ptr_equal(bk_catalog_target_at(0), t);
    assert_null(bk_catalog_target_at(bk_catalog_ntargets()));

    const bk_variant *one = bk_catalog_variant(AR, "shm_oneshot_fused");
    assert_non_null(one);
    assert_string_equal(one->target, AR);
    assert_null(bk_catalog_variant(AR, "nope"));
    assert_null(bk_catalog_variant("collective.nope", "shm_twopass"));

    int n = bk_catalog_nvariants(), seen = 0, diag = 0;
    assert_true(n >= 5);
    assert_null(bk_catalog_variant_at(n));
    assert_null(bk_catalog_variant_at(-1));
    for (int i = 0; i < n; i++) {
        const bk_variant *v = bk_catalog_variant_at(i);
        assert_non_null(v);
        assert_non_null(bk_catalog_target(v->target));
        assert_ptr_equal(bk_catalog_variant(v->target, v->name), v); /* names unique */
        assert_non_null(v->create);
        assert_non_null(v->run);
        assert_non_null(v->destroy);
        if (v->diagnostic) {
            diag += strcmp(v->target, AR) == 0;
            assert_memory_equal(v->summary, "DIAGNOSTIC:", 11);
            /* slowed, crash, lazy and mutate wrap any base, on either backend; corrupt
             * writes into host memory, so it lists cpu only (plan variants must not offer
             * it on cuda) */
            assert_true(v->backends & BK_BK_CPU);
            assert_true(!!(v->backends & BK_BK_CUDA) == !!strcmp(v->name, "corrupt"));
        }
        seen += strcmp(v->name, "shm_twopass") == 0 || v == one;
    }
    assert_int_equal(seen, 2);
    assert_int_equal(diag, 5); /* slowed, crash, corrupt, lazy, mutate */
}

/* The cuda variants' names, known in every build (a cpu build names one as a cuda variant,
 * not as unknown): in a cuda build, exactly the catalog's variants that run on cuda alone. */
static void test_cuda_names(void **state)
{
    (void)state;
    assert_true(bk_catalog_cuda_name(AR, "nccl_then_rmsnorm"));
    assert_true(bk_catalog_cuda_name("moe.fused_experts_reduce", "moe_fused_combine_cuda"));
    assert_false(bk_catalog_cuda_name(AR, "shm_twopass"));
    assert_false(bk_catalog_cuda_name(AR, "slowed"));
    assert_false(bk_catalog_cuda_name("moe.fused_experts_reduce", "nccl_then_rmsnorm"));
    assert_false(bk_catalog_cuda_name(NULL, "nccl_then_rmsnorm"));
#ifdef BK_HAVE_CUDA
    int cuda_only = 0;
    for (int i = 0; i < bk_catalog_nvariants(); i++) {
        const bk_variant *v = bk_catalog_variant_at(i);
        const int only = (v->backends & BK_BK_CUDA) && !(v->backends & BK_BK_CPU) &&
                         !v->diagnostic;
        cuda_only += only;
        if (only != bk_catalog_cuda_name(v->target, v->name))
            fail_msg("%s / %s: runs on cuda alone: %d, in the cuda names: %d", v->target,
                     v->name, only, bk_catalog_cuda_name(v->target, v->name));
    }
    assert_int_equal(cuda_only, bk_catalog_ncuda_names());
#else
    assert_null(bk_catalog_variant(AR, "nccl_then_rmsnorm"));
#endif
}

/* ---- domains ---- */

static void expect_outside(const bk_domain *d, bk_shape s, int world, const char *dtype,
                           bk_backend b, int p2p, const char *why_want)
{
    char why[256] = "unset";
    assert_int_equal(bk_domain_contains(d, &s, world, dtype, b, p2p, why, sizeof why), 0);
    assert_string_equal(why, why_want);
}

static void test_domains_say_which_bound(void **state)
{
    (void)state;
    const bk_domain *one = &bk_catalog_variant(AR, "shm_oneshot_fused")->domain;
    const bk_domain *two = &bk_catalog_variant(AR, "shm_twopass")->domain;
    bk_shape ok = { .tokens = 512, .hidden = 4096 };
    char why[256];
    assert_int_equal(bk_domain_contains(one, &ok, 8, "bf16", BK_BACKEND_CPU, 0, why, sizeof why),
                     1);
    expect_outside(one, (bk_shape){ .tokens = 1024, .hidden = 4096 }, 2, "bf16", BK_BACKEND_CPU,
                   0, "tokens 1024 > max 512");
    expect_outside(one, (bk_shape){ .tokens = 0, .hidden = 4096 }, 2, "bf16", BK_BACKEND_CPU, 0,
                   "tokens 0 < min 1");
    expect_outside(one, (bk_shape){ .tokens = 1, .hidden = 100 }, 2, "bf16", BK_BACKEND_CPU, 0,
                   "hidden 100 not a multiple of 8");
    expect_outside(one, (bk_shape){ .tokens = 1, .hidden = 32768 }, 2, "bf16", BK_BACKEND_CPU, 0,
                   "hidden 32768 > max 16384");
    expect_outside(one, ok, 16, "bf16", BK_BACKEND_CPU, 0, "world 16 not in {1-8}");
    expect_outside(one, ok, 2, "fp16", BK_BACKEND_CPU, 0, "dtype fp16 not in {bf16}");
    expect_outside(one, ok, 2, "bf16", BK_BACKEND_CUDA, 0, "backend cuda not supported");
    /* the incumbent takes every bf16 shape and world on cpu */
    bk_shape big = { .tokens = 100000, .hidden = 12345 };
    assert_int_equal(bk_domain_contains(two, &big, 64, "bf16", BK_BACKEND_CPU, 0, why,
                                        sizeof why), 1);
    /* hand-made domains: p2p, world lists */
    bk_domain d = { .backends = BK_BK_CUDA, .dtypes = "fp16,bf16", .worlds = (1u << 2) | (1u << 4)
                    | (1u << 5) | (1u << 6), .min_tokens = 1, .min_hidden = 1, .needs_p2p = 1 };
    assert_int_equal(bk_domain_contains(&d, &ok, 4, "bf16", BK_BACKEND_CUDA, 1, why, sizeof why),
                     1);
    expect_outside(&d, ok, 4, "bf16", BK_BACKEND_CUDA, 0,
                   "needs peer-to-peer access, which the lane lacks");
    expect_outside(&d, ok, 3, "bf16", BK_BACKEND_CUDA, 1, "world 3 not in {2,4-6}");
    expect_outside(&d, ok, 4, "bf", BK_BACKEND_CUDA, 1, "dtype bf not in {fp16,bf16}");
}

/* ---- routing ---- */

/* A domain in words (bracket plan variants): every bound that is set, none that is not,
 * worlds as ranges; a short buffer is cut, never overrun, and stays terminated. */
static void test_domain_text(void **state)
{
    (void)state;
    char buf[256];
    const bk_domain full = { .backends = BK_BK_CPU | BK_BK_CUDA, .dtypes = "bf16,fp16",
                             .worlds = (1u << 1) | (1u << 2) | (1u << 4) | (1u << 8),
                             .min_tokens = 1, .max_tokens = 128, .min_hidden = 8,
                             .max_hidden = 16384, .hidden_multiple = 8, .needs_p2p = 1 };
    bk_domain_text(&full, buf, sizeof buf);
    assert_string_equal(buf, "cpu,cuda; bf16,fp16; tokens 1..128; hidden 8..16384, a multiple "
                             "of 8; worlds 1-2,4,8; peer access");
    const bk_domain open = { .backends = BK_BK_CUDA, .min_tokens = 1, .min_hidden = 1,
                             .hidden_multiple = 1 };
    bk_domain_text(&open, buf, sizeof buf);
    assert_string_equal(buf, "cuda; tokens >= 1; hidden >= 1");
    char small[12];
    memset(small, 'x', sizeof small);
    bk_domain_text(&full, small, 9);
    assert_string_equal(small, "cpu,cuda");
    assert_int_equal(small[9], 'x'); /* nothing written past the 9 bytes given */
    bk_domain_text(&full, small, 0); /* no room: no write */
    assert_int_equal(small[0], 'c');
}

static void test_routing_share(void **state)
{
    (void)state;
    bk_plan p;
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    /* 1x4096 (0.5) and 32x4096 (0.25) inside, 1024x4096 (0.25) outside */
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 0.75, 1e-12);
    p.workload.shapes[1].weight = 0.0;
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 1.0, 1e-12);
    p.arena.tp = 16; /* world outside 1..8 */
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 0.0, 1e-12);
    make_plan(&p, "shm_twopass", "shm_twopass");
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 1.0, 1e-12);
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CUDA, 1), 0.0, 1e-12);
    make_plan(&p, "shm_twopass", "nope");
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 0.0, 1e-12);
}

/* ---- plan checks ---- */

static void test_check_plan_ok(void **state)
{
    (void)state;
    bk_plan p;
    bk_err err = { 0 };
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    make_plan(&p, "shm_twopass", "slowed");
    json_object_set_new(p.candidate.params, "fraction", json_real(0.5));
    json_object_set_new(p.candidate.params, "base", json_string("shm_oneshot_fused"));
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
}

static void test_check_plan_errors_name_paths(void **state)
{
    (void)state;
    bk_plan p;
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    bk_strlcpy(p.target, "x", sizeof p.target);
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "target: unknown target 'x' (known: " AR);

    make_plan(&p, "shm_twopass", "x");
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.variant: no variant 'x' for target '" AR "' (known: shm_twopass, "
                 "shm_oneshot_fused, ");

    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
#ifdef BK_HAVE_CUDA
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_UNSUPPORTED,
                 "incumbent.variant: 'shm_twopass' does not support backend cuda");
#else /* a build without the backend says so first */
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_UNSUPPORTED,
                 "backend: cuda, but this bracket was built without its cuda backend");
    make_plan(&p, "shm_twopass", "nccl_then_rmsnorm");
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.variant: 'nccl_then_rmsnorm' is a cuda variant of target '" AR "', "
                 "and this bracket was built without its cuda backend (the variants it has: "
                 "shm_twopass, ");
#endif

    make_plan(&p, "shm_twopass", "slowed");
    json_object_set_new(p.candidate.params, "fraction", json_integer(11));
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.params.fraction: must be a number in [0, 10]");

#ifdef BK_HAVE_CUDA /* (without it, backend cuda is refused first: above) */
    make_plan(&p, "slowed", "corrupt");
    json_object_set_new(p.incumbent.params, "base", json_string("shm_twopass"));
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_UNSUPPORTED,
                 "incumbent.params.base: variant 'shm_twopass' does not support backend cuda");
    json_object_clear(p.incumbent.params);
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_INPUT,
                 "incumbent.params.base: required on backend cuda");
#endif

    make_plan(&p, "crash", "shm_oneshot_fused");
    json_object_set_new(p.incumbent.params, "at_iterr", json_integer(1));
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT, "incumbent.params.at_iterr: unknown parameter");

    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    json_object_set_new(p.candidate.params, "tokens", json_integer(1));
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.params.tokens: unknown parameter (shm_oneshot_fused takes no "
                 "parameters)");

    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    bk_strlcpy(p.arena.dtype, "fp8", sizeof p.arena.dtype);
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "arena.dtype: target '" AR "' does not take dtype 'fp8' (it takes: bf16)");

    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    p.workload.shapes[1].tokens = 0;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[1]: tokens and hidden must be >= 1 (got tokens 0, hidden 4096)");
    p.workload.shapes[1].tokens = 1ll << 40;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[1]: tokens x hidden must be at most 2^31 = 2147483648 "
                 "elements, got 1099511627776 x 4096 = 4.503599627e+15");
    /* a MoE size on this target: two shapes one for its kernels would count as two */
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    p.workload.shapes[2].experts = 8;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[2]: experts, topk and intermediate are sizes of MoE targets; "
                 "this one takes tokens and hidden alone (got experts 8, topk 0, intermediate 0)");
    p.workload.shapes[2].experts = 0;
    p.workload.shapes[2].intermediate = 1;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT, "workload.shapes[2]: experts, topk and ");
}

/* tokens x hidden past INT64_MAX is said as it is, not wrapped into 8 or a negative number */
static void test_size_limit_does_not_overflow(void **state)
{
    (void)state;
    bk_plan p;
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    p.workload.shapes[0].tokens = 4611686018427387905ll; /* 2^62 + 1: x 8 wraps to 8 */
    p.workload.shapes[0].hidden = 8;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[0]: tokens x hidden must be at most 2^31 = 2147483648 "
                 "elements, got 4611686018427387905 x 8 = 3.689348815e+19");
    p.workload.shapes[0].tokens = INT64_MAX;
    p.workload.shapes[0].hidden = 1024;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[0]: tokens x hidden must be at most 2^31 = 2147483648 "
                 "elements, got 9223372036854775807 x 1024 = 9.444732966e+21");
    p.workload.shapes[0].tokens = 1ll << 21; /* exactly 2^31 elements: allowed */
    p.workload.shapes[0].hidden = 1024;
    p.workload.shapes[1].tokens = 2; /* inside the candidate's domain */
    bk_err err = { 0 };
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
}

/* The incumbent is the serving stack: a shape or a lane size outside its domain is refused,
 * naming the shape (or the lane) and the edge it crosses. */
static void test_incumbent_serves_every_shape(void **state)
{
    (void)state;
    bk_plan p;
    bk_err err = { 0 };
    make_plan(&p, "shm_oneshot_fused", "shm_twopass"); /* shapes[1] has 1024 tokens */
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[1]: outside the domain of the incumbent shm_oneshot_fused "
                 "(tokens 1024 > max 512), got tokens 1024, hidden 4096; the incumbent is the "
                 "serving stack and must serve every call of the workload, so the plan is "
                 "refused");
    p.workload.shapes[1].tokens = 512;
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    p.workload.shapes[2].hidden = 4100;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "workload.shapes[2]: outside the domain of the incumbent shm_oneshot_fused "
                 "(hidden 4100 not a multiple of 8), got tokens 32, hidden 4100;");
    p.workload.shapes[2].hidden = 4096;
    p.arena.tp = 16; /* the lane, not the shapes, is outside: said so */
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "arena.tp x arena.ep: the lane size is outside the domain of the incumbent "
                 "shm_oneshot_fused (worlds 1-8), got 16 x 1 = 16; the incumbent is the serving "
                 "stack");
    p.arena.tp = 4;
    p.arena.ep = 4;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "arena.tp x arena.ep: the lane size is outside the domain of the incumbent "
                 "shm_oneshot_fused (worlds 1-8), got 4 x 4 = 16;");
    /* a wrapper as the incumbent serves what its base, or its default base, serves */
    make_plan(&p, "slowed", "shm_twopass");
    json_object_set_new(p.incumbent.params, "base", json_string("shm_oneshot_fused"));
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    /* a real candidate outside its domain is routed, not refused here */
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    p.arena.tp = 16;
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    if (!bk_test_cuda_half(AR, "nccl_then_rmsnorm", __func__))
        return;
    make_plan(&p, "nccl_then_rmsnorm", "ipc_oneshot_fused");
    p.workload.shapes[1].tokens = 64;
    p.workload.shapes[0].hidden = 16392;
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_INPUT,
                 "workload.shapes[0]: outside the domain of the incumbent nccl_then_rmsnorm "
                 "(hidden 16392 > max 16384), got tokens 1, hidden 16392;");
}

/* The lane in words, for `plan check` when the candidate serves nothing because of it. */
static void test_lane_outside(void **state)
{
    (void)state;
    bk_plan p;
    char why[512];
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    assert_int_equal(bk_catalog_lane_outside(&p, &p.candidate, BK_BACKEND_CPU, why, sizeof why),
                     0);
    assert_string_equal(why, "");
    p.arena.tp = 16;
    assert_int_equal(bk_catalog_lane_outside(&p, &p.candidate, BK_BACKEND_CPU, why, sizeof why),
                     1);
    assert_string_equal(why, "arena.tp x arena.ep: the lane size is outside the domain of the "
                             "candidate shm_oneshot_fused (worlds 1-8), got 16 x 1 = 16");
    assert_int_equal(bk_catalog_lane_outside(&p, &p.incumbent, BK_BACKEND_CPU, why, sizeof why),
                     0);
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 0.0, 1e-12);
}

/* crash's default at_iter (10) is checked as one written out: past the last timed iteration
 * nothing would crash, and the message says the value is the default. */
static void test_crash_default_at_iter(void **state)
{
    (void)state;
    bk_plan p;
    bk_err err = { 0 };
    make_plan(&p, "shm_twopass", "crash");
    p.workload.iters = 10;
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.params.at_iter: not given, and the default, 10, is past the last "
                 "timed iteration (workload.iters is 10: 0..9), so nothing would crash; set "
                 "candidate.params.at_iter to 0..9 or workload.iters above 10");
    p.workload.iters = 11;
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    json_object_set_new(p.candidate.params, "at_iter", json_integer(11));
    expect_error(&p, BK_BACKEND_CPU, BK_ERR_INPUT,
                 "candidate.params.at_iter: 11 is past the last timed iteration (workload.iters "
                 "is 11: 0..10), so nothing would crash");
    p.workload.iters = 5;
    json_object_set_new(p.candidate.params, "at_iter", json_integer(4));
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
}

/* A diagnostic wrapper serves its base's domain: on cpu where the base cannot, its default
 * base (shm_twopass) does, and that is said; on cuda, with no default base, a shape or lane
 * the base cannot serve would fail, so the plan is refused and the share leaves it out. */
static void test_diagnostic_follows_base(void **state)
{
    (void)state;
    bk_plan p;
    bk_err err = { 0 };
    char why[256], dom[512];
    make_plan(&p, "shm_twopass", "slowed");
    json_object_set_new(p.candidate.params, "base", json_string("shm_oneshot_fused"));
    assert_ptr_equal(bk_catalog_served_by(&p, &p.candidate, 0, BK_BACKEND_CPU, 1, why,
                                          sizeof why), bk_catalog_variant(AR, "shm_oneshot_fused"));
    assert_string_equal(why, "");
    assert_ptr_equal(bk_catalog_served_by(&p, &p.candidate, 1, BK_BACKEND_CPU, 1, why,
                                          sizeof why), bk_catalog_variant(AR, "shm_twopass"));
    assert_string_equal(why, "tokens 1024 > max 512");
    assert_null(bk_catalog_served_by(&p, &p.candidate, 3, BK_BACKEND_CPU, 1, why, sizeof why));
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 1.0, 1e-12);
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err), BK_OK);
    /* no base named: the default base's own domain, and no fallback */
    json_object_clear(p.candidate.params);
    assert_ptr_equal(bk_catalog_served_by(&p, &p.candidate, 1, BK_BACKEND_CPU, 1, why,
                                          sizeof why), bk_catalog_variant(AR, "shm_twopass"));
    assert_string_equal(why, "");
    bk_variant_domain_text(bk_catalog_variant(AR, "slowed"), dom, sizeof dom);
    assert_string_equal(dom, "its base's (params.base; on cpu default shm_twopass; on cuda "
                             "required); where a default base exists, a call outside a named "
                             "base's domain runs it, wrapped the same way");
    bk_variant_domain_text(bk_catalog_variant(AR, "shm_oneshot_fused"), dom, sizeof dom);
    assert_string_equal(dom, "cpu; bf16; tokens 1..512; hidden 8..16384, a multiple of 8; "
                             "worlds 1-8");
    if (!bk_test_cuda_half(AR, "ipc_oneshot_fused", __func__))
        return;
    make_plan(&p, "nccl_then_rmsnorm", "slowed");
    json_object_set_new(p.candidate.params, "base", json_string("ipc_oneshot_fused"));
    p.workload.shapes[1].tokens = 4096; /* > 128 */
    assert_null(bk_catalog_served_by(&p, &p.candidate, 1, BK_BACKEND_CUDA, 1, why, sizeof why));
    assert_string_equal(why, "tokens 4096 > max 128");
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CUDA, 1), 0.75, 1e-12);
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_INPUT,
                 "workload.shapes[1]: outside the domain of the candidate slowed's base "
                 "ipc_oneshot_fused (tokens 4096 > max 128), got tokens 4096, hidden 4096; "
                 "slowed wraps its base for every shape and has no default base on cuda to serve "
                 "it instead, so its calls would fail and the plan is refused (name a "
                 "candidate.params.base that serves every shape)");
    p.workload.shapes[1].tokens = 64;
    assert_int_equal(bk_catalog_check_plan(&p, BK_BACKEND_CUDA, &err), BK_OK);
    p.arena.tp = 3;
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CUDA, 1), 0.0, 1e-12);
    expect_error(&p, BK_BACKEND_CUDA, BK_ERR_INPUT,
                 "arena.tp x arena.ep: the lane size is outside the domain of the candidate "
                 "slowed's base ipc_oneshot_fused (worlds 1-2,4,8), got 3 x 1 = 3; slowed wraps");
}

/* A wrapper whose base's worlds leave the lane out still serves it where its default base
 * takes the lane: lane 16 is past shm_oneshot_fused's worlds (1-8) but shm_twopass (no world
 * bound) serves it, so the lane is not outside, every shape is served by shm_twopass (with
 * the base's bound as the reason) and the plan is valid, as candidate and as incumbent. */
static void test_diagnostic_lane_default_base(void **state)
{
    (void)state;
    bk_plan p;
    bk_err err = { 0 };
    char why[512];
    make_plan(&p, "shm_twopass", "lazy");
    json_object_set_new(p.candidate.params, "base", json_string("shm_oneshot_fused"));
    p.arena.tp = 16;
    assert_int_equal(bk_catalog_lane_outside(&p, &p.candidate, BK_BACKEND_CPU, why, sizeof why),
                     0);
    assert_string_equal(why, "");
    assert_ptr_equal(bk_catalog_served_by(&p, &p.candidate, 0, BK_BACKEND_CPU, 1, why,
                                          sizeof why), bk_catalog_variant(AR, "shm_twopass"));
    assert_string_equal(why, "world 16 not in {1-8}");
    assert_float_equal(bk_routing_share(&p, BK_BACKEND_CPU, 1), 1.0, 1e-12);
    if (bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err) != BK_OK)
        fail_msg("lazy on shm_oneshot_fused at lane 16 refused: %s", err.msg);
    make_plan(&p, "lazy", "shm_twopass");
    json_object_set_new(p.incumbent.params, "base", json_string("shm_oneshot_fused"));
    p.arena.tp = 16;
    assert_int_equal(bk_catalog_lane_outside(&p, &p.incumbent, BK_BACKEND_CPU, why, sizeof why),
                     0);
    if (bk_catalog_check_plan(&p, BK_BACKEND_CPU, &err) != BK_OK)
        fail_msg("incumbent lazy on shm_oneshot_fused at lane 16 refused: %s", err.msg);
}

/* A shape index past the plan's shapes names no shape: NULL and no reason, even where the
 * array holds a stale shape past workload.nshapes that the candidate would serve. */
static void test_served_by_past_the_shapes(void **state)
{
    (void)state;
    bk_plan p;
    char why[256] = "x";
    make_plan(&p, "shm_twopass", "shm_oneshot_fused");
    p.workload.shapes[3] = (bk_shape){ .tokens = 8, .hidden = 4096, .weight = 1.0 };
    assert_null(bk_catalog_served_by(&p, &p.candidate, 3, BK_BACKEND_CPU, 1, why, sizeof why));
    assert_string_equal(why, "");
    assert_null(bk_catalog_served_by(&p, &p.incumbent, 3, BK_BACKEND_CPU, 1, why, sizeof why));
    assert_null(bk_catalog_served_by(&p, &p.candidate, -1, BK_BACKEND_CPU, 1, why, sizeof why));
    p.workload.nshapes = 4; /* the same shape inside the plan is served */
    assert_ptr_equal(bk_catalog_served_by(&p, &p.candidate, 3, BK_BACKEND_CPU, 1, why,
                                          sizeof why), bk_catalog_variant(AR, "shm_oneshot_fused"));
}

int main(void)
{
    g_params[0] = json_object();
    g_params[1] = json_object();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups_and_iteration),
        cmocka_unit_test(test_cuda_names),
        cmocka_unit_test(test_domains_say_which_bound),
        cmocka_unit_test(test_domain_text),
        cmocka_unit_test(test_routing_share),
        cmocka_unit_test(test_check_plan_ok),
        cmocka_unit_test(test_check_plan_errors_name_paths),
        cmocka_unit_test(test_size_limit_does_not_overflow),
        cmocka_unit_test(test_incumbent_serves_every_shape),
        cmocka_unit_test(test_lane_outside),
        cmocka_unit_test(test_crash_default_at_iter),
        cmocka_unit_test(test_diagnostic_follows_base),
        cmocka_unit_test(test_diagnostic_lane_default_base),
        cmocka_unit_test(test_served_by_past_the_shapes),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(g_params[0]);
    json_decref(g_params[1]);
    return rc;
}
