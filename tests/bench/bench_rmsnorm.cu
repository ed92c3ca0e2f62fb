/* bench_rmsnorm.cu - times the residual + RMSNorm kernel (the incumbent's epilogue) in graph
 * mode over tokens x hidden, as a share of an SM copy kernel's bandwidth on the same card.
 *
 *   bench_rmsnorm [--csv FILE] [--step N | --tokens LIST] [--hidden LIST]
 *                 [--sweep [row|pipe|lean]] [--hot] [--each] [--rounds N]
 *     --step N   tokens 1, N, N^2, ... 16384 (default N = 2)
 *     --tokens LIST  these token counts instead (comma-separated, 1 to 16384, at most 32)
 *     --hidden LIST  these hidden sizes (comma-separated multiples of 8 up to 16384, at most
 *                8; default 4096,6144,7168,8192)
 *     --sweep    also time every launch configuration and print the best beside the default:
 *                the row kernel at 256/512 threads per row, with and without evict-first
 *                hints; the lean row kernel at about 128/256/512/1024, and at 512/1024 with
 *                gamma loaded early (names ending in g); from 64 tokens also the
 *                pipelined kernel (kernels/ar_rmsnorm_pipe.cu) at about 256/512/1024 threads
 *                per row (duplicates skipped), with and without hints, automatic stages and
 *                blocks per SM. Each configuration's outputs are checked against float64
 *                before it is timed. A kernel name after --sweep times that kernel's
 *                configurations only. Each configuration is timed in --rounds graphs, as
 *                the default is (its time the median of all their replays).
 *     --each     with --sweep: also print every configuration's time (a line each), the
 *                blocks of it one SM holds (the occupancy API on the compiled kernel) and
 *                the waves its rows take on this device's SMs; the default first (=def);
 *                and, before each hidden size, the rows of one wave of each launch the
 *                default rule weighs (bk_rmsnorm_occ_device: 0 where it is not weighed)
 *   Every shape also times the default launch without programmatic dependent launch (column
 *   "no-pdl us"; cfg.pdl, which the default sets at most shapes: each call may be scheduled
 *   while the one before it finishes), in alternation with the default: --rounds N graphs
 *   of each (default 2, at most 8), each column the median of all its rounds' replays. Where
 *   the default leaves pdl off, the same launch with it is timed in that alternation too
 *   (column "pdl us"; "-" where the default has it).
 *   Every shape also times its bytes moved by every SM with no reduction in that alternation
 *   (column "move us", move_kernel, with pdl): the same bytes without a row's dependency, a
 *   reference rather than a lower bound.
 *     --hot      one input set (L2-resident inputs, like the epilogue right after the
 *                allreduce wrote x) instead of the rotated cold sets
 *
 * Method: each shape gets enough rotated input sets that their inputs exceed three L2s
 * (2..32 sets; 1 with --hot); one CUDA graph holds CALLS back-to-back launches cycling
 * through the sets; the graph is replayed REPLAYS times, each replay timed with events; the per-call time is
 * the median replay time / CALLS. Bytes moved per call: read x, residual (T x H bf16 each)
 * and gamma (H), write residual_out and out (T x H each). The copy kernel's bandwidth counts
 * bytes read + written of a 2 GiB copy (median of 20). Outputs are checked against a float64
 * reference on one set of every shape before timing (the reference is computed once per
 * shape). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ar_rmsnorm_dev.cuh"
#include "kernels/cuda_variants.h"

#define CALLS 64
#define REPLAYS 20
#define MAX_SETS 32
#define MAX_ROUNDS 8 /* --rounds */
#define PIPE_MIN_TOKENS 64 /* the sweep times the pipelined kernel from here */

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                    cudaGetErrorString(e_));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)
#define BK(call)                                                                          \
    do {                                                                                  \
        bk_err e_;                                                                        \
        bk_err_clear(&e_);                                                                \
        if ((call) != BK_OK) {                                                            \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, e_.msg);                   \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float median(float *v, int n)
{
    qsort(v, n, sizeof(float), cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* --tokens / --hidden: a comma-separated list of at most max integers in [lo, hi], each a
 * multiple of mult; the count, or -1 after saying what is wrong. */
static int parse_list(const char *opt, const char *arg, int64_t lo, int64_t hi, int64_t mult,
                      int64_t *out, int max)
{
    int n = 0;
    const char *p = arg;
    for (;;) {
        char *end = NULL;
        const long long v = strtoll(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v < lo || v > hi || v % mult != 0) {
            fprintf(stderr, "%s %s: item %d: want integers from %lld to %lld%s, comma-separated\n",
                    opt, arg, n + 1, (long long)lo, (long long)hi,
                    mult > 1 ? ", multiples of 8" : "");
            return -1;
        }
        if (n == max) {
            fprintf(stderr, "%s %s: more than %d items\n", opt, arg, max);
            return -1;
        }
        out[n++] = v;
        if (*end == '\0')
            return n;
        p = end + 1;
    }
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void fill(uint16_t *h, size_t n, unsigned seed, float lo, float hi)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        h[i] = to_bf16(lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0)));
    }
}

