/* test_moe_cuda.c - moe.fused_experts_reduce cuda variants on one GPU (world 1): every
 * variant against the float64 reference on fresh random seeds, eager and as a captured
 * CUDA graph replayed twice, outputs poisoned first, inputs left alone, and the variants
 * within the bound of each other. Also: the domain holds worlds 1, 2, 4 and 8, and a
 * world-2 call on a lane without NCCL is refused naming why. Worlds 2, 4 and 8 on several
 * GPUs: test_moe_cuda_lanes.c. Exit 77 (skipped) without a usable GPU. */
#ifndef BK_HAVE_CUDA
#include <stdio.h>
int main(void)
{
    printf("test_moe_cuda: SKIP: built without the cuda backend\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/cuda_ipc.h"
#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"
#include "moe_gpu.h"
#include "test_filter.h"

static uint64_t g_seed;
static cudaStream_t g_stream;

#define CK(call) assert_int_equal((int)(call), (int)cudaSuccess)

static const bk_shape k_shapes[] = {
    { .tokens = 1, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 128 },
    { .tokens = 5, .hidden = 136, .experts = 6, .topk = 3, .intermediate = 72 },
    { .tokens = 33, .hidden = 512, .experts = 16, .topk = 4, .intermediate = 256 },
    { .tokens = 64, .hidden = 1024, .experts = 32, .topk = 8, .intermediate = 192 },
    { .tokens = 257, .hidden = 512, .experts = 16, .topk = 4, .intermediate = 128 },
};
#define NSHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

static void set_make(dev_set *d, const bk_shape *s, uint64_t seed)
{
    const bk_target *tg = &bk__moe_target;
    memset(d, 0, sizeof *d);
    for (int i = 0; i < BK_MOE_NT; i++) {
        bk_tensor *h = &d->host[i];
        h->name = tg->tensor_names[i];
        h->output = tg->tensor_is_output[i];
        h->elems = tg->tensor_elems(s, 1, i);
        h->elem_bytes = tg->tensor_elem_bytes(i);
        h->data = calloc(h->elems, h->elem_bytes);
        assert_non_null(h->data);
        d->dev[i] = *h;
        CK(cudaMalloc(&d->dev[i].data, h->elems * h->elem_bytes));
    }
    tg->init_inputs(d->host, s, seed, 0, 0, 1);
    for (int i = 0; i < BK_MOE_NT; i++)
        CK(cudaMemcpy(d->dev[i].data, d->host[i].data, d->host[i].elems * d->host[i].elem_bytes,
                      cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize()); /* legacy-stream uploads vs g_stream (non-blocking) */
}

static void set_free(dev_set *d)
{
    for (int i = 0; i < BK_MOE_NT; i++) {
        free(d->host[i].data);
        (void)cudaFree(d->dev[i].data);
    }
}

static void poison_out(dev_set *d)
{
    bk_tensor *o = &d->dev[BK_MOE_OUT];
    CK(cudaMemsetAsync(o->data, 0xFF, o->elems * 2, g_stream));
}

/* Out against the reference; inputs unchanged; returns the largest error. */
static double check_out(dev_set *d, const double *ref, const char *what)
{
    for (int i = 0; i < BK_MOE_NT; i++) {
        size_t b = d->host[i].elems * d->host[i].elem_bytes;
        void *now = malloc(b);
        assert_non_null(now);
        CK(cudaMemcpy(now, d->dev[i].data, b, cudaMemcpyDeviceToHost));
        if (!d->host[i].output && memcmp(now, d->host[i].data, b) != 0)
            fail_msg("%s: input %s was modified", what, d->host[i].name);
        if (d->host[i].output)
            memcpy(d->host[i].data, now, b);
        free(now);
    }
    const uint16_t *o = d->host[BK_MOE_OUT].data;
    double worst = 0.0;
    for (size_t i = 0; i < d->host[BK_MOE_OUT].elems; i++) {
        double got = bk_bf16_to_f32(o[i]);
        if (bk_bf16_is_nan(o[i]) || !(fabs(got - ref[i]) <= tol(ref[i])))
            fail_msg("%s: out[%zu] = %g, reference %.9g (seed %llu)", what, i, got, ref[i],
                     (unsigned long long)g_seed);
        worst = fmax(worst, fabs(got - ref[i]));
    }
    return worst;
}

static void run_variant(const char *name, const bk_shape *s, uint64_t seed, int graph)
{
    const bk_variant *v = bk_catalog_variant(BK_MOE_TARGET, name);
    bk_err err = { 0 };
    void *state = NULL;
    double *ref = NULL;
    dev_set d;
    char what[160];
    json_t *params = json_object();
    assert_non_null(v);
    set_make(&d, s, seed);
    assert_int_equal(bk__moe_target.reference(s, seed, 0, 0, 1, &ref, &err), BK_OK);
    assert_int_equal(v->create(params, BK_BACKEND_CUDA, 0, 1, &state, &err), BK_OK);
    bk_call call = { .shape = s, .iter = -1, .rank = 0, .world = 1, .t = d.dev,
                     .nt = BK_MOE_NT, .stream = g_stream, .timeout_s = 10.0 };
    snprintf(what, sizeof what, "%s %s T %lld H %lld E %lld K %lld I %lld", name,
             graph ? "graph" : "eager", (long long)s->tokens, (long long)s->hidden,
             (long long)s->experts, (long long)s->topk, (long long)s->intermediate);
    poison_out(&d);
    if (!graph) {
        if (v->run(state, &call, &err) != BK_OK)
            fail_msg("%s: %s", what, err.msg);
        CK(cudaStreamSynchronize(g_stream));
    } else {
        /* the engine's warm-up: an eager call on another set (other routing) first */
        dev_set warm;
        set_make(&warm, s, seed ^ 0x5bd1e995u);
        bk_call wc = call;
        wc.t = warm.dev;
        if (v->run(state, &wc, &err) != BK_OK)
            fail_msg("%s: warm-up: %s", what, err.msg);
        CK(cudaStreamSynchronize(g_stream));
        set_free(&warm);
        cudaGraph_t g = NULL;
        cudaGraphExec_t ex = NULL;
        CK(cudaStreamSynchronize(g_stream));
        CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
        bk_status st = v->run(state, &call, &err);
        CK(cudaStreamEndCapture(g_stream, &g));
        if (st != BK_OK)
            fail_msg("%s: capture: %s", what, err.msg);
        CK(cudaGraphInstantiate(&ex, g, 0));
        for (int rep = 0; rep < 2; rep++) {
            poison_out(&d);
            CK(cudaGraphLaunch(ex, g_stream));
            CK(cudaStreamSynchronize(g_stream));
            check_out(&d, ref, what);
        }
        (void)cudaGraphExecDestroy(ex);
        (void)cudaGraphDestroy(g);
    }
    double worst = check_out(&d, ref, what);
    printf("  %s: max |out - ref| %.3g\n", what, worst);
    v->destroy(state);
    free(ref);
    set_free(&d);
    json_decref(params);
}

static void test_eager(void **st)
{
    (void)st;
    for (int v = 0; v < NVARIANTS; v++)
        for (int i = 0; i < NSHAPES; i++)
            run_variant(k_variants[v], &k_shapes[i], g_seed + (uint64_t)i, 0);
}

static void test_graph(void **st)
{
    (void)st;
    for (int v = 0; v < NVARIANTS; v++)
        for (int i = 0; i < NSHAPES; i++)
            run_variant(k_variants[v], &k_shapes[i], g_seed + 100 + (uint64_t)i, 1);
}

/* A capture with no eager call before it is refused with a clear message. */
static void test_capture_first_refused(void **st)
{
    (void)st;
    const bk_variant *v = bk_catalog_variant(BK_MOE_TARGET, "moe_serial_cuda");
    bk_err err = { 0 };
    void *state = NULL;
    dev_set d;
    cudaGraph_t g = NULL;
    json_t *params = json_object();
    set_make(&d, &k_shapes[0], g_seed);
    assert_int_equal(v->create(params, BK_BACKEND_CUDA, 0, 1, &state, &err), BK_OK);
    bk_call call = { .shape = &k_shapes[0], .iter = -1, .rank = 0, .world = 1, .t = d.dev,
                     .nt = BK_MOE_NT, .stream = g_stream, .timeout_s = 10.0 };
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    bk_status rs = v->run(state, &call, &err);
    (void)cudaStreamEndCapture(g_stream, &g);
    if (g)
        (void)cudaGraphDestroy(g);
    assert_int_equal(rs, BK_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "warm up first"));
    v->destroy(state);
    set_free(&d);
    json_decref(params);
}

/* The domain holds worlds 1, 2, 4 and 8 and nothing else, for every variant. */
static void test_domain_worlds(void **st)
{
    (void)st;
    char why[128];
    for (int v = 0; v < NVARIANTS; v++) {
        const bk_variant *var = bk_catalog_variant(BK_MOE_TARGET, k_variants[v]);
        bk_shape big = k_shapes[0];
        big.tokens = 4096; /* inside the chunked variant's token bound */
        assert_non_null(var);
        for (int w = 1; w <= 16; w++) {
            int want = w == 1 || w == 2 || w == 4 || w == 8;
            int got = bk_domain_contains(&var->domain, &big, w, "bf16", BK_BACKEND_CUDA, 0, why,
                                         sizeof why);
            if (got != want)
                fail_msg("%s: world %d %s the domain (%s)", var->name, w,
                         got ? "inside" : "outside", why);
            if (!got)
                assert_non_null(strstr(why, "world"));
        }
    }
}

/* A world-2 call on a lane whose communicator has no NCCL (ranks sharing one GPU) fails
 * BK_ERR_UNSUPPORTED naming the communicator's reason, before touching any tensor; a
 * world-3 call is refused with the routing hint. No GPU work: the tensors are host
 * memory of the right sizes, never read. */
static void test_world2_without_nccl(void **st)
{
    (void)st;
    const bk_target *tg = &bk__moe_target;
    const bk_shape *s = &k_shapes[0];
    bk_cuda_comm comm;
    memset(&comm, 0, sizeof comm);
    snprintf(comm.nccl_why, sizeof comm.nccl_why, "ranks 0 and 1 share GPU test-bus (NCCL "
             "needs one GPU per rank)");
    for (int v = 0; v < NVARIANTS; v++) {
        const bk_variant *var = bk_catalog_variant(BK_MOE_TARGET, k_variants[v]);
        json_t *params = json_object();
        assert_non_null(var);
        for (int w = 2; w <= 3; w++) {
            bk_err err = { 0 };
            void *state = NULL;
            bk_tensor t[BK_MOE_NT];
            for (int i = 0; i < BK_MOE_NT; i++) {
                t[i] = (bk_tensor){ .name = tg->tensor_names[i],
                                    .output = tg->tensor_is_output[i],
                                    .elems = tg->tensor_elems(s, w, i),
                                    .elem_bytes = tg->tensor_elem_bytes(i) };
                t[i].data = calloc(t[i].elems, t[i].elem_bytes);
                assert_non_null(t[i].data);
            }
            comm.rank = 0;
            comm.world = w;
            assert_int_equal(var->create(params, BK_BACKEND_CUDA, 0, w, &state, &err), BK_OK);
            bk_call call = { .shape = s, .iter = -1, .rank = 0, .world = w, .t = t,
                             .nt = BK_MOE_NT, .comm = &comm, .stream = g_stream,
                             .timeout_s = 10.0 };
            assert_int_equal(var->run(state, &call, &err), BK_ERR_UNSUPPORTED);
            if (w == 2 && !strstr(err.msg, "share GPU test-bus"))
                fail_msg("%s: world 2 without NCCL: the message does not say why: %s",
                         var->name, err.msg);
            if (w == 3 && !strstr(err.msg, "route it to the incumbent"))
                fail_msg("%s: world 3: %s", var->name, err.msg);
            var->destroy(state);
            for (int i = 0; i < BK_MOE_NT; i++)
                free(t[i].data);
        }
        json_decref(params);
    }
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("test_moe_cuda: SKIP: no usable CUDA device\n");
        return 77;
    }
    const char *env = getenv("BK_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test_moe_cuda: seed %llu (BK_TEST_SEED to repeat)\n", (unsigned long long)g_seed);
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    bk_test_filter("test_moe_cuda"); /* e.g. test_graph alone under racecheck */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager),
        cmocka_unit_test(test_graph),
        cmocka_unit_test(test_domain_worlds),
        cmocka_unit_test(test_world2_without_nccl),
        cmocka_unit_test(test_capture_first_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* BK_HAVE_CUDA */
