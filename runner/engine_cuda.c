/* engine_cuda.c - the engine's cuda backend: one GPU per engine, the lane's CUDA IPC + NCCL
 * communicator, timed shapes with CUDA events (graph replay when asked), eager audits. */
#ifdef BK_HAVE_CUDA

#include <cuda_runtime.h>
#include <errno.h>
#include <hwloc.h>
#include <hwloc/cudart.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/cuda_gate.h"
#include "collectives/cuda_ipc.h"
#include "kernels/cuda_variants.h"
#include "runner/engine.h"
#include "runner/engine_cuda_priv.h"

#define BK_CUDA_MIN_WARMUP_S 0.5

#define BK_TIME_BATCH 64     /* timed iterations between host waits */
/* Graph mode with fresh graphs: untimed batches per shape before its timed ones
 * (BK_CUDA_SETTLE), each recaptured like a timed batch. Measured on the H200 (docs/
 * BENCHMARKS.md, A/A drift, tenth session): the incumbent's 1-token step ran 0.1-0.2 us
 * slower for the first ~150 ms of its timed batches (not the warm-up, not its memcpy node:
 * only with graphs captured anew); 32 batches (about 150 ms there) took that phase out of
 * the samples. Count-based so that every rank of a lane runs the same number of steps. */
#define BK_DEF_SETTLE 32
#define BK_MAX_SETTLE 256
/* Graph mode: each batch waits behind a host-released gate until all of it is
 * enqueued, so its steps run back to back and the events time the GPU alone,
 * whatever the host's launch rate. It was added as the suspected cause of the
 * 0.6-2% A/A drift on the H200; measured, it was not (docs/BENCHMARKS.md: same
 * medians, same drift), and it stays because it takes the host out of the
 * timing by construction. The bound only matters when the host stalls: then
 * the batch runs as it is enqueued. */
#define BK_GATE_BOUND_S 1.0
/* Rotated input sets. Each shape gets enough sets that their inputs exceed three L2s, up to
 * BK_MAX_SETS, each set in 2 MiB pages of its own: many placements in memory, so that
 * each engine's median averages over them. Measured on the H200 (docs/BENCHMARKS.md, A/A
 * drift, fourth session): with 8 sets in shared pages, each set's step cost was steady
 * within a process and differed between sets and processes by up to 5%, and A/A brackets
 * drifted 0.4-3.7% (mean |drift| 1.8%, 11 brackets); with these defaults 0.0-1.6% (mean
 * 0.5%, 15 brackets), at the same engine start-up time. BK_CUDA_SETS and BK_CUDA_SPREAD
 * change them (8 and 0: the earlier layout). */
#define BK_DEF_SETS 1024     /* rotated input sets at most, by default (BK_CUDA_SETS) */
#define BK_MAX_SETS 1024
#define BK_DATA_SETS 8       /* distinct seeded contents; set i holds content i mod 8 */
#define BK_POOL_MAX ((size_t)1 << 30) /* sets past BK_DATA_SETS stop at this many bytes */
#define BK_PAGE (2u << 20)   /* spread: every set starts a 2 MiB page of its own */

static void cuda_close(bk_backend_ctx *ctx);

/* A 0/1 setting from the environment: *v stays as it is when the variable is unset; any
 * other value is refused, naming it. */
static bk_status env_flag(const char *name, int rank, int *v, bk_err *err)
{
    const char *s = getenv(name);
    if (!s)
        return BK_OK;
    if (strcmp(s, "0") && strcmp(s, "1"))
        return BK_FAIL(err, BK_ERR_INPUT, "rank %d: %s=%s: want 0 or 1", rank, name, s);
    *v = s[0] == '1';
    return BK_OK;
}

/* A whole number lo..hi from the environment: *v stays as it is when the variable is unset;
 * anything else (empty, trailing characters, out of range) is refused, naming it. */
static bk_status env_count(const char *name, int rank, int lo, int hi, const char *what, int *v,
                           bk_err *err)
{
    const char *s = getenv(name);
    if (!s)
        return BK_OK;
    char *end = NULL;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < lo || x > hi)
        return BK_FAIL(err, BK_ERR_INPUT, "rank %d: %s=%s: want %s in %d..%d", rank, name, s,
                       what, lo, hi);
    *v = (int)x;
    return BK_OK;
}

