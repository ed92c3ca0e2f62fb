/* test_moe_cuda_lanes.c - moe.fused_experts_reduce cuda variants on lanes of 2, 4 and 8
 * GPUs: one forked process per GPU, meeting through bk_cuda_comm (rendezvous blobs in a
 * shared mapping, tests/gpu/gpu_lane.h), the partials summed by NCCL. Every rank checks
 * its out against the float64 reference (the target's, with its rank and world), eager and
 * as a captured graph replayed twice, outputs poisoned first, inputs left alone; the
 * ranks' outputs are bitwise equal. A world the machine has too few GPUs for runs on GPU 0
 * with a host per rank (root only: NCCL over sockets, see run_lane), else
 * is skipped loudly ("SKIP: ..." and cmocka's SKIPPED); exit 77 without a usable GPU. World 1 and
 * the refusals: test_moe_cuda.c. */
#ifndef BK_HAVE_CUDA
#include <stdio.h>
int main(void)
{
    printf("test_moe_cuda_lanes: SKIP: built without the cuda backend\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collectives/cuda_try.h"
#include "gpu_lane.h"
#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"
#include "moe_gpu.h"

static uint64_t g_seed;
static int g_ngpu; /* GPUs the machine shows, counted before this process touched CUDA */

/* ---- lanes of 2, 4 and 8 GPUs: one forked process per GPU ----
 * The ranks never use cmocka (a failed assert would longjmp into the parent's copy of the
 * test runner); they return a status and leave their message in the lane's shm. */

#define LANE_TIMEOUT_S 60.0

static const bk_shape k_lane_shapes[] = {
    /* ranks whose experts get no rows at world 4 and 8 */
    { .tokens = 1, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 128 },
    /* E not a multiple of the world: empty slots */
    { .tokens = 5, .hidden = 136, .experts = 6, .topk = 3, .intermediate = 72 },
    { .tokens = 257, .hidden = 512, .experts = 16, .topk = 4, .intermediate = 128 },
    /* 2048 rows per expert: the chunked variant runs 4 chunks at world > 1 */
    { .tokens = 4096, .hidden = 256, .experts = 8, .topk = 4, .intermediate = 64 },
};
#define NLANE_SHAPES (int)(sizeof k_lane_shapes / sizeof k_lane_shapes[0])
#define LANE_CHECKS (NLANE_SHAPES * NVARIANTS * 2) /* eager, graph */

/* The world-1 bound plus the bf16 allreduce's roundings: up to world - 1 partial sums
 * over ranks rounded to bf16 (NCCL's ring), each by at most 2^-9 of a sum whose size is
 * about 1 + |ref| (the fused variants carry the residual, |r| < 1, in rank 0's partial);
 * 2^-8 a rounding leaves a factor 2 for partial sums above that. kernels/moe.c's bound. */
static double lane_tol(double ref, int world)
{
    return tol(ref) + (world - 1) * 0x1p-8 * (1.0 + fabs(ref));
}

/* One rank's tensors of one shape: seeded host inputs (its experts' weights) and device
 * copies on the rank's GPU. The caller frees with lane_set_free, also after a failure. */
static bk_status lane_set_make(dev_set *d, const bk_shape *s, uint64_t seed, int rank,
                               int world, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_target *tg = &bk__moe_target;
    memset(d, 0, sizeof *d);
    for (int i = 0; i < BK_MOE_NT; i++) {
        bk_tensor *h = &d->host[i];
        h->name = tg->tensor_names[i];
        h->output = tg->tensor_is_output[i];
        h->elems = tg->tensor_elems(s, world, i);
        h->elem_bytes = tg->tensor_elem_bytes(i);
        h->data = calloc(h->elems, h->elem_bytes);
        if (!h->data) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: out of host memory", rank);
            goto out;
        }
        d->dev[i] = *h;
        d->dev[i].data = NULL;
        BK_CUDA_TRY(cudaMalloc(&d->dev[i].data, h->elems * h->elem_bytes));
    }
    tg->init_inputs(d->host, s, seed, 0, rank, world);
    for (int i = 0; i < BK_MOE_NT; i++)
        BK_CUDA_TRY(cudaMemcpy(d->dev[i].data, d->host[i].data,
                           d->host[i].elems * d->host[i].elem_bytes, cudaMemcpyHostToDevice));
    /* legacy-stream uploads vs the lane's non-blocking stream */
    BK_CUDA_TRY(cudaDeviceSynchronize());
out:
    return st;
}

static void lane_set_free(dev_set *d)
{
    for (int i = 0; i < BK_MOE_NT; i++) {
        free(d->host[i].data);
        if (d->dev[i].data)
            (void)cudaFree(d->dev[i].data);
    }
}

/* One call (eager, or captured and replayed twice), outputs poisoned first, each result
 * waited for with a bound and checked: inputs unchanged, out within lane_tol of the
 * reference. *worst: the largest |out - ref|; *hash: out's digest. */
static bk_status lane_call(const bk_variant *v, void *state, bk_call *call, dev_set *d,
                           const double *ref, int graph, const char *what, cudaEvent_t ev,
                           double *worst, uint64_t *hash, bk_err *err)
{
    bk_status st = BK_OK;
    bk_cuda_comm *comm = call->comm;
    cudaStream_t stream = call->stream;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    bk_tensor *o = &d->dev[BK_MOE_OUT];
    void *now = NULL;
    *worst = 0.0;
    if (graph) {
        BK_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        bk_status rs = v->run(state, call, err);
        cudaError_t ce = cudaStreamEndCapture(stream, &g);
        if (rs != BK_OK) {
            st = rs;
            goto out;
        }
        BK_CUDA_TRY(ce);
        BK_CUDA_TRY(cudaGraphInstantiate(&ex, g, 0));
    }
    for (int rep = 0; rep < (graph ? 2 : 1); rep++) {
        BK_CUDA_TRY(cudaMemsetAsync(o->data, 0xFF, o->elems * 2, stream));
        if (graph)
            BK_CUDA_TRY(cudaGraphLaunch(ex, stream));
        else
            BK_TRY(v->run(state, call, err));
        BK_CUDA_TRY(cudaEventRecord(ev, stream));
        BK_TRY(bk_cuda_comm_wait(comm, ev, 3 * LANE_TIMEOUT_S + 1, err));
        for (int i = 0; i < BK_MOE_NT; i++) {
            size_t b = d->host[i].elems * d->host[i].elem_bytes;
            free(now);
            now = malloc(b);
            if (!now) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of host memory", what);
                goto out;
            }
            BK_CUDA_TRY(cudaMemcpy(now, d->dev[i].data, b, cudaMemcpyDeviceToHost));
            if (!d->host[i].output && memcmp(now, d->host[i].data, b) != 0) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: input %s was modified", what,
                             d->host[i].name);
                goto out;
            }
            if (d->host[i].output)
                memcpy(d->host[i].data, now, b);
        }
        const uint16_t *out = d->host[BK_MOE_OUT].data;
        for (size_t i = 0; i < d->host[BK_MOE_OUT].elems; i++) {
            double got = bk_bf16_to_f32(out[i]), bound = lane_tol(ref[i], call->world);
            if (bk_bf16_is_nan(out[i]) || !(fabs(got - ref[i]) <= bound)) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: out[%zu] = %g, reference %.9g, bound "
                             "%.3g (seed %llu)", what, i, got, ref[i], bound,
                             (unsigned long long)g_seed);
                goto out;
            }
            *worst = fmax(*worst, fabs(got - ref[i]));
        }
        *hash = lane_hash(out, d->host[BK_MOE_OUT].elems * 2);
    }
