/* bench_rmsnorm.cu - times the residual + RMSNorm kernel (the incumbent's epilogue) in graph
 * mode over tokens x hidden, as a share of an SM copy kernel's bandwidth on the same card.
 *
 *   bench_rmsnorm [--csv FILE] [--step N] [--sweep]
 *     --step N   tokens 1, N, N^2, ... 16384 (default N = 2)
 *     --sweep    also time every launch configuration (128/256/512 threads per row, with and
 *                without evict-first hints; each checked against float64 first) and print the
 *                best beside the default
 *
 * Method: each shape gets enough rotated input sets that their inputs exceed three L2s
 * (2..32 sets); one CUDA graph holds CALLS back-to-back launches cycling through the sets;
 * the graph is replayed REPLAYS times, each replay timed with events; the per-call time is
 * the median replay time / CALLS. Bytes moved per call: read x, residual (T x H bf16 each)
 * and gamma (H), write residual_out and out (T x H each). The copy kernel's bandwidth counts
 * bytes read + written of a 2 GiB copy (median of 20). Outputs are checked against a float64
 * reference on one set of every shape before timing. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_variants.h"

#define CALLS 64
#define REPLAYS 20
#define MAX_SETS 32

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

/* Time a graph of CALLS captured launches; returns microseconds per call. */
template <typename F>
static double time_graph(cudaStream_t st, F launch)
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
    return median(t, REPLAYS) * 1e3 / CALLS;
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

/* Check set 0's outputs against float64 (worst error / (1e-3 + 8e-3 |ref|)). */
static double check(const uint16_t *x, const uint16_t *res, const uint16_t *g, const void *d_ro,
                    const void *d_out, int64_t T, int64_t H)
{
    size_t n = (size_t)T * H;
    uint16_t *ro = (uint16_t *)malloc(n * 2), *out = (uint16_t *)malloc(n * 2);
    double worst = 0;
    CK(cudaMemcpy(ro, d_ro, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, d_out, n * 2, cudaMemcpyDeviceToHost));
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
            double y = from_bf16(to_bf16((float)s)) * inv * from_bf16(g[h]);
            double e1 = fabs(from_bf16(ro[t * H + h]) - s) / (1e-3 + 8e-3 * fabs(s));
            double e2 = fabs(from_bf16(out[t * H + h]) - y) / (1e-3 + 8e-3 * fabs(y));
            if (!(e1 <= worst))
                worst = isnan(e1) ? INFINITY : e1;
            if (!(e2 <= worst))
                worst = isnan(e2) ? INFINITY : e2;
        }
    }
    free(ro);
    free(out);
    return worst;
}

int main(int argc, char **argv)
{
    const char *csv_path = NULL;
    int step = 2, sweep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else if (!strcmp(argv[i], "--step") && i + 1 < argc && atoi(argv[i + 1]) > 1)
            step = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sweep"))
            sweep = 1;
        else {
            fprintf(stderr, "usage: %s [--csv FILE] [--step N] [--sweep]\n", argv[0]);
            return 2;
        }
    }
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
    if (csv)
        fprintf(csv, "hidden,tokens,bytes,us,gbps,copy_share,copy_gbps,best_us,best_cfg\n");
    printf("%6s %6s %12s %9s %8s %7s %9s %9s\n", "hidden", "tokens", "bytes", "us", "GB/s",
           "%copy", "best us", "best cfg");
    const int64_t hiddens[] = {4096, 6144, 7168, 8192};
    for (int hi = 0; hi < 4; hi++) {
        for (int64_t T = 1; T <= 16384; T *= step) {
            const int64_t H = hiddens[hi];
            const size_t tn = (size_t)T * H, in_bytes = 2 * tn * 2;
            int sets = (int)((3.0 * prop.l2CacheSize + in_bytes - 1) / in_bytes);
            sets = sets < 2 ? 2 : sets > MAX_SETS ? MAX_SETS : sets;
            void *x[MAX_SETS], *res[MAX_SETS], *ro[MAX_SETS], *out[MAX_SETS], *g;
            uint16_t *hx = (uint16_t *)malloc(tn * 2), *hr = (uint16_t *)malloc(tn * 2),
                     *hg = (uint16_t *)malloc(H * 2);
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
                    double w = check(hx, hr, hg, ro[s], out[s], T, H);
                    if (w > 1.0) {
                        fprintf(stderr, "WRONG: %lld x %lld off the reference (%.3g)\n",
                                (long long)T, (long long)H, w);
                        return 1;
                    }
                }
            }
            double us = time_graph(st, [&](int i) {
                const int s = i % sets;
                BK(bk_residual_rmsnorm(x[s], res[s], g, ro[s], out[s], T, H, BK_RMSNORM_EPS, st,
                                       &e_));
            });
            double best = us;
            char best_cfg[32] = "default";
            for (int cfg = 0; sweep && cfg < 6; cfg++) {
                const int threads = 128 << (cfg / 2), hint = cfg % 2;
                if ((H / 8 + threads - 1) / threads > 8)
                    continue; /* more than 8 vectors per thread */
                const int last = sets - 1; /* hx, hr hold its inputs */
                CK(cudaMemsetAsync(ro[last], 0xFF, tn * 2, st));
                CK(cudaMemsetAsync(out[last], 0xFF, tn * 2, st));
                BK(bk_residual_rmsnorm_tuned(x[last], res[last], g, ro[last], out[last], T, H,
                                             BK_RMSNORM_EPS, threads, hint, st, &e_));
                CK(cudaStreamSynchronize(st));
                if (check(hx, hr, hg, ro[last], out[last], T, H) > 1.0) {
                    fprintf(stderr, "WRONG: %lld x %lld, %d threads%s, off the reference\n",
                            (long long)T, (long long)H, threads, hint ? " cs" : "");
                    return 1;
                }
                double u = time_graph(st, [&](int i) {
                    const int s = i % sets;
                    BK(bk_residual_rmsnorm_tuned(x[s], res[s], g, ro[s], out[s], T, H,
                                                 BK_RMSNORM_EPS, threads, hint, st, &e_));
                });
                if (u < best) {
                    best = u;
                    snprintf(best_cfg, sizeof(best_cfg), "%d%s", threads, hint ? "cs" : "");
                }
            }
            const double bytes = (4.0 * tn + H) * 2;
            const double bw = bytes / (us * 1e-6);
            printf("%6lld %6lld %12.0f %9.2f %8.0f %6.1f%% %9.2f %9s\n", (long long)H,
                   (long long)T, bytes, us, bw / 1e9, 100 * bw / copy_bw, best, best_cfg);
            if (csv)
                fprintf(csv, "%lld,%lld,%.0f,%.3f,%.1f,%.4f,%.1f,%.3f,%s\n", (long long)H,
                        (long long)T, bytes, us, bw / 1e9, bw / copy_bw, copy_bw / 1e9, best,
                        best_cfg);
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
        }
    }
    if (csv)
        fclose(csv);
    return 0;
}