/* Pin this engine to the CPUs near its GPU (the GPU's PCI local_cpus, within the CPUs this
 * process may use), whatever binding its rank got from the launcher: Open MPI binds by
 * package, round robin, from 3 ranks on, which can put a rank on the far package of its
 * GPU, and the lanes' equivalence (topology/) counts each GPU's NUMA node as its engine's.
 * So both lanes' host work (eager launches, host waits) runs at the same distance from its
 * GPU. Best effort: any failure leaves the inherited binding (a line on stderr when the
 * bind itself failed). on = 0 (BK_CUDA_PIN=0) keeps the launcher's binding. */
static void pin_near_gpu(int device, int rank, int on, char *pin, size_t len)
{
    snprintf(pin, len, "%s", on ? "inherited" : "off");
    if (!on)
        return;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0)
        return;
    hwloc_bitmap_t near = NULL, use = NULL;
    if (hwloc_topology_load(t) != 0 || !(near = hwloc_bitmap_alloc()) ||
        !(use = hwloc_bitmap_alloc()) || hwloc_cudart_get_device_cpuset(t, device, near) != 0)
        goto out;
    hwloc_bitmap_and(use, near, hwloc_topology_get_allowed_cpuset(t));
    char list[256];
    /* a list too long for the settings (a scattered cgroup): its count instead */
    if (hwloc_bitmap_list_snprintf(list, sizeof list, use) >= (int)sizeof list)
        snprintf(list, sizeof list, "%dcpus", hwloc_bitmap_weight(use));
    if (hwloc_bitmap_iszero(use))
        goto out;
    if (hwloc_set_cpubind(t, use, HWLOC_CPUBIND_PROCESS) == 0)
        snprintf(pin, len, "near:%s", list);
    else
        fprintf(stderr, "rank %d: note: could not bind to the CPUs near GPU %d (%s): %s; the "
                "launcher's binding stays\n", rank, device, list, strerror(errno));
out:
    hwloc_bitmap_free(use);
    hwloc_bitmap_free(near);
    hwloc_topology_destroy(t);
}

static bk_status cuda_open(bk_backend_ctx **out, int rank, int world, int device, bk_err *err)
{
    bk_status st = BK_OK;
    int n = 0, flush = 0;
    bk_backend_ctx *ctx = calloc(1, sizeof(*ctx));
    *out = NULL;
    if (!ctx)
        return BK_FAIL(err, BK_ERR_SYSTEM, "cuda engine: out of memory");
    ctx->rank = rank;
    ctx->world = world;
    ctx->device = device;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "rank %d: no CUDA device: %s", rank,
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        goto out;
    }
    if (device < 0 || device >= n) {
        st = BK_FAIL(err, BK_ERR_INPUT, "rank %d: GPU ordinal %d, this process sees %d GPUs",
                     rank, device, n);
        goto out;
    }
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    BK_TRY(bk_cuda_gate_init(&ctx->gate, err));
    ctx->gated = 1;
    BK_TRY(env_flag("BK_CUDA_GATE", rank, &ctx->gated, err));
    ctx->warm_s = BK_CUDA_MIN_WARMUP_S;
    if (getenv("BK_CUDA_WARMUP_S")) {
        const char *s = getenv("BK_CUDA_WARMUP_S");
        char *end = NULL;
        double w = strtod(s, &end);
        if (end == s || *end || !(w >= 0 && w <= 60)) {
            st = BK_FAIL(err, BK_ERR_INPUT, "rank %d: BK_CUDA_WARMUP_S=%s: want seconds in "
                         "0..60", rank, getenv("BK_CUDA_WARMUP_S"));
            goto out;
        }
        ctx->warm_s = w;
    }
    ctx->max_sets = BK_DEF_SETS;
    ctx->spread = 1;
    ctx->fresh_graphs = 1;
    ctx->settle = BK_DEF_SETTLE;
    BK_TRY(env_count("BK_CUDA_SETS", rank, 2, BK_MAX_SETS, "a count", &ctx->max_sets, err));
    BK_TRY(env_count("BK_CUDA_SETTLE", rank, 0, BK_MAX_SETTLE, "a count of batches",
                     &ctx->settle, err));
    BK_TRY(env_flag("BK_CUDA_SPREAD", rank, &ctx->spread, err));
    BK_TRY(env_flag("BK_CUDA_FLUSH", rank, &flush, err));
    BK_TRY(env_flag("BK_CUDA_FRESH_GRAPHS", rank, &ctx->fresh_graphs, err));
    int pin = 1;
    BK_TRY(env_flag("BK_CUDA_PIN", rank, &pin, err));
    pin_near_gpu(device, rank, pin, ctx->pin, sizeof ctx->pin);
    int pdl = 1;
    BK_TRY(env_flag("BK_CUDA_PDL", rank, &pdl, err));
    bk_cuda_pdl_set(pdl); /* the process's kernels: this engine's alone */
    if (flush) {
        int l2 = 0;
        CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
        ctx->flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
        CUDA_TRY(cudaMalloc(&ctx->flush, ctx->flush_bytes));
    }
    *out = ctx;
    ctx = NULL;