out:
    free(now);
    if (ex)
        (void)cudaGraphExecDestroy(ex);
    if (g)
        (void)cudaGraphDestroy(g);
    return st;
}

/* Every variant on one shape: eager (which also sets the variant up for the shape, as the
 * engine's warm-up does), then graph. Results go to the shm rows from *check on. */
static bk_status lane_shape(int rank, int world, lane_shm *shm, const bk_shape *s,
                            uint64_t seed, bk_cuda_comm *comm, cudaStream_t stream,
                            cudaEvent_t ev, int *check, bk_err *err)
{
    bk_status st = BK_OK;
    dev_set d;
    double *ref = NULL;
    void *state = NULL;
    const bk_variant *v = NULL;
    json_t *params = json_object();
    char what[192];
    BK_TRY(lane_set_make(&d, s, seed, rank, world, err));
    BK_TRY(bk__moe_target.reference(s, seed, 0, rank, world, &ref, err));
    for (int vi = 0; vi < NVARIANTS; vi++) {
        v = bk_catalog_variant(BK_MOE_TARGET, k_variants[vi]);
        if (!v) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "no variant %s", k_variants[vi]);
            goto out;
        }
        BK_TRY(v->create(params, BK_BACKEND_CUDA, rank, world, &state, err));
        bk_call call = { .shape = s, .iter = -1, .rank = rank, .world = world, .t = d.dev,
                         .nt = BK_MOE_NT, .comm = comm, .stream = stream,
                         .timeout_s = LANE_TIMEOUT_S };
        for (int graph = 0; graph <= 1; graph++) {
            double worst = 0.0;
            uint64_t h = 0;
            snprintf(what, sizeof what, "rank %d of %d: %s %s T %lld H %lld E %lld K %lld "
                     "I %lld", rank, world, v->name, graph ? "graph" : "eager",
                     (long long)s->tokens, (long long)s->hidden, (long long)s->experts,
                     (long long)s->topk, (long long)s->intermediate);
            BK_TRY(lane_call(v, state, &call, &d, ref, graph, what, ev, &worst, &h, err));
            shm->hash[*check][rank] = h;
            shm->us[*check][rank] = worst; /* the lane's per-row doubles: errors here */
            (*check)++;
        }
        v->destroy(state);
        state = NULL;
    }
