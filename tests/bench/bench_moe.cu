/* bench_moe.cu - moe.fused_experts_reduce on one GPU (TP1 EP1, where the trailing reduction
 * is the top-k sum): each stage alone, the incumbent (serial), the fused combine and a
 * chunked overlap of the combine under the next chunk's GEMMs, overlap efficiency, GEMM
 * throughput against the card's measured bf16 matrix rate, and the top-k weighted sum's
 * bandwidth against the copy kernel. The three totals are the registered variants
 * (kernels/moe_cuda.c); the stages are their launchers one by one. Every timed thing is captured in a CUDA graph and
 * replayed; times are means over replays (CUDA events).
 * usage: bench_moe [ITERS [FAMILY]]   (defaults 20, all; FAMILY: mixtral|minimax|deepseek) */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "kernels/catalog_internal.h"
#include "kernels/moe_cuda.h"
#include "kernels/moe_internal.h"
}

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define CB(x)                                                                              \
    do {                                                                                   \
        cublasStatus_t b_ = (x);                                                           \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                     \
                    cublasGetStatusString(b_));                                            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define KB(x)                                                                              \
    do {                                                                                   \
        bk_err e_ = {};                                                                    \
        if ((x) != BK_OK) {                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, e_.msg);                    \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static int g_iters = 20;
static cudaStream_t g_s, g_s2;
static cublasHandle_t g_blas;

/* Uniform bf16 in [-a, a) from a hash of the index: timing inputs, not the seeded ones. */
__global__ void fill_kernel(uint16_t *p, size_t n, float a, uint32_t salt)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ salt;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        float f = a * ((float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f);
        uint32_t u;
        memcpy(&u, &f, 4);
        p[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

/* Mean time (us) of one replay of what `fn` enqueues on g_s (captured as a graph). */
template <class F> static double time_graph(F fn)
{
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaEvent_t a, b;
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
    fn();
    CK(cudaStreamEndCapture(g_s, &g));
    CK(cudaGraphInstantiate(&ex, g, 0));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        CK(cudaGraphLaunch(ex, g_s));
    CK(cudaEventRecord(a, g_s));
    for (int i = 0; i < g_iters; i++)
        CK(cudaGraphLaunch(ex, g_s));
    CK(cudaEventRecord(b, g_s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaGraphExecDestroy(ex));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return ms * 1e3 / g_iters;
}

/* One token range's routing and workspace (rows of this range only). */
struct part {
    int64_t t0, tn;
    std::vector<int64_t> off; /* host offsets [E + 1] */
    int32_t *counts, *cursor, *offsets, *row_of;
    uint16_t *xp, *gu, *act, *y;
};

struct problem {
    bk_shape s;
    uint16_t *x, *w1, *w2, *res, *out;
    int32_t *ids;
    float *w;
    std::vector<int32_t> h_ids;
};

static void part_init(part &p, const problem &pb, int64_t t0, int64_t tn)
{
    const bk_shape &s = pb.s;
    size_t tk = (size_t)(tn * s.topk), h = (size_t)s.hidden, in = (size_t)s.intermediate;
    p.t0 = t0;
    p.tn = tn;
    p.off.assign((size_t)s.experts + 1, 0);
    for (int64_t a = t0 * s.topk; a < (t0 + tn) * s.topk; a++)
        p.off[(size_t)pb.h_ids[(size_t)a] + 1]++;
    for (int64_t j = 0; j < s.experts; j++)
        p.off[(size_t)j + 1] += p.off[(size_t)j];
    CK(cudaMalloc(&p.counts, ((size_t)s.experts + 1) * 4));
    CK(cudaMalloc(&p.cursor, ((size_t)s.experts + 1) * 4));
    CK(cudaMalloc(&p.offsets, ((size_t)s.experts + 1) * 4));
    CK(cudaMalloc(&p.row_of, tk * 4));
    CK(cudaMalloc(&p.xp, tk * h * 2));
    CK(cudaMalloc(&p.gu, tk * 2 * in * 2));
    CK(cudaMalloc(&p.act, tk * in * 2));
    CK(cudaMalloc(&p.y, tk * h * 2));
}

static void part_free(part &p)
{
    void *d[] = { p.counts, p.cursor, p.offsets, p.row_of, p.xp, p.gu, p.act, p.y };
    for (void *q : d)
        CK(cudaFree(q));
}

static void gemm(const part &p, const uint16_t *a, const uint16_t *w, uint16_t *c, int64_t n,
                 int64_t k, int64_t experts)
{
    const float one = 1.0f, zero = 0.0f;
    for (int64_t j = 0; j < experts; j++) {
        int64_t r0 = p.off[(size_t)j], rows = p.off[(size_t)j + 1] - r0;
        if (rows)
            CB(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one,
                            w + (size_t)j * n * k, CUDA_R_16BF, (int)k, a + (size_t)r0 * k,
                            CUDA_R_16BF, (int)k, &zero, c + (size_t)r0 * n, CUDA_R_16BF, (int)n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

static void stage_route(const part &p, const problem &pb, cudaStream_t s)
{
    const bk_shape &sh = pb.s;
    KB(bk_moe_route(pb.ids + p.t0 * sh.topk, pb.x + p.t0 * sh.hidden, p.tn, sh.topk, sh.hidden,
                    0, 1, sh.experts, p.counts, p.cursor, p.offsets, p.row_of, p.xp, s, &e_));
}
static void stage_gemm1(const part &p, const problem &pb, cudaStream_t s)
{
    CB(cublasSetStream(g_blas, s));
    gemm(p, p.xp, pb.w1, p.gu, 2 * pb.s.intermediate, pb.s.hidden, pb.s.experts);
}
static void stage_silu(const part &p, const problem &pb, cudaStream_t s)
{
    KB(bk_moe_silu_mul(p.gu, p.act, p.off.back(), pb.s.intermediate, s, &e_));
}
static void stage_gemm2(const part &p, const problem &pb, cudaStream_t s)
{
    CB(cublasSetStream(g_blas, s));
    gemm(p, p.act, pb.w2, p.y, pb.s.hidden, pb.s.intermediate, pb.s.experts);
}
static void stage_combine(const part &p, const problem &pb, const uint16_t *res, cudaStream_t s)
{
    const bk_shape &sh = pb.s;
    KB(bk_moe_combine(p.y, p.row_of, pb.w + p.t0 * sh.topk, res ? res + p.t0 * sh.hidden : NULL,
                      pb.out + p.t0 * sh.hidden, p.tn, sh.topk, sh.hidden, s, &e_));
}
static void stage_residual(const problem &pb, cudaStream_t s)
{
    KB(bk_moe_add_residual(pb.out, pb.res, (size_t)(pb.s.tokens * pb.s.hidden), s, &e_));
}
static void compute(const part &p, const problem &pb, cudaStream_t s)
{
    stage_route(p, pb, s);
    stage_gemm1(p, pb, s);
    stage_silu(p, pb, s);
    stage_gemm2(p, pb, s);
}

/* Mean time (us) of one call of a registered variant, captured after an eager warm-up. */
static double median3(const double *v)
{
    double a = v[0], b = v[1], c = v[2];
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

static double time_variant(const char *name, const problem &pb, const char *params_json)
{
    const bk_variant *v = bk_catalog_variant(BK_MOE_TARGET, name);
    bk_tensor t[BK_MOE_NT] = {};
    const bk_target *tg = &bk__moe_target;
    void *ptr[BK_MOE_NT] = { pb.x, pb.ids, pb.w, pb.w1, pb.w2, pb.res, pb.out };
    void *state = NULL;
    json_t *params = json_loads(params_json, 0, NULL);
    for (int i = 0; i < BK_MOE_NT; i++) {
        t[i].name = tg->tensor_names[i];
        t[i].output = tg->tensor_is_output[i];
        t[i].elems = tg->tensor_elems(&pb.s, 1, i);
        t[i].elem_bytes = tg->tensor_elem_bytes(i);
        t[i].data = ptr[i];
    }
    bk_call call = {};
    call.shape = &pb.s;
    call.iter = -1;
    call.world = 1;
    call.t = t;
    call.nt = BK_MOE_NT;
    call.stream = g_s;
    call.timeout_s = 30.0;
    if (!v || !params)
        exit(1);
    KB(v->create(params, BK_BACKEND_CUDA, 0, 1, &state, &e_));
    KB(v->run(state, &call, &e_));
    CK(cudaStreamSynchronize(g_s));
    /* a capture the variant refuses is reported and timed eagerly instead (negative) */
    bk_err err = {};
    cudaGraph_t g = NULL;
    CK(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeThreadLocal));
    bk_status st = v->run(state, &call, &err);
    cudaError_t ce = cudaStreamEndCapture(g_s, &g);
    if (g)
        CK(cudaGraphDestroy(g));
    double us;
    if (st == BK_OK && ce == cudaSuccess) {
        us = time_graph([&] { KB(v->run(state, &call, &e_)); });
    } else {
        (void)cudaGetLastError();
        fprintf(stderr, "bench_moe: %s does not capture (%s / %s): timed eagerly\n", name,
                err.msg, cudaGetErrorString(ce));
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaEventRecord(a, g_s));
        for (int i = 0; i < g_iters; i++)
            KB(v->run(state, &call, &e_));
        CK(cudaEventRecord(b, g_s));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        us = -ms * 1e3 / g_iters;
    }
    v->destroy(state);
    json_decref(params);
    return us;
}

static void problem_init(problem &pb, const bk_shape &s, uint16_t *w1, uint16_t *w2)
{
    const bk_target *tg = &bk__moe_target;
    size_t n = (size_t)(s.tokens * s.hidden), tk = (size_t)(s.tokens * s.topk);
    bk_tensor t[BK_MOE_NT] = {};
    std::vector<uint16_t> hx(n), hres(n);
    std::vector<float> hw(tk);
    pb.s = s;
    pb.h_ids.assign(tk, 0);
    t[BK_MOE_X].data = hx.data();
    t[BK_MOE_RESIDUAL].data = hres.data();
    t[BK_MOE_IDS].data = pb.h_ids.data();
    t[BK_MOE_W].data = hw.data();
    tg->init_inputs(t, &s, 1, 0, 0, 1); /* w1, w2 NULL: filled on the device */
    CK(cudaMalloc(&pb.x, n * 2));
    CK(cudaMalloc(&pb.res, n * 2));
    CK(cudaMalloc(&pb.out, n * 2));
    CK(cudaMalloc(&pb.ids, tk * 4));
    CK(cudaMalloc(&pb.w, tk * 4));
    CK(cudaMemcpy(pb.x, hx.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pb.res, hres.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pb.ids, pb.h_ids.data(), tk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pb.w, hw.data(), tk * 4, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize()); /* legacy-stream uploads vs g_s (non-blocking) */
    pb.w1 = w1;
    pb.w2 = w2;
}

static void problem_free(problem &pb)
{
    void *d[] = { pb.x, pb.res, pb.out, pb.ids, pb.w };
    for (void *q : d)
        CK(cudaFree(q));
}

/* The card's bf16 matrix rate (TFLOP/s) on an 8192^3 cuBLAS GEMM. */
static double peak_tflops(void)
{
    const int n = 8192;
    uint16_t *a, *b, *c;
    CK(cudaMalloc(&a, (size_t)n * n * 2));
    CK(cudaMalloc(&b, (size_t)n * n * 2));
    CK(cudaMalloc(&c, (size_t)n * n * 2));
    fill_kernel<<<1024, 256>>>(a, (size_t)n * n, 0.1f, 1);
    fill_kernel<<<1024, 256>>>(b, (size_t)n * n, 0.1f, 2);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize()); /* legacy-stream fills vs g_s */
    CB(cublasSetStream(g_blas, g_s));
    const float one = 1.0f, zero = 0.0f;
    double us = time_graph([&] {
        CB(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
                        CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    });
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    return 2.0 * n * (double)n * n / (us * 1e-6) / 1e12;
}

/* The copy kernel's rate (TB/s, bytes read + written) on 1 GiB. */
static double copy_tbs(void)
{
    size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 0, bytes));
    CK(cudaDeviceSynchronize()); /* the legacy-stream memset must not overlap the timing */
    double us = time_graph([&] { KB(bk_moe_copy(a, b, bytes, g_s, &e_)); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * (double)bytes / (us * 1e-6) / 1e12;
}

struct family {
    const char *name;
    int64_t hidden, experts, topk, inter;
};

static void run_family(const family &f, double peak, double copy)
{
    static const int64_t toks[] = { 1, 16, 64, 256, 1024, 4096, 16384 };
    size_t n1 = (size_t)f.experts * 2 * f.inter * f.hidden, n2 = (size_t)f.experts * f.hidden * f.inter;
    uint16_t *w1, *w2;
    CK(cudaMalloc(&w1, n1 * 2));
    CK(cudaMalloc(&w2, n2 * 2));
    fill_kernel<<<4096, 256>>>(w1, n1, sqrtf(3.0f / f.hidden), 11);
    fill_kernel<<<4096, 256>>>(w2, n2, sqrtf(3.0f / f.inter), 12);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize()); /* legacy-stream fills vs g_s */
    for (int64_t t : toks) {
        bk_shape s = {};
        s.tokens = t;
        s.hidden = f.hidden;
        s.experts = f.experts;
        s.topk = f.topk;
        s.intermediate = f.inter;
        problem pb;
        problem_init(pb, s, w1, w2);
        part whole;
        part_init(whole, pb, 0, t);
        double r = time_graph([&] { stage_route(whole, pb, g_s); });
        double g1 = time_graph([&] { stage_gemm1(whole, pb, g_s); });
        double si = time_graph([&] { stage_silu(whole, pb, g_s); });
        double g2 = time_graph([&] { stage_gemm2(whole, pb, g_s); });
        double cb = time_graph([&] { stage_combine(whole, pb, NULL, g_s); });
        double rs = time_graph([&] { stage_residual(pb, g_s); });
        double tc = time_graph([&] { compute(whole, pb, g_s); });
        double tr = time_graph([&] {
            stage_combine(whole, pb, NULL, g_s);
            stage_residual(pb, g_s);
        });
        /* the three variants in alternation, three rounds with the order rotated, median
         * of each: a clock or power swing, or a position in the round, moves all three
         * alike */
        static const char *names[3] = { "moe_serial_cuda", "moe_fused_combine_cuda",
                                        "moe_chunked_overlap_cuda" };
        double tv[3][3];
        for (int rd = 0; rd < 3; rd++)
            for (int j = 0; j < 3; j++) { /* each variant once in each position */
                const int v = (j + rd) % 3;
                tv[v][rd] = time_variant(names[v], pb, "{}");
            }
        double ser = median3(tv[0]), fus = median3(tv[1]), chk = median3(tv[2]);
        double mn = tc < tr ? tc : tr;
        double flops = 2.0 * t * f.topk * (3.0 * f.inter * f.hidden);
        double cbytes = (double)t * f.hidden * 2.0 * (f.topk + 1);
        const double tf = flops / ((g1 + g2) * 1e-6) / 1e12;
        printf("| %s | %lld | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | "
               "%.1f | %.3f | %.1f%% | %.2f | %.2f | %.0f (%.0f%%) | %.0f%% |\n",
               f.name, (long long)t, r, g1, si, g2, cb, rs, ser, fus, ser / fus, chk, ser / chk,
               100.0 * tr / ser, (tc + tr - fus) / mn, (tc + tr - chk) / mn, tf,
               100.0 * tf / peak, 100.0 * cbytes / (cb * 1e-6) / 1e12 / copy);
        fflush(stdout);
        part_free(whole);
        problem_free(pb);
    }
    CK(cudaFree(w1));
    CK(cudaFree(w2));
}

/* The top-k weighted sum alone (no residual) at K 8, H 6144, rows in token order: once
 * with the same inputs every call ("same": what fits in L2 stays there) and once cycling
 * through enough copies of y that they exceed three L2s ("rotated", as bench_rmsnorm; out is
 * one buffer, written every call). */
static void combine_table(double copy)
{
    static const int64_t toks[] = { 64, 256, 1024, 4096, 16384 };
    const int64_t k = 8, h = 6144;
    int l2 = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    printf("\n| tokens | K | H | combine us (same) | %% of copy | combine us (rotated) | sets | "
           "%% of copy |\n|---|---|---|---|---|---|---|---|\n");
    for (int64_t t : toks) {
        size_t tk = (size_t)(t * k);
        const size_t ybytes = tk * (size_t)h * 2;
        int sets = (int)((3 * (size_t)l2 + ybytes - 1) / ybytes);
        sets = sets < 1 ? 1 : sets > 16 ? 16 : sets;
        std::vector<uint16_t *> y(sets);
        uint16_t *out;
        int32_t *row_of;
        float *w;
        std::vector<int32_t> hr(tk);
        std::vector<float> hw(tk, 1.0f / k);
        for (size_t i = 0; i < tk; i++)
            hr[i] = (int32_t)i;
        for (int i = 0; i < sets; i++) {
            CK(cudaMalloc(&y[i], ybytes));
            fill_kernel<<<4096, 256>>>(y[i], tk * h, 1.0f, 5 + i);
            CK(cudaGetLastError());
        }
        CK(cudaMalloc(&out, (size_t)t * h * 2));
        CK(cudaMalloc(&row_of, tk * 4));
        CK(cudaMalloc(&w, tk * 4));
        CK(cudaMemcpy(row_of, hr.data(), tk * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(w, hw.data(), tk * 4, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize()); /* fill_kernel and the uploads vs g_s */
        double same = time_graph([&] { KB(bk_moe_combine(y[0], row_of, w, NULL, out, t, k, h, g_s, &e_)); });
        double rot = time_graph([&] {
                         for (int i = 0; i < sets; i++)
                             KB(bk_moe_combine(y[i], row_of, w, NULL, out, t, k, h, g_s, &e_));
                     }) / sets;
        const double bytes = (double)t * h * 2.0 * (k + 1);
        printf("| %lld | %lld | %lld | %.1f | %.0f%% | %.1f | %d | %.0f%% |\n", (long long)t,
               (long long)k, (long long)h, same, 100.0 * bytes / (same * 1e-6) / 1e12 / copy,
               rot, sets, 100.0 * bytes / (rot * 1e-6) / 1e12 / copy);
        for (int i = 0; i < sets; i++)
            CK(cudaFree(y[i]));
        CK(cudaFree(out));
        CK(cudaFree(row_of));
        CK(cudaFree(w));
    }
}

int main(int argc, char **argv)
{
    static const family fams[] = {
        { "mixtral", 4096, 8, 2, 1792 },
        { "minimax", 6144, 32, 2, 1536 },
        { "deepseek", 7168, 256, 8, 2048 },
    };
    g_iters = argc > 1 ? atoi(argv[1]) : 20;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (g_iters < 1) {
        fprintf(stderr, "usage: bench_moe [ITERS [mixtral|minimax|deepseek]]\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&g_s2, cudaStreamNonBlocking));
    CB(cublasCreate(&g_blas));
    void *ws;
    CK(cudaMalloc(&ws, 32u << 20));
    CB(cublasSetWorkspace(g_blas, ws, 32u << 20));
    double peak = peak_tflops(), copy = copy_tbs();
    printf("device: %s; bf16 GEMM 8192^3: %.0f TFLOP/s; copy kernel: %.2f TB/s; %d replays "
           "per graph\n\n", prop.name, peak, copy, g_iters);
    printf("| family | T | route | gemm1 | silu | gemm2 | combine | +res | serial | fused | "
           "x | chunked | x | reduce share | eff fused | eff chunked | GEMM TF/s (%% of peak) | "
           "combine %% copy |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const family &f : fams)
        if (!only || !strcmp(only, f.name))
            run_family(f, peak, copy);
    combine_table(copy);
    printf("\n(times in us; x = serial / candidate; eff = (t_compute + t_reduce - t_cand) / "
           "min(t_compute, t_reduce), t_reduce = combine + residual add; reduce share = t_reduce / "
           "serial; GEMM TF/s of %.0f measured; chunked with its default params; variant totals: median of 3 alternating rounds)\n", peak);
    CB(cublasDestroy(g_blas));
    return 0;
}