out:
    cuda_close(ctx); /* a half-opened one: what it holds so far */
    return st;
}

static bk_status cuda_comm_create(bk_backend_ctx *ctx, const char *run_id, const char *arm,
                                  size_t peer_bytes, void *blob, size_t *blob_len, bk_err *err)
{
    (void)run_id;
    (void)arm;
    *blob_len = BK_BLOB_MAX;
    return bk_cuda_comm_create(ctx->rank, ctx->world, ctx->device,
                               peer_bytes, blob, blob_len, &ctx->comm,
                               err);
}

static bk_status cuda_comm_connect(bk_backend_ctx *ctx, unsigned char (*blobs)[BK_BLOB_MAX],
                                   const size_t *lens, double timeout_s, bk_err *err)
{
    const void *ptrs[BK_COMM_MAX_WORLD];
    if (!ctx->comm)
        return BK_FAIL(err, BK_ERR_INTERNAL, "cuda engine: connect before comm_create");
    if (ctx->world > BK_COMM_MAX_WORLD)
        return BK_FAIL(err, BK_ERR_INTERNAL, "cuda engine: a lane of %d ranks (at most %d)",
                       ctx->world, BK_COMM_MAX_WORLD);
    for (int r = 0; r < ctx->world; r++)
        ptrs[r] = blobs[r];
    bk_status st = bk_cuda_comm_connect(ctx->comm, ptrs, lens, timeout_s, err);
    if (st != BK_OK)
        return st;
    /* The gate holds the stream while the host enqueues a batch; the lane barrier before
     * each step is then an eager NCCL allreduce (no peer memory: a lane over hosts, or
     * GPUs without P2P), whose enqueue can wait for the GPU (NCCL's network proxy), so
     * every batch would wait out the gate's bound. Seen on the H200 with a lane over two
     * (UTS namespace) hosts: 33 batches of 1 s an arm. No gate there. */
    if (ctx->world > 1 && !ctx->comm->have_p2p)
        ctx->gated = 0;
    return BK_OK;
}

/* The rotated input sets of one shape, in one device allocation: each set's tensors
 * together (256-byte aligned), a set every `stride` bytes; with spread, every set starts
 * a 2 MiB page of its own, so that each set gets a placement of its own. */
typedef struct shape_sets {
    void *pool;
    int n;
    int planned; /* n before the halvings for room: the same on every rank of the lane */
    shape_set *s;
} shape_sets;

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* The sets' graph execs alone (one still running is freed when it completes) */
static void sets_free_graphs(shape_sets *ss)
{
    for (int i = 0; ss->s && i < ss->n; i++)
        if (ss->s[i].exec) {
            (void)cudaGraphExecDestroy(ss->s[i].exec);
            ss->s[i].exec = NULL;
        }
}