out:
    if (state)
        v->destroy(state);
    free(ref);
    lane_set_free(&d);
    json_decref(params);
    return st;
}

/* One rank of a lane: its own GPU (device = rank), the lane's communicator with NCCL,
 * then every shape. */
static int moe_lane_rank(int rank, int world, lane_shm *shm, void *arg)
{
    const uint64_t seed = *(const uint64_t *)arg;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    cudaStream_t stream = NULL;
    cudaEvent_t ev = NULL;
    int check = 0;
    bk_err_clear(err);
    /* the cuda variants use no peer memory: the communicator's flag page is enough; ranks
     * on hosts of their own (g_lane_hosts) all use GPU 0 */
    BK_TRY(lane_comm_up(shm, rank, world, g_lane_hosts ? 0 : rank, 0, LANE_TIMEOUT_S, &comm,
                        err));
    if (!comm->nccl) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "no NCCL on a lane of one GPU per rank: %s",
                     comm->nccl_why);
        goto out;
    }
    BK_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BK_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    for (int i = 0; i < NLANE_SHAPES; i++)
        BK_TRY(lane_shape(rank, world, shm, &k_lane_shapes[i], seed + (uint64_t)i, comm, stream,
                          ev, &check, err));
    shm->nhash = check;
out:
    lane_wait_done(shm, rank, 3 * LANE_TIMEOUT_S);
    if (ev)
        (void)cudaEventDestroy(ev);
    if (stream)
        (void)cudaStreamDestroy(stream);
    bk_cuda_comm_destroy(comm);
    if (st != BK_OK)
        snprintf(shm->msg[rank], sizeof shm->msg[rank], "rank %d: %s [%s]", rank, err->msg,
                 err->trail);
    return st == BK_OK ? 0 : 1;
}

/* Below `world` GPUs, the world runs on GPU 0 with every rank on a host of its own
 * (gpu_lane.h, g_lane_hosts: NCCL over sockets between UTS namespaces; root only): the
 * same checks, no measure of speed (worlds 2 and 4 took 10 s together on the H200). */
#define LANE_HOSTS_MAX_WORLD 8

