/* test_engine_cuda.c - the engine's cuda backend table on real GPUs: open, peer memory
 * through comm_create/comm_connect, time_shape in graph and eager mode (samples for every
 * iteration, across batch boundaries), audit_shape outputs against the float64 reference. */

#ifndef BK_HAVE_CUDA
/* Built without the CUDA toolkit: nothing to run. */
#include <stdio.h>

int main(void)
{
    printf("SKIP: no CUDA device: this build has no CUDA (BK_CUDA=OFF or no toolkit)\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <hwloc.h>
#include <hwloc/cudart.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lane_call.h"
#include "runner/engine.h"

#define TIMEOUT_S 20.0
#define ITERS 70 /* more than one host batch of timed iterations */

/* A stand-in for the catalog's target (owned elsewhere): same tensors, same math. */
static size_t tt_elems(const bk_shape *s, int world, int idx)
{
    (void)world;
    return idx == 2 ? (size_t)s->hidden : (size_t)(s->tokens * s->hidden);
}

static size_t tt_elem_bytes(int idx)
{
    (void)idx;
    return 2;
}

static void tt_init(bk_tensor *t, const bk_shape *s, uint64_t seed, int shape_index, int rank,
                    int world)
{
    (void)shape_index;
    (void)world;
    lane_fill(t[0].data, t[0].elems, seed, 0, rank);
    lane_fill(t[1].data, t[1].elems, seed, 1, 0);
    lane_fill(t[2].data, (size_t)s->hidden, seed, 2, 0);
}

static const bk_target k_target = {
    .name = "collective.allreduce_residual_rmsnorm",
    .ntensors = 5,
    .tensor_names = {"x", "residual", "gamma", "residual_out", "out"},
    .tensor_is_output = {0, 0, 0, 1, 1},
    .tensor_elems = tt_elems,
    .tensor_elem_bytes = tt_elem_bytes,
    .init_inputs = tt_init,
};

typedef struct emit_log {
    uint64_t next; /* next iteration expected */
    int bad;       /* a zero time or a gap */
} emit_log;

static bk_status collect(void *user, uint32_t shape, uint64_t first, const uint64_t *ns,
                         size_t n, bk_err *err)
{
    emit_log *log = user;
    (void)err;
    (void)shape;
    if (first != log->next)
        log->bad = 1;
    for (size_t i = 0; i < n; i++)
        if (ns[i] == 0 || ns[i] > 1000000000ull)
            log->bad = 1;
    log->next = first + n;
    return BK_OK;
}

typedef struct engine_arg {
    const bk_variant *variant;
    bk_shape shape;
    double rtol, atol;
    const char *settings; /* the engine's describe() must contain this (NULL: the defaults) */
} engine_arg;

/* What the engine's describe() says with no BK_CUDA_* variable set. */
#define DEFAULT_SETTINGS                                                                  \
    "gate=1 warmup_s=0.5 sets_max=1024 spread=1 flush=0 fresh_graphs=1 settle=32 pdl=1"

/* The engine's CPU binding (BK_CUDA_PIN): by default "pin=near:<cpus>" in its settings,
 * and this process bound to those CPUs, all near its device (the GPU's local_cpus as hwloc
 * reads them); with BK_CUDA_PIN=0, "pin=off". */
static bk_status check_pin(const char *settings, int device, bk_err *err)
{
    const char *env = getenv("BK_CUDA_PIN");
    if (env && !strcmp(env, "0"))
        return strstr(settings, " pin=off") ? BK_OK
                                             : BK_FAIL(err, BK_ERR_INTERNAL, "BK_CUDA_PIN=0 "
                                                       "but settings \"%s\"", settings);
    const char *near = strstr(settings, " pin=near:");
    if (!near)
        return BK_FAIL(err, BK_ERR_INTERNAL, "engine not bound near its GPU: \"%s\"", settings);
    bk_status st = BK_OK;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "hwloc_topology_init failed");
    hwloc_bitmap_t gpu = hwloc_bitmap_alloc(), bound = hwloc_bitmap_alloc(),
                   said = hwloc_bitmap_alloc();
    char list[300];
    size_t n = strcspn(near + 10, " ");
    snprintf(list, sizeof list, "%.*s", (int)n, near + 10);
    const int count_only = n > 4 && !strcmp(list + n - 4, "cpus"); /* "near:<n>cpus" */
    if (hwloc_topology_load(t) != 0 || !gpu || !bound || !said ||
        hwloc_cudart_get_device_cpuset(t, device, gpu) != 0 ||
        hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) != 0 ||
        (!count_only && hwloc_bitmap_list_sscanf(said, list) != 0))
        st = BK_FAIL(err, BK_ERR_SYSTEM, "hwloc: cannot read the binding or the GPU's CPUs");
    else if (count_only && hwloc_bitmap_weight(bound) != atoi(list))
        st = BK_FAIL(err, BK_ERR_INTERNAL, "engine says pin=near:%s; bound to %d CPUs", list,
                     hwloc_bitmap_weight(bound));
    else if (count_only && !hwloc_bitmap_isincluded(bound, gpu))
        st = BK_FAIL(err, BK_ERR_INTERNAL, "engine bound outside its GPU's CPUs");
    else if (!count_only &&
             (!hwloc_bitmap_isequal(bound, said) || !hwloc_bitmap_isincluded(bound, gpu)))
        st = BK_FAIL(err, BK_ERR_INTERNAL, "engine says pin=near:%s; bound to a set %s, "
                     "within the GPU's CPUs: %s", list,
                     hwloc_bitmap_isequal(bound, said) ? "equal to it" : "not equal to it",
                     hwloc_bitmap_isincluded(bound, gpu) ? "yes" : "no");
    hwloc_bitmap_free(gpu);
    hwloc_bitmap_free(bound);
    hwloc_bitmap_free(said);
    hwloc_topology_destroy(t);
    return st;
}