static void sets_free(shape_sets *ss)
{
    sets_free_graphs(ss);
    if (ss->pool)
        (void)cudaFree(ss->pool);
    free(ss->s);
    memset(ss, 0, sizeof(*ss));
}

/* Allocate and fill up to `want` sets (fewer past BK_DATA_SETS where the pool would pass
 * BK_POOL_MAX, and half as many again while the GPU has no room for the pool, down to
 * one): inputs from the target's seeded init, with at most BK_DATA_SETS distinct
 * contents (set i holds content i mod BK_DATA_SETS, seed + K i: the host fills one content
 * at a time, whatever the count), outputs poisoned (0xFF bytes: bf16 NaN), so an
 * unwritten element shows. */
static bk_status sets_init(bk_backend_ctx *ctx, const bk_shape_job *job, int want,
                           shape_sets *ss, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_target *tg = job->target;
    bk_tensor host[BK_MAX_TENSORS];
    size_t off[BK_MAX_TENSORS], elems[BK_MAX_TENSORS], bytes[BK_MAX_TENSORS], stride = 0;
    memset(host, 0, sizeof(host));
    memset(ss, 0, sizeof(*ss));
    for (int i = 0; i < tg->ntensors; i++) {
        elems[i] = tg->tensor_elems(job->shape, job->world, i);
        bytes[i] = elems[i] * tg->tensor_elem_bytes(i);
        off[i] = stride;
        stride += align_up(bytes[i] + 16, 256);
    }
    if (ctx->spread) /* pages of its own: a placement of its own */
        stride = align_up(stride, BK_PAGE);
    int n = want < 1 ? 1 : want;
    if (n > BK_DATA_SETS && (size_t)n * stride > BK_POOL_MAX)
        n = BK_POOL_MAX / stride > BK_DATA_SETS ? (int)(BK_POOL_MAX / stride) : BK_DATA_SETS;
    ss->planned = n;
    for (;;) {
        cudaError_t e = cudaMalloc(&ss->pool, (size_t)n * stride);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorMemoryAllocation || n == 1)
            return BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: %d input sets of %zu bytes: %s",
                           ctx->rank, n, stride, cudaGetErrorString(e));
        (void)cudaGetLastError(); /* fewer sets rather than no run */
        n /= 2;
    }
    ss->s = calloc((size_t)n, sizeof(*ss->s));
    if (!ss->s) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: out of host memory for %d input sets",
                     ctx->rank, n);
        goto out;
    }
    ss->n = n;
    for (int r = 0; r < n; r++) {
        shape_set *set = &ss->s[r];
        for (int i = 0; i < tg->ntensors; i++)
            set->t[i] = (bk_tensor){.name = tg->tensor_names[i],
                                    .output = tg->tensor_is_output[i],
                                    .elems = elems[i],
                                    .elem_bytes = tg->tensor_elem_bytes(i),
                                    .data = (char *)ss->pool + (size_t)r * stride + off[i]};
        set->call = (bk_call){.shape = job->shape, .shape_index = job->shape_index, .iter = -1,
                              .rank = job->rank, .world = job->world, .t = set->t,
                              .nt = tg->ntensors, .comm = ctx->comm, .stream = ctx->stream,
                              .graph = job->graph, .timeout_s = job->timeout_s};
    }
    const int ndata = n < BK_DATA_SETS ? n : BK_DATA_SETS;
    for (int i = 0; i < tg->ntensors; i++) {
        host[i] = ss->s[0].t[i];
        host[i].data = malloc(bytes[i] + 16);
        if (!host[i].data) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: out of host memory for tensor %s",
                         ctx->rank, host[i].name);
            goto out;
        }
    }
    for (int d = 0; d < ndata; d++) {
        tg->init_inputs(host, job->shape, job->seed + 0x9E3779B97F4A7C15ull * (uint64_t)d,
                        job->shape_index, job->rank, job->world);
        for (int r = d; r < n; r += ndata)
            for (int i = 0; i < tg->ntensors; i++) {
                const bk_tensor *t = &ss->s[r].t[i];
                if (t->output)
                    CUDA_TRY(cudaMemsetAsync(t->data, 0xFF, bytes[i], ctx->stream));
                else
                    CUDA_TRY(cudaMemcpyAsync(t->data, host[i].data, bytes[i],
                                             cudaMemcpyHostToDevice, ctx->stream));
            }
        CUDA_TRY(cudaStreamSynchronize(ctx->stream)); /* before the host refills */
    }