/* A graph node that does nothing: the floor under every per-call time here. */
__global__ void empty_kernel(void) {}

/* The same launched with programmatic dependent launch: it waits for the call before it
 * (as our kernels do) and lets the next be scheduled at once. */
__global__ void pdl_empty_kernel(void)
{
    bk__pdl_wait();
    bk__pdl_launch();
}

/* A shape's bytes moved with no reduction (the "move us" column): x and residual read, gamma
 * read, residual_out and out written, by every SM; each thread loads MOVE_VPT vectors of x and
 * of the residual at once, as the copy kernel does, and writes stand-ins of their sums
 * (x ^ residual, and that ^ gamma) to both outputs. Launched with pdl, as the default is where
 * it gains. What the same bytes take without a row's dependency (every output of a row waits
 * for all of its loads and a reduction); not a lower bound: its one launch shape is not the
 * best at every size, and a one-block row beats it at some shapes. */
#define MOVE_THREADS 256
#define MOVE_VPT 2
__global__ void move_kernel(const uint4 *__restrict__ x, const uint4 *__restrict__ r,
                            const uint4 *__restrict__ g, uint4 *__restrict__ ro,
                            uint4 *__restrict__ out, int64_t n, int hvec)
{
    bk__pdl_wait();
    bk__pdl_launch();
    const int64_t base = (int64_t)blockIdx.x * MOVE_THREADS * MOVE_VPT + threadIdx.x;
    uint4 a[MOVE_VPT], b[MOVE_VPT];
#pragma unroll
    for (int k = 0; k < MOVE_VPT; k++) {
        const int64_t i = base + (int64_t)k * MOVE_THREADS;
        if (i < n) {
            a[k] = x[i];
            b[k] = r[i];
        }
    }
#pragma unroll
    for (int k = 0; k < MOVE_VPT; k++) {
        const int64_t i = base + (int64_t)k * MOVE_THREADS;
        if (i < n) {
            const uint4 c = g[i % hvec];
            const uint4 s = make_uint4(a[k].x ^ b[k].x, a[k].y ^ b[k].y, a[k].z ^ b[k].z,
                                       a[k].w ^ b[k].w);
            ro[i] = s;
            out[i] = make_uint4(s.x ^ c.x, s.y ^ c.y, s.z ^ c.z, s.w ^ c.w);
        }
    }
}

/* Time a graph of CALLS captured launches: its REPLAYS replays' microseconds per call into
 * us[0..REPLAYS). */
template <typename F>
static void time_graph_into(cudaStream_t st, F launch, float *us)
{
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaEvent_t a, b;
    float t[REPLAYS];
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < CALLS; i++)
        launch(i);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ex, g, 0));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaGraphLaunch(ex, st)); /* warm-up */
    for (int r = 0; r < REPLAYS; r++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ex, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[r], a, b));
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ex));
    CK(cudaGraphDestroy(g));
    for (int r = 0; r < REPLAYS; r++)
        us[r] = t[r] * 1e3f / CALLS;
}

/* The same, the median: microseconds per call. */
template <typename F>
static double time_graph(cudaStream_t st, F launch)
{
    float us[REPLAYS];
    time_graph_into(st, launch, us);
    return median(us, REPLAYS);
}

static double copy_bandwidth(cudaStream_t st)
{
    const size_t bytes = (size_t)2 << 30;
    void *src, *dst;
    cudaEvent_t a, b;
    float t[20];
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMemset(src, 1, bytes));
    CK(cudaDeviceSynchronize()); /* the legacy-stream memset must not overlap the timing */
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    BK(bk_copy_kernel(src, dst, bytes, st, &e_));
    for (int r = 0; r < 20; r++) {
        CK(cudaEventRecord(a, st));
        BK(bk_copy_kernel(src, dst, bytes, st, &e_));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[r], a, b));
    }
    CK(cudaFree(src));
    CK(cudaFree(dst));
    return 2.0 * bytes / (median(t, 20) * 1e-3);
}