static void run_lane(int world)
{
    char why[256] = "";
    g_lane_hosts = 0;
    if (g_ngpu < world) {
        if (world > LANE_HOSTS_MAX_WORLD || !lane_hosts_probe(why, sizeof why)) {
            printf("test_moe_cuda_lanes: SKIP: world %d needs %d GPUs (one process per GPU: "
                   "NCCL refuses two ranks on one GPU; this machine shows %d)%s%s\n", world,
                   world, g_ngpu, why[0] ? ", or a host per rank on one GPU: " : "", why);
            skip();
        }
        printf("test_moe_cuda_lanes: world %d on GPU 0 of %d, each rank on a host of its own "
               "(NCCL over sockets on lo)\n", world, g_ngpu);
        setenv("NCCL_SOCKET_IFNAME", "lo", 0);
        setenv("NCCL_IB_DISABLE", "1", 0);
        g_lane_hosts = 1;
    }
    uint64_t seed = g_seed + 1000u * (uint64_t)world;
    lane_shm *shm = lane_map();
    assert_non_null(shm);
    int failed = lane_run(shm, world, moe_lane_rank, &seed, 300);
    g_lane_hosts = 0;
    for (int r = 0; r < world; r++)
        if (shm->msg[r][0])
            print_message("%s\n", shm->msg[r]);
    assert_int_equal(failed, 0);
    assert_int_equal(shm->nhash, LANE_CHECKS);
    int c = 0;
    for (int i = 0; i < NLANE_SHAPES; i++)
        for (int v = 0; v < NVARIANTS; v++)
            for (int graph = 0; graph <= 1; graph++, c++) {
                const bk_shape *s = &k_lane_shapes[i];
                double worst = 0.0;
                for (int r = 0; r < world; r++) {
                    worst = fmax(worst, shm->us[c][r]);
                    if (shm->hash[c][r] != shm->hash[c][0])
                        fail_msg("world %d %s %s T %lld: rank %d's out differs bitwise from "
                                 "rank 0's", world, k_variants[v], graph ? "graph" : "eager",
                                 (long long)s->tokens, r);
                }
                printf("  world %d %s %s T %lld H %lld E %lld K %lld I %lld: max |out - ref| "
                       "%.3g over the ranks\n", world, k_variants[v], graph ? "graph" : "eager",
                       (long long)s->tokens, (long long)s->hidden, (long long)s->experts,
                       (long long)s->topk, (long long)s->intermediate, worst);
            }
    munmap(shm, sizeof *shm);
}

static void test_lane_world2(void **st)
{
    (void)st;
    run_lane(2);
}

static void test_lane_world4(void **st)
{
    (void)st;
    run_lane(4);
}

static void test_lane_world8(void **st)
{
    (void)st;
    run_lane(8);
}

/* GPUs the machine shows, counted in a throw-away child so that this process has not
 * touched CUDA when it forks the lanes' ranks (a child forked after CUDA is initialised
 * cannot use it). 0, with `why`, when none is usable. */
static int gpu_count(char *why, size_t len)
{
    int fd[2], n = 0, status = 0;
    char buf[256] = "";
    if (pipe(fd) != 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return 0;
    }
    if (pid == 0) {
        int c = 0;
        cudaError_t e = cudaGetDeviceCount(&c);
        close(fd[0]);
        snprintf(buf, sizeof buf, "%d %s", e == cudaSuccess ? c : 0,
                 e != cudaSuccess ? cudaGetErrorString(e) : c ? "OK" : "device count is 0");
        ssize_t w = write(fd[1], buf, strlen(buf) + 1);
        _exit(w > 0 ? 0 : 1);
    }
    close(fd[1]);
    ssize_t r = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    (void)waitpid(pid, &status, 0);
    if (r <= 0 || sscanf(buf, "%d", &n) != 1) {
        snprintf(why, len, "the probe process failed (status %d)", status);
        return 0;
    }
    const char *msg = strchr(buf, ' ');
    snprintf(why, len, "%s", msg ? msg + 1 : "");
    return n;
}

int main(void)
{
    char why[256];
    g_ngpu = gpu_count(why, sizeof why);
    if (g_ngpu < 1) {
        printf("test_moe_cuda_lanes: SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    const char *env = getenv("BK_TEST_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test_moe_cuda_lanes: seed %llu (BK_TEST_SEED to repeat), %d GPU(s)\n",
           (unsigned long long)g_seed, g_ngpu);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    /* This process never touches CUDA: the ranks are forked children. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lane_world2),
        cmocka_unit_test(test_lane_world4),
        cmocka_unit_test(test_lane_world8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* BK_HAVE_CUDA */