out:
    for (int i = 0; i < tg->ntensors; i++)
        free(host[i].data);
    if (st != BK_OK)
        sets_free(ss);
    return st;
}

/* Capture one call on the stream into an executable graph. */
static bk_status set_capture(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s,
                             bk_err *err)
{
    bk_status st = BK_OK, run_st;
    cudaGraph_t g = NULL;
    CUDA_TRY(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    run_st = job->variant->run(job->vstate, &s->call, err);
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &g);
    if (run_st != BK_OK) {
        st = bk__relay_at(err, run_st, __FILE__, __LINE__);
        goto out;
    }
    if (e != cudaSuccess) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: capturing %s: %s", ctx->rank,
                     job->variant->name, cudaGetErrorString(e));
        goto out;
    }
    CUDA_TRY(cudaGraphInstantiate(&s->exec, g, 0));
out:
    if (g)
        (void)cudaGraphDestroy(g);
    return st;
}

/* One step (barrier excluded): graph replay or an eager call. */
static bk_status step(bk_backend_ctx *ctx, const bk_shape_job *job, shape_set *s, bk_err *err)
{
    bk_status st = BK_OK;
    if (s->exec) {
        CUDA_TRY(cudaGraphLaunch(s->exec, ctx->stream));
    } else {
        BK_TRY(job->variant->run(job->vstate, &s->call, err));
    }
out:
    return st;
}

/* Enough sets that the inputs of all of them exceed three L2s (at most max). */
static int choose_sets(const bk_shape_job *job, size_t l2, int max)
{
    size_t in_bytes = 0;
    for (int i = 0; i < job->target->ntensors; i++)
        if (!job->target->tensor_is_output[i])
            in_bytes += job->target->tensor_elems(job->shape, job->world, i) *
                        job->target->tensor_elem_bytes(i);
    size_t n = in_bytes ? (3 * l2 + in_bytes - 1) / in_bytes : (size_t)max;
    return n < 2 ? 2 : n > (size_t)max ? max : (int)n;
}

/* Keep the GPU busy with memsets of a scratch buffer on our stream for `seconds`. */
static bk_status warm_alone(bk_backend_ctx *ctx, double seconds, bk_err *err)
{
    bk_status st = BK_OK;
    void *buf = NULL;
    const size_t bytes = 64u << 20;
    uint64_t until = bk_now_ns() + (uint64_t)(seconds * 1e9);
    CUDA_TRY(cudaMalloc(&buf, bytes));
    for (int i = 0; bk_now_ns() < until; i++) {
        CUDA_TRY(cudaMemsetAsync(buf, i & 0xff, bytes, ctx->stream));
        if (i % 8 == 7)
            CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    }
    CUDA_TRY(cudaStreamSynchronize(ctx->stream));
out:
    if (buf)
        (void)cudaFree(buf);
    return st;
}

/* Let the stream drain, bounded: what NCCL has on it may wait for a peer that is gone, so
 * after `seconds` without progress NCCL is aborted (bk_cuda_comm_wait), and its kernels, like
 * ours (their waits time out), then end. */
static void drain(bk_backend_ctx *ctx, double seconds)
{
    bk_err err = { 0 };
    if (ctx->comm)
        (void)bk_cuda_comm_sync(ctx->comm, ctx->stream, seconds, &err);
    (void)cudaStreamSynchronize(ctx->stream);
}