/* The float64 reference of one input set, stored as float (its rounding, 6e-8 relative,
 * is far inside the tolerance): residual_out's exact s and out. */
static void reference(const uint16_t *x, const uint16_t *res, const uint16_t *g, float *ref_ro,
                      float *ref_out, int64_t T, int64_t H)
{
    for (int64_t t = 0; t < T; t++) {
        double ss = 0;
        for (int64_t h = 0; h < H; h++) {
            double s = (double)from_bf16(x[t * H + h]) + from_bf16(res[t * H + h]);
            double r = from_bf16(to_bf16((float)s)); /* the norm reads residual_out as stored */
            ss += r * r;
        }
        double inv = 1.0 / sqrt(ss / H + 1e-6);
        for (int64_t h = 0; h < H; h++) {
            double s = (double)from_bf16(x[t * H + h]) + from_bf16(res[t * H + h]);
            ref_ro[t * H + h] = (float)s;
            ref_out[t * H + h] = (float)(from_bf16(to_bf16((float)s)) * inv * from_bf16(g[h]));
        }
    }
}

/* Check one set's outputs against its reference (worst error / (1e-3 + 8e-3 |ref|); > 1 is
 * wrong; a NaN, e.g. an output never written over its 0xFFFF poison, is infinitely wrong). */