static int engine_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const engine_arg *a = argp;
    const bk_engine_backend *be = &bk_engine_cuda;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_backend_ctx *ctx = NULL;
    void *vstate = NULL;
    json_t *params = json_object();
    unsigned char blob[BK_BLOB_MAX];
    size_t len = 0;
    const void *ptrs[LANE_MAX];
    void *outs[2] = {NULL, NULL};
    size_t bytes[2];
    uint64_t t_first = 0;
    emit_log log = {0, 0};
    const size_t n = (size_t)(a->shape.tokens * a->shape.hidden);
    double *ref_ro = malloc(n * sizeof(double)), *ref_out = malloc(n * sizeof(double));
    bk_err_clear(err);
    BK_TRY(be->open(&ctx, rank, world, lane_device(rank), err));
    char settings[512];
    be->describe(ctx, settings, sizeof settings);
    if (!strstr(settings, a->settings ? a->settings : DEFAULT_SETTINGS)) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "engine settings \"%s\", want \"%s\" in them",
                     settings, a->settings ? a->settings : DEFAULT_SETTINGS);
        goto out;
    }
    BK_TRY(check_pin(settings, lane_device(rank), err));
    BK_TRY(be->comm_create(ctx, "test", "C",
                           bk_ar_rmsnorm_cuda_peer_bytes(a->shape.tokens, a->shape.hidden), blob,
                           &len, err));
    BK_TRY(lane_exchange(shm, rank, blob, len, ptrs, TIMEOUT_S, err));
    BK_TRY(be->comm_connect(ctx, shm->blobs, shm->lens, TIMEOUT_S, err));
    BK_TRY(a->variant->create(params, BK_BACKEND_CUDA, rank, world, &vstate, err));
    bk_shape_job job = {.target = &k_target, .variant = a->variant, .vstate = vstate,
                        .shape = &a->shape, .shape_index = 0, .seed = 42, .rank = rank,
                        .world = world, .warmup = 3, .iters = ITERS, .graph = 1,
                        .timeout_s = TIMEOUT_S, .emit = collect, .emit_user = &log,
                        .t_first_ns = &t_first};
    for (int graph = 1; graph >= 0; graph--) {
        job.graph = graph;
        log.next = 0;
        BK_TRY(be->time_shape(ctx, &job, err));
        if (log.bad || log.next != ITERS || t_first == 0) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "samples (graph %d): bad=%d, iterations %llu, "
                         "t_first %llu", graph, log.bad, (unsigned long long)log.next,
                         (unsigned long long)t_first);
            goto out;
        }
    }
    BK_TRY(be->audit_shape(ctx, &job, outs, bytes, err));
    lane_reference(42, world, a->shape.tokens, a->shape.hidden, ref_ro, ref_out);
    for (int k = 0; k < 2; k++) {
        double worst = bytes[k] == n * 2 ? lane_err(outs[k], k ? ref_out : ref_ro, n, a->rtol,
                                                    a->atol)
                                         : INFINITY;
        if (worst > 1.0) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: audit output %d off the reference (%.3g "
                         "of tolerance, %zu bytes)", a->variant->name, k, worst, bytes[k]);
            goto out;
        }
    }
    shm->hash[0][rank] = lane_hash(outs[1], bytes[1]);
    shm->nhash = 1;