static bk_status cuda_time_shape(bk_backend_ctx *ctx, const bk_shape_job *job, bk_err *err)
{
    bk_status st = BK_OK;
    shape_sets sets = {0};
    cudaEvent_t ev0[BK_TIME_BATCH], ev1[BK_TIME_BATCH];
    uint64_t ns[BK_TIME_BATCH];
    int nsets = 0, nev = 0, l2 = 0;
    const int gate_timeouts = bk_cuda_gate_timeouts(&ctx->gate);
    const double wait_s = 3 * job->timeout_s + 1 + BK_GATE_BOUND_S;
    /* the graphs below capture the variant's NCCL calls: no abort of NCCL while they exist */
    bk_cuda_comm_defer_abort(ctx->comm, 1);
    bk_cuda_comm_set_end(ctx->comm, job->end_ns);
    CUDA_TRY(cudaSetDevice(ctx->device));
    CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx->device));
    BK_TRY(sets_init(ctx, job, choose_sets(job, (size_t)l2, ctx->max_sets), &sets, err));
    nsets = sets.n;
    for (; nev < BK_TIME_BATCH; nev++) {
        CUDA_TRY(cudaEventCreate(&ev0[nev]));
        if (cudaEventCreate(&ev1[nev]) != cudaSuccess) {
            (void)cudaEventDestroy(ev0[nev]);
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: cudaEventCreate failed", ctx->rank);
            goto out;
        }
    }
    /* Warm-up runs eagerly (module load, NCCL's first-call setup), then the
     * graphs are captured and replayed once each. */
    /* Before the first shape, each rank brings its GPU out of idle on its own for
     * BK_CUDA_MIN_WARMUP_S (no peers involved, so no rank can disagree on when it
     * ends): a GPU leaving idle clocks made the first arm of an A/A ~2.5% slower
     * than B' on the H200, which a few hundred microsecond iterations did not cover. */
    if (job->shape_index == 0)
        BK_TRY(warm_alone(ctx, ctx->warm_s, err));
    /* at least one eager step before a capture: NCCL's first call on a communicator sets up
     * its connections, which must not happen inside the capture (warmup_iters may be 0) */
    const int warm = job->graph && job->warmup < 1 ? 1 : job->warmup;
    for (int i = 0; i < warm; i++) {
        BK_TRY(bk_cuda_comm_barrier(ctx->comm, ctx->stream, job->timeout_s, err));
        BK_TRY(step(ctx, job, &sets.s[i % nsets], err));
        CUDA_TRY(cudaEventRecord(ev1[0], ctx->stream));
        BK_TRY(bk_cuda_comm_wait(ctx->comm, ev1[0], wait_s, err));
    }
    if (job->graph) {
        /* as many barriers and steps on every rank of the lane: a rank whose GPU had room
         * for fewer sets (a co-tenant's memory) replays its graphs again, up to the count
         * every rank planned, rather than leave its peers waiting at a barrier */
        for (int r = 0; r < sets.planned; r++) {
            if (r < nsets)
                BK_TRY(set_capture(ctx, job, &sets.s[r], err));
            BK_TRY(bk_cuda_comm_barrier(ctx->comm, ctx->stream, job->timeout_s, err));
            BK_TRY(step(ctx, job, &sets.s[r % nsets], err));
        }
        CUDA_TRY(cudaEventRecord(ev1[0], ctx->stream));
        BK_TRY(bk_cuda_comm_wait(ctx->comm, ev1[0], wait_s, err));
    }
    /* Graph mode with fresh graphs: BK_CUDA_SETTLE untimed batches (each recaptured like a
     * timed one) come before the timed ones; first counts from -settle x batch. */
    const int start = job->graph && ctx->fresh_graphs ? -ctx->settle * BK_TIME_BATCH : 0;
    for (int first = start; first < job->iters; first += BK_TIME_BATCH) {
        const int timed = first >= 0;
        const int n = job->iters - first < BK_TIME_BATCH ? job->iters - first : BK_TIME_BATCH;
        if (first == 0 && job->t_first_ns && *job->t_first_ns == 0)
            *job->t_first_ns = bk_now_ns();
        /* The graphs this batch replays are captured, instantiated and uploaded again
         * before it (outside its events; BK_CUDA_FRESH_GRAPHS=0 replays the first ones
         * throughout). Measured on the H200 (docs/BENCHMARKS.md, A/A drift, seventh and
         * eighth sessions): a shape's step cost takes one of two values (0.2 us apart at 32
         * tokens) for a group of graphs instantiated together, and differs between groups;
         * fresh graphs mix one group per batch into a median and halved the arm-to-arm sd
         * of an A/A. */
        if (first > start && job->graph && ctx->fresh_graphs)
            for (int j = 0; j < n && j < nsets; j++) {
                shape_set *s = &sets.s[(first - start + j) % nsets];
                (void)cudaGraphExecDestroy(s->exec);
                s->exec = NULL;
                BK_TRY(set_capture(ctx, job, s, err));
                CUDA_TRY(cudaGraphUpload(s->exec, ctx->stream));
            }
        /* eager calls may wait for the stream on the host: no gate there */
        if (job->graph && ctx->gated)
            BK_TRY(bk_cuda_gate_close(&ctx->gate, ctx->stream, BK_GATE_BOUND_S, err));
        for (int j = 0; j < n; j++) {
            shape_set *s = &sets.s[(first - start + j) % nsets];
            s->call.iter = timed ? first + j : -1;
            /* BK_CUDA_FLUSH=1: every step's data comes from memory, not L2 */
            if (ctx->flush && cudaMemsetAsync(ctx->flush, (first + j) & 0xff, ctx->flush_bytes,
                                              ctx->stream) != cudaSuccess)
                st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: flushing L2 failed", ctx->rank);
            if (st == BK_OK && first + j == job->iters - 1) /* the checked call (check_last) */
                st = bk__cuda_poison_outputs(ctx, s, job->target->ntensors, err);
            if (st == BK_OK)
                st = bk_cuda_comm_barrier(ctx->comm, ctx->stream, job->timeout_s, err);
            if (st == BK_OK && cudaEventRecord(ev0[j], ctx->stream) != cudaSuccess)
                st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: cudaEventRecord failed", ctx->rank);
            if (st == BK_OK)
                st = step(ctx, job, s, err);
            if (st == BK_OK && cudaEventRecord(ev1[j], ctx->stream) != cudaSuccess)
                st = BK_FAIL(err, BK_ERR_SYSTEM, "rank %d: cudaEventRecord failed", ctx->rank);
            if (st != BK_OK)
                break;
        }
        if (job->graph && ctx->gated)
            bk_cuda_gate_open(&ctx->gate); /* also on failure: never leave the GPU waiting */
        if (st != BK_OK)
            goto out;
        for (int j = 0; j < n; j++) {
            float ms = 0;
            BK_TRY(bk_cuda_comm_wait(ctx->comm, ev1[j], wait_s, err));
            CUDA_TRY(cudaEventElapsedTime(&ms, ev0[j], ev1[j]));
            ns[j] = (uint64_t)((double)ms * 1e6 + 0.5);
        }
        if (timed)
            BK_TRY(job->emit(job->emit_user, (uint32_t)job->shape_index, (uint64_t)first, ns,
                             (size_t)n, err));
    }
    if (bk_cuda_gate_timeouts(&ctx->gate) > gate_timeouts)
        fprintf(stderr, "rank %d: warning: shape %d: %d batches waited %.1f s for the "
                "host to enqueue them; those ran as enqueued (host launch gaps included)\n",
                ctx->rank, job->shape_index, bk_cuda_gate_timeouts(&ctx->gate) - gate_timeouts,
                BK_GATE_BOUND_S);
    BK_TRY(bk__cuda_check_last(ctx, job, &sets.s[(job->iters - 1 - start) % nsets], err));