static double check(const float *ref_ro, const float *ref_out, const void *d_ro,
                    const void *d_out, int64_t T, int64_t H)
{
    size_t n = (size_t)T * H;
    uint16_t *ro = (uint16_t *)malloc(n * 2), *out = (uint16_t *)malloc(n * 2);
    double worst = 0;
    CK(cudaMemcpy(ro, d_ro, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, d_out, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        double s = ref_ro[i], y = ref_out[i];
        double e1 = fabs(from_bf16(ro[i]) - s) / (1e-3 + 8e-3 * fabs(s));
        double e2 = fabs(from_bf16(out[i]) - y) / (1e-3 + 8e-3 * fabs(y));
        if (!(e1 <= worst))
            worst = isnan(e1) ? INFINITY : e1;
        if (!(e2 <= worst))
            worst = isnan(e2) ? INFINITY : e2;
    }
    free(ro);
    free(out);
    return worst;
}

/* The sweep's configurations: the row kernel's 4 (128 threads was never the best: dropped),
 * the pipelined kernel's 6, the lean kernel's 7, and 4 of the lean kernel with gamma early
 * (named with a trailing g; refused, so skipped, above 2 vectors per thread), 5 of those
 * with 2, 4 or 8 blocks per row (cfg.split, a trailing s2/s4/s8). */
static const bk_rmsnorm_cfg k_sweep[] = {
    {BK_RMSNORM_ROW, 256, 0, 0, 0, 0, 0, 0},   {BK_RMSNORM_ROW, 256, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_ROW, 512, 0, 0, 0, 0, 0, 0},   {BK_RMSNORM_ROW, 512, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_PIPE, 256, 0, 0, 0, 0, 0, 0},  {BK_RMSNORM_PIPE, 256, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_PIPE, 512, 0, 0, 0, 0, 0, 0},  {BK_RMSNORM_PIPE, 512, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_PIPE, 1024, 0, 0, 0, 0, 0, 0}, {BK_RMSNORM_PIPE, 1024, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_LEAN, 256, 0, 0, 0, 0, 0, 0},  {BK_RMSNORM_LEAN, 256, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_LEAN, 512, 0, 0, 0, 0, 0, 0},  {BK_RMSNORM_LEAN, 512, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_LEAN, 1024, 0, 0, 0, 0, 0, 0}, {BK_RMSNORM_LEAN, 1024, 1, 0, 0, 0, 0, 0},
    {BK_RMSNORM_LEAN, 128, 0, 0, 0, 0, 0, 0},
    {BK_RMSNORM_LEAN, 512, 0, 0, 0, 1, 0, 0},  {BK_RMSNORM_LEAN, 512, 1, 0, 0, 1, 0, 0},
    {BK_RMSNORM_LEAN, 1024, 0, 0, 0, 1, 0, 0}, {BK_RMSNORM_LEAN, 1024, 1, 0, 0, 1, 0, 0},
    {BK_RMSNORM_LEAN, 512, 0, 0, 0, 1, 2, 0},  {BK_RMSNORM_LEAN, 512, 0, 0, 0, 1, 4, 0},
    {BK_RMSNORM_LEAN, 512, 0, 0, 0, 1, 8, 0},  {BK_RMSNORM_LEAN, 1024, 0, 0, 0, 1, 2, 0},
    {BK_RMSNORM_LEAN, 1024, 0, 0, 0, 1, 4, 0},
};
#define NSWEEP (int)(sizeof k_sweep / sizeof k_sweep[0])

static void cfg_name(const bk_rmsnorm_cfg *c, char *buf, size_t n)
{
    char split[16] = "";
    if (c->split > 1)
        snprintf(split, sizeof split, "s%d", c->split);
    snprintf(buf, n, "%s%d%s%s%s",
             c->kernel == BK_RMSNORM_PIPE ? "p" : c->kernel == BK_RMSNORM_LEAN ? "l" : "", c->threads,
             c->stream_hint ? "cs" : "", c->gamma_early ? "g" : "", split);
}

/* --each: a configuration's time, its blocks resident an SM (0: unknown) and the waves of
 * them its rows take on this device's SMs. */
static void print_each(long long H, long long T, const char *name, double us,
                       const bk_rmsnorm_cfg *cfg, int sms)
{
    const int bps = bk_rmsnorm_cfg_blocks_per_sm(cfg, H);
    const long long blocks = T * (cfg->split > 1 ? cfg->split : 1);
    if (bps > 0)
        printf("%6lld %6lld   %-12s %9.2f us  %d blocks/SM  %.2f waves\n", H, T, name, us, bps,
               (double)blocks / ((double)bps * sms));
    else
        printf("%6lld %6lld   %-12s %9.2f us\n", H, T, name, us);
}

int main(int argc, char **argv)
{
    const char *csv_path = NULL;
    int step = 2, sweep = 0, hot = 0, each = 0, only = -1; /* only: a kernel, -1 all */
    int rounds = 2;
    int64_t tokens[32], hiddens[8] = {4096, 6144, 7168, 8192};
    int ntokens = 0, nhidden = 4, step_given = 0; /* ntokens 0: from --step */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else if (!strcmp(argv[i], "--step") && i + 1 < argc && atoi(argv[i + 1]) > 1) {
            step = atoi(argv[++i]);
            step_given = 1;
        }
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            ntokens = parse_list("--tokens", argv[i + 1], 1, 16384, 1, tokens, 32);
            if (ntokens < 0)
                return 2;
            i++;
        } else if (!strcmp(argv[i], "--hidden") && i + 1 < argc) {
            nhidden = parse_list("--hidden", argv[i + 1], 8, 16384, 8, hiddens, 8);
            if (nhidden < 0)
                return 2;
            i++;
        }
        else if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-') {
                const char *k = argv[++i];
                only = !strcmp(k, "row") ? BK_RMSNORM_ROW : !strcmp(k, "pipe") ? BK_RMSNORM_PIPE
                       : !strcmp(k, "lean") ? BK_RMSNORM_LEAN : -2;
                if (only == -2) {
                    fprintf(stderr, "--sweep %s: want row, pipe or lean\n", k);
                    return 2;
                }
            }
        }
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= MAX_ROUNDS)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else if (!strcmp(argv[i], "--each"))
            each = 1;
        else {
            fprintf(stderr, "usage: %s [--csv FILE] [--step N | --tokens LIST] [--hidden LIST] "
                    "[--sweep [row|pipe|lean]] [--hot] [--each] [--rounds N (1..%d)]\n",
                    argv[0], MAX_ROUNDS);
            return 2;
        }
    }
    if (each && !sweep) {
        fprintf(stderr, "--each prints the sweep's configurations: give --sweep too\n");
        return 2;
    }
    if (ntokens > 0 && step_given) {
        fprintf(stderr, "--step and --tokens: give one of them\n");
        return 2;
    }
    if (ntokens == 0)
        for (int64_t T = 1; T <= 16384; T *= step)
            tokens[ntokens++] = T;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    cudaStream_t st;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const double copy_bw = copy_bandwidth(st);
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    printf("device: %s, %d SMs, L2 %d MiB; copy kernel %.0f GB/s (read + write)\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, copy_bw / 1e9);
    {
        double floor_us[3];
        const int floor_threads[3] = {32, 512, 1024};
        for (int i = 0; i < 3; i++)
            floor_us[i] = time_graph(st, [&](int) {
                empty_kernel<<<1, floor_threads[i], 0, st>>>();
                CK(cudaGetLastError());
            });
        printf("graph node floor: an empty kernel of one block takes %.2f / %.2f / %.2f us per "
               "call at 32 / 512 / 1024 threads\n", floor_us[0], floor_us[1], floor_us[2]);
        for (int i = 0; i < 3; i++)
            floor_us[i] = time_graph(st, [&](int) {
                BK(bk__launch("pdl_empty_kernel", pdl_empty_kernel, 1, floor_threads[i], 0, st,
                              1, &e_));
            });
        printf("with programmatic dependent launch (pdl): %.2f / %.2f / %.2f us per call\n",
               floor_us[0], floor_us[1], floor_us[2]);
    }
    printf("mode: %s\n", hot ? "hot (one input set, L2-resident)"
                             : "cold (rotated input sets, over 3 x L2)");
    if (csv)
        fprintf(csv, "hidden,tokens,bytes,us,gbps,copy_share,copy_gbps,best_us,best_cfg,"
                     "pipe_us,pipe_cfg,mode,nopdl_us,pdl_us,move_us\n");
    printf("%6s %6s %12s %9s %8s %7s %9s %9s %9s %9s %9s %9s %8s  [%s]\n", "hidden", "tokens",
           "bytes", "us", "GB/s", "%copy", "no-pdl us", "pdl us", "best us", "best cfg",
           "pipe us", "pipe cfg", "move us", hot ? "hot" : "cold");
    for (int hi = 0; hi < nhidden; hi++) {
        if (each) { /* the rows a wave of each launch the default rule weighs, on this device */
            bk_rmsnorm_occ o;
            bk_rmsnorm_occ_device(hiddens[hi], &o);
            printf("%6lld rule's waves on %d SMs: mid %d blocks/SM (%d rows), l512 %d (%d), "
                   "l256 %d (%d)\n", (long long)hiddens[hi], o.sms, o.mid, o.mid * o.sms,
                   o.l512, o.l512 * o.sms, o.l256, o.l256 * o.sms);
        }
        for (int ti = 0; ti < ntokens; ti++) {
            const int64_t H = hiddens[hi], T = tokens[ti];
            const size_t tn = (size_t)T * H, in_bytes = 2 * tn * 2;
            int sets = (int)((3.0 * prop.l2CacheSize + in_bytes - 1) / in_bytes);
            sets = sets < 2 ? 2 : sets > MAX_SETS ? MAX_SETS : sets;
            if (hot)
                sets = 1;
            void *x[MAX_SETS], *res[MAX_SETS], *ro[MAX_SETS], *out[MAX_SETS], *g;
            uint16_t *hx = (uint16_t *)malloc(tn * 2), *hr = (uint16_t *)malloc(tn * 2),
                     *hg = (uint16_t *)malloc(H * 2);
            float *ref_ro = (float *)malloc(tn * 4), *ref_out = (float *)malloc(tn * 4);
            CK(cudaMalloc(&g, H * 2));
            fill(hg, H, 7, 0.5f, 1.5f);
            CK(cudaMemcpy(g, hg, H * 2, cudaMemcpyHostToDevice));
            for (int s = 0; s < sets; s++) {
                CK(cudaMalloc(&x[s], tn * 2));
                CK(cudaMalloc(&res[s], tn * 2));
                CK(cudaMalloc(&ro[s], tn * 2));
                CK(cudaMalloc(&out[s], tn * 2));
                fill(hx, tn, 100 + s, -1.f, 1.f);
                fill(hr, tn, 200 + s, -1.f, 1.f);
                CK(cudaMemcpy(x[s], hx, tn * 2, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(res[s], hr, tn * 2, cudaMemcpyHostToDevice));
                CK(cudaMemset(ro[s], 0xFF, tn * 2));
                CK(cudaMemset(out[s], 0xFF, tn * 2));
                CK(cudaDeviceSynchronize()); /* legacy-stream copies vs our stream */
                if (s == sets - 1) {
                    BK(bk_residual_rmsnorm(x[s], res[s], g, ro[s], out[s], T, H,
                                           BK_RMSNORM_EPS, st, &e_));
                    CK(cudaStreamSynchronize(st));
                    reference(hx, hr, hg, ref_ro, ref_out, T, H);
                    double w = check(ref_ro, ref_out, ro[s], out[s], T, H);
                    if (w > 1.0) {
                        fprintf(stderr, "WRONG: %lld x %lld off the reference (%.3g)\n",
                                (long long)T, (long long)H, w);
                        return 1;
                    }
                }
            }
            /* the default launch, and the same without programmatic dependent launch
             * (cfg.pdl): timed in alternation, `rounds` graphs each (a graph's own
             * instantiation moves it by up to 0.2 us at some shapes), each the median of all
             * its rounds' replays */
            /* a configuration's outputs on the last set (whose reference ref_ro and ref_out
             * hold), poisoned first; false, saying so, when they are off it */
            auto right = [&](const bk_rmsnorm_cfg *c, const char *name) {
                const int last = sets - 1;
                CK(cudaMemsetAsync(ro[last], 0xFF, tn * 2, st));
                CK(cudaMemsetAsync(out[last], 0xFF, tn * 2, st));
                BK(bk_residual_rmsnorm_config(x[last], res[last], g, ro[last], out[last], T, H,
                                              BK_RMSNORM_EPS, c, st, &e_));
                CK(cudaStreamSynchronize(st));
                if (check(ref_ro, ref_out, ro[last], out[last], T, H) <= 1.0)
                    return true;
                fprintf(stderr, "WRONG: %lld x %lld, %s, off the reference\n", (long long)T,
                        (long long)H, name);
                return false;
            };
            /* one graph of configuration c over the rotated sets: its replays into `into` */
            auto graph_cfg = [&](const bk_rmsnorm_cfg *c, float *into) {
                time_graph_into(st, [&](int i) {
                    const int s = i % sets;
                    BK(bk_residual_rmsnorm_config(x[s], res[s], g, ro[s], out[s], T, H,
                                                  BK_RMSNORM_EPS, c, st, &e_));
                }, into);
            };
            bk_rmsnorm_cfg nopdl_cfg, pdl_cfg;
            bk_rmsnorm_default_cfg(T, H, 0, &nopdl_cfg);
            const int def_pdl = nopdl_cfg.pdl;
            nopdl_cfg.pdl = 0;
            pdl_cfg = nopdl_cfg;
            pdl_cfg.pdl = 1;
            if (!right(&nopdl_cfg, "default without pdl") ||
                (!def_pdl && !right(&pdl_cfg, "default with pdl")))
                return 1;
            float def_t[MAX_ROUNDS * REPLAYS], nopdl_t[MAX_ROUNDS * REPLAYS];
            float pdl_t[MAX_ROUNDS * REPLAYS], move_t[MAX_ROUNDS * REPLAYS];
            const int64_t nvec = (int64_t)tn / 8;
            const unsigned move_blocks =
                (unsigned)((nvec + MOVE_THREADS * MOVE_VPT - 1) / (MOVE_THREADS * MOVE_VPT));
            for (int r = 0; r < rounds; r++) {
                time_graph_into(st, [&](int i) { /* the same bytes, no reduction */
                    const int s = i % sets;
                    BK(bk__launch("move_kernel", move_kernel, move_blocks, MOVE_THREADS, 0, st,
                                  1, &e_, (const uint4 *)x[s], (const uint4 *)res[s],
                                  (const uint4 *)g, (uint4 *)ro[s], (uint4 *)out[s], nvec,
                                  (int)(H / 8)));
                }, move_t + r * REPLAYS);
                if (!def_pdl) /* the rule left pdl off here: what it would give */
                    graph_cfg(&pdl_cfg, pdl_t + r * REPLAYS);
                time_graph_into(st, [&](int i) {
                    const int s = i % sets;
                    BK(bk_residual_rmsnorm(x[s], res[s], g, ro[s], out[s], T, H,
                                           BK_RMSNORM_EPS, st, &e_));
                }, def_t + r * REPLAYS);
                graph_cfg(&nopdl_cfg, nopdl_t + r * REPLAYS);
            }
            const double us = median(def_t, rounds * REPLAYS);
            const double nopdl_us = median(nopdl_t, rounds * REPLAYS);
            const double move_us = median(move_t, rounds * REPLAYS);
            const double pdl_us = def_pdl ? NAN : median(pdl_t, rounds * REPLAYS);
            char pdl_col[32] = "-", pdl_csv[32] = "";
            if (!def_pdl) {
                snprintf(pdl_col, sizeof pdl_col, "%.2f", pdl_us);
                snprintf(pdl_csv, sizeof pdl_csv, "%.3f", pdl_us);
            }
            double best = us, pbest = INFINITY;
            char best_cfg[32] = "default", pbest_cfg[32] = "-";
            if (sweep && each) {
                char dname[40];
                cfg_name(&nopdl_cfg, dname, sizeof dname - 8);
                strcat(dname, "=def");
                print_each(H, T, dname, us, &nopdl_cfg, prop.multiProcessorCount);
            }
            int seen[NSWEEP] = {0}; /* threads each configuration ran with */
            for (int c = 0; sweep && c < NSWEEP; c++) {
                /* launched as the default is at this shape: with pdl or without */
                bk_rmsnorm_cfg sweep_cfg = k_sweep[c];
                sweep_cfg.pdl = def_pdl;
                const bk_rmsnorm_cfg *cfg = &sweep_cfg;
                const int pipe = cfg->kernel == BK_RMSNORM_PIPE;
                char name[32];
                int dup = 0;
                seen[c] = bk_rmsnorm_cfg_threads(cfg, H);
                for (int d = 0; d < c; d++)
                    dup |= k_sweep[d].kernel == cfg->kernel &&
                           k_sweep[d].stream_hint == cfg->stream_hint &&
                           k_sweep[d].gamma_early == cfg->gamma_early &&
                           k_sweep[d].split == cfg->split && seen[d] == seen[c];
                /* split rows: for rows fewer than the SMs (not timed past 256 tokens) */
                if (seen[c] == 0 || dup || (pipe && T < PIPE_MIN_TOKENS) ||
                    (cfg->split > 1 && T > 256) ||
                    (only >= 0 && (int)cfg->kernel != only))
                    continue;
                cfg_name(cfg, name, sizeof name);
                if (!right(cfg, name))
                    return 1;
                float sweep_t[MAX_ROUNDS * REPLAYS]; /* `rounds` graphs, as the default */
                for (int r = 0; r < rounds; r++)
                    graph_cfg(cfg, sweep_t + r * REPLAYS);
                const double u = median(sweep_t, rounds * REPLAYS);
                if (each)
                    print_each(H, T, name, u, cfg, prop.multiProcessorCount);
                if (!pipe && u < best) {
                    best = u;
                    snprintf(best_cfg, sizeof(best_cfg), "%s", name);
                } else if (pipe && u < pbest) {
                    pbest = u;
                    snprintf(pbest_cfg, sizeof(pbest_cfg), "%s", name);
                }
            }
            const double bytes = (4.0 * tn + H) * 2;
            const double bw = bytes / (us * 1e-6);
            char pbest_us[32] = "-", pbest_csv[32] = "";
            if (pbest < INFINITY) {
                snprintf(pbest_us, sizeof pbest_us, "%.2f", pbest);
                snprintf(pbest_csv, sizeof pbest_csv, "%.3f", pbest);
            }
            printf("%6lld %6lld %12.0f %9.2f %8.0f %6.1f%% %9.2f %9s %9.2f %9s %9.9s %9s %8.2f\n",
                   (long long)H, (long long)T, bytes, us, bw / 1e9, 100 * bw / copy_bw, nopdl_us,
                   pdl_col, best, best_cfg, pbest_us, pbest_cfg, move_us);
            if (csv)
                fprintf(csv, "%lld,%lld,%.0f,%.3f,%.1f,%.4f,%.1f,%.3f,%s,%s,%s,%s,%.3f,%s,%.3f\n",
                        (long long)H, (long long)T, bytes, us, bw / 1e9, bw / copy_bw,
                        copy_bw / 1e9, best, best_cfg, pbest_csv,
                        pbest < INFINITY ? pbest_cfg : "", hot ? "hot" : "cold", nopdl_us,
                        pdl_csv, move_us);
            for (int s = 0; s < sets; s++) {
                CK(cudaFree(x[s]));
                CK(cudaFree(res[s]));
                CK(cudaFree(ro[s]));
                CK(cudaFree(out[s]));
            }
            CK(cudaFree(g));
            free(hx);
            free(hr);
            free(hg);
            free(ref_ro);
            free(ref_out);
        }
    }
    if (csv)
        fclose(csv);
    return 0;
}