out:
    lane_wait_done(shm, rank, 3 * TIMEOUT_S);
    if (vstate)
        a->variant->destroy(vstate);
    if (ctx)
        be->close(ctx);
    json_decref(params);
    free(outs[0]);
    free(outs[1]);
    free(ref_ro);
    free(ref_out);
    if (st != BK_OK)
        snprintf(shm->msg[rank], sizeof(shm->msg[rank]), "rank %d: %s [%s]", rank, err->msg,
                 err->trail);
    return st == BK_OK ? 0 : 1;
}

/* Runs a lane of `world` engine processes with the engine settings in `env` (pairs of name
 * and value, NULL-terminated; NULL for none) set in this process for the lane's children,
 * and unset again before anything is asserted, so a failing test leaves none behind. */
static void run_engine_env(int world, engine_arg *a, const char *const *env)
{
    lane_shm *shm = lane_map();
    assert_non_null(shm);
    for (int i = 0; env && env[i]; i += 2)
        setenv(env[i], env[i + 1], 1);
    int failed = lane_run(shm, world, engine_rank, a, 240);
    for (int i = 0; env && env[i]; i += 2)
        unsetenv(env[i]);
    for (int r = 0; r < world; r++)
        if (shm->msg[r][0])
            print_message("%s\n", shm->msg[r]);
    assert_int_equal(failed, 0);
    for (int r = 1; r < world; r++)
        assert_true(shm->hash[0][r] == shm->hash[0][0]);
    munmap(shm, sizeof(*shm));
}

static void run_engine(int world, engine_arg *a)
{
    run_engine_env(world, a, NULL);
}

/* Two ranks of the IPC one-shot, 8 x 6144, graph then eager mode, under the engine settings env
 * (run_engine_env); the settings the engines report must hold `settings`. */
static void oneshot_env_world2(const char *settings, const char *const *env)
{
    engine_arg a = {.variant = &bk_variant_ipc_oneshot_fused,
                    .shape = {.tokens = 8, .hidden = 6144, .weight = 1},
                    .rtol = 8e-3, .atol = 1e-3, .settings = settings};
    run_engine_env(2, &a, env);
}

static void test_engine_oneshot_world2(void **state)
{
    (void)state;
    engine_arg a = {.variant = &bk_variant_ipc_oneshot_fused,
                    .shape = {.tokens = 16, .hidden = 4096, .weight = 1},
                    .rtol = 8e-3, .atol = 1e-3};
    run_engine(2, &a);
}

static void test_engine_twoshot_world4(void **state)
{
    (void)state;
    engine_arg a = {.variant = &bk_variant_ipc_twoshot_fused,
                    .shape = {.tokens = 33, .hidden = 2048, .weight = 1},
                    .rtol = 8e-3, .atol = 1e-3};
    run_engine(4, &a);
}

static void test_engine_nccl_world1(void **state)
{
    (void)state;
    engine_arg a = {.variant = &bk_variant_nccl_then_rmsnorm,
                    .shape = {.tokens = 64, .hidden = 7168, .weight = 1},
                    .rtol = 2e-2, .atol = 2e-2};
    run_engine(1, &a);
}

/* The engine's own settings are checked when it opens: a bad value is refused naming the
 * variable, before any shape runs; good values are taken and show in its settings. In a
 * child process: the parent must not create a CUDA context before the lane tests fork
 * theirs. */