out:
    ctx->quiesce = st == BK_OK;
    /* the graphs go before NCCL's abort (which waits for every graph holding its calls),
     * the abort a wait found due before the drain (NCCL's kernels spin until aborted) */
    if (st != BK_OK)
        sets_free_graphs(&sets);
    bk_cuda_comm_defer_abort(ctx->comm, 0);
    if (st != BK_OK)
        drain(ctx, wait_s); /* NCCL's work may wait for a peer that is gone */
    for (int j = 0; j < nev; j++) {
        (void)cudaEventDestroy(ev0[j]);
        (void)cudaEventDestroy(ev1[j]);
    }
    sets_free(&sets);
    return st;
}

static bk_status cuda_audit_shape(bk_backend_ctx *ctx, const bk_shape_job *job, void **outs,
                                  size_t *bytes, bk_err *err)
{
    bk_status st = BK_OK;
    shape_sets ss = {0};
    shape_set *s = NULL;
    void *host[BK_MAX_TENSORS] = {0};
    int k = 0;
    bk_cuda_comm_set_end(ctx->comm, job->end_ns);
    CUDA_TRY(cudaSetDevice(ctx->device));
    BK_TRY(sets_init(ctx, job, 1, &ss, err));
    s = &ss.s[0];
    BK_TRY(bk__cuda_untimed_call(ctx, job, s, err));
    if (job->check_inputs)
        BK_TRY(bk__cuda_check_inputs(ctx, job, s, err));
    BK_TRY(bk__cuda_copy_to_host(ctx, s, job->target->ntensors, 1, host, err));
    for (int i = 0; i < job->target->ntensors; i++) {
        if (!s->t[i].output)
            continue;
        bytes[k] = s->t[i].elems * s->t[i].elem_bytes;
        outs[k++] = host[i]; /* ownership passes to the caller */
        host[i] = NULL;
    }
out:
    if (st != BK_OK)
        for (int i = 0; i < k; i++) {
            free(outs[i]);
            outs[i] = NULL;
        }
    bk__cuda_free_host(host);
    sets_free(&ss);
    ctx->quiesce = st == BK_OK;
    return st;
}

/* How long close waits for the lane's last barrier (only after a last shape that ended well
 * on this rank: a peer that failed it makes this rank wait that long, once). */
#define BK_CLOSE_BARRIER_S 5.0

static void cuda_close(bk_backend_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->stream) { /* else the device was never set up (a failed open): nothing on it */
        (void)cudaSetDevice(ctx->device);
        /* Peers read our peer memory after a call's barrier (the one-shot reads every
         * rank's payload then): the last call of a fast rank can end while a slower GPU
         * still reads its memory. One more lane barrier before the memory is freed, so
         * no peer touches it after (their writes into it land before we pass). */
        /* the arm's end does not cut these waits: they keep memory a peer may still read */
        bk_cuda_comm_set_end(ctx->comm, 0);
        if (ctx->quiesce && ctx->comm) {
            bk_err berr = { 0 };
            (void)bk_cuda_comm_barrier(ctx->comm, ctx->stream, BK_CLOSE_BARRIER_S, &berr);
        }
        /* on a lane whose barrier is NCCL's, a peer that skipped this barrier (its last
         * shape failed) would leave the allreduce waiting for ever */
        drain(ctx, BK_CLOSE_BARRIER_S + 1);
    }
    bk_cuda_comm_destroy(ctx->comm);
    bk_cuda_gate_free(&ctx->gate);
    if (ctx->flush)
        (void)cudaFree(ctx->flush);
    if (ctx->stream)
        (void)cudaStreamDestroy(ctx->stream);
    free(ctx);
}

/* What the BK_CUDA_* settings came to (defaults included), then the NCCL_* variables this
 * engine sees (they steer the incumbent's NCCL): the record keeps it per process. */
static void cuda_describe(const bk_backend_ctx *ctx, char *buf, size_t len)
{
    snprintf(buf, len, "gate=%d warmup_s=%g sets_max=%d spread=%d flush=%d fresh_graphs=%d "
             "settle=%d pdl=%d pin=%s", ctx->gated, ctx->warm_s, ctx->max_sets, ctx->spread,
             ctx->flush != NULL, ctx->fresh_graphs, ctx->settle, bk_cuda_pdl(), ctx->pin);
    (void)bk_env_words("NCCL_", buf, len);
}

const bk_engine_backend bk_engine_cuda = {
    .name = "cuda",
    .open = cuda_open,
    .comm_create = cuda_comm_create,
    .comm_connect = cuda_comm_connect,
    .time_shape = cuda_time_shape,
    .audit_shape = cuda_audit_shape,
    .close = cuda_close,
    .describe = cuda_describe,
};

#else
typedef int bk__engine_cuda_unused; /* ISO C forbids an empty translation unit */
#endif