static void test_engine_env_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"BK_CUDA_SETS", "1"},      {"BK_CUDA_SETS", "1025"}, {"BK_CUDA_SETS", "8x"},
        {"BK_CUDA_SPREAD", "2"},    {"BK_CUDA_SPREAD", ""},   {"BK_CUDA_WARMUP_S", "-1"},
        {"BK_CUDA_WARMUP_S", "61"}, {"BK_CUDA_FLUSH", "2"},   {"BK_CUDA_FLUSH", "yes"},
        {"BK_CUDA_FRESH_GRAPHS", "on"}, {"BK_CUDA_SETTLE", "-1"}, {"BK_CUDA_SETTLE", "257"},
        {"BK_CUDA_SETTLE", "8 "},   {"BK_CUDA_SETTLE", ""},     {"BK_CUDA_PDL", "2"},
        {"BK_CUDA_PDL", "off"},     {"BK_CUDA_PIN", "no"},    {"BK_CUDA_GATE", "off"},
        {"BK_CUDA_WARMUP_S", ""},
    };
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int failed = 0;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            bk_backend_ctx *ctx = NULL;
            bk_err err;
            bk_err_clear(&err);
            setenv(bad[i][0], bad[i][1], 1);
            bk_status st = bk_engine_cuda.open(&ctx, 0, 1, 0, &err);
            unsetenv(bad[i][0]);
            if (st != BK_ERR_INPUT || !strstr(err.msg, bad[i][0])) {
                printf("%s=\"%s\": status %d, \"%s\"\n", bad[i][0], bad[i][1], (int)st,
                       err.msg);
                failed = 1;
            }
            if (ctx)
                bk_engine_cuda.close(ctx);
        }
        bk_backend_ctx *ctx = NULL;
        bk_err err;
        char got[512] = "";
        bk_err_clear(&err);
        setenv("BK_CUDA_SETTLE", "0", 1);
        setenv("BK_CUDA_GATE", "0", 1);
        bk_status st = bk_engine_cuda.open(&ctx, 0, 1, 0, &err);
        unsetenv("BK_CUDA_SETTLE");
        unsetenv("BK_CUDA_GATE");
        if (st == BK_OK)
            bk_engine_cuda.describe(ctx, got, sizeof got);
        if (st != BK_OK || !strstr(got, "gate=0 ") || !strstr(got, " settle=0") ||
            !strstr(got, " pdl=1") || !strstr(got, " NCCL_NVLS_ENABLE=0")) {
            printf("BK_CUDA_SETTLE=0 BK_CUDA_GATE=0: status %d, \"%s\", settings \"%s\"\n",
                   (int)st, err.msg, got);
            failed = 1;
        }
        if (ctx)
            bk_engine_cuda.close(ctx);
        fflush(stdout);
        _exit(failed);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The other tests run the default layout (up to 1024 sets, each in 2 MiB pages of its own;
 * their shapes want hundreds, so the 1 GiB pool limit and the repeated contents are
 * exercised there). This one runs the earlier layout (8 sets, in shared pages) with L2
 * written over before every timed step: every sample, the same outputs, and the engines'
 * settings say so (the variables reached them). */
static void test_engine_packed_sets_flushed(void **state)
{
    (void)state;
    static const char *const env[] = {"BK_CUDA_SETS", "8", "BK_CUDA_SPREAD", "0",
                                      "BK_CUDA_FLUSH", "1", NULL};
    oneshot_env_world2("sets_max=8 spread=0 flush=1", env);
}

/* The other tests launch the IPC kernels and the norm with programmatic dependent launch
 * (the default); this one, two ranks of the IPC one-shot in graph mode, without it
 * (BK_CUDA_PDL=0), and without binding to the CPUs near the GPU (BK_CUDA_PIN=0): every
 * sample, the audit within tolerance, and the settings say pdl=0 pin=off. */
static void test_engine_no_pdl_world2(void **state)
{
    (void)state;
    static const char *const env[] = {"BK_CUDA_PDL", "0", "BK_CUDA_PIN", "0", NULL};
    oneshot_env_world2("pdl=0 pin=off", env);
}

/* The other graph-mode tests run the default: 32 untimed settle batches of 64 steps, then
 * the timed ones, the graphs of every batch after the first captured anew (so their barrier
 * flags and NCCL's work are recaptured each time, the same number of steps on every rank).
 * This one replays the first graphs throughout (BK_CUDA_FRESH_GRAPHS=0), two ranks of the
 * IPC one-shot: every sample, and the audit's outputs within tolerance of the reference. */
static void test_engine_same_graphs_world2(void **state)
{
    (void)state;
    static const char *const env[] = {"BK_CUDA_FRESH_GRAPHS", "0", NULL};
    oneshot_env_world2("fresh_graphs=0", env);
}

int main(void)
{
    char why[256];
    if (!lane_probe(why, sizeof(why))) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_nccl_world1),
        cmocka_unit_test(test_engine_oneshot_world2),
        cmocka_unit_test(test_engine_twoshot_world4),
        cmocka_unit_test(test_engine_packed_sets_flushed),
        cmocka_unit_test(test_engine_same_graphs_world2),
        cmocka_unit_test(test_engine_no_pdl_world2),
        cmocka_unit_test(test_engine_env_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif /* BK_HAVE_CUDA */
