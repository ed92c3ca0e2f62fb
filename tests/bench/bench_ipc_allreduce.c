/* bench_ipc_allreduce.c - allreduce + residual + RMSNorm across GPUs: nccl_then_rmsnorm
 * against ipc_oneshot_fused and ipc_twoshot_fused, one forked process per GPU, graph mode.
 *
 *   bench_ipc_allreduce [--world N] [--hidden H] [--max-tokens T] [--shared-gpu]
 *
 * Needs N GPUs (rank r on GPU r); --shared-gpu puts every rank on GPU 0 for a smoke test
 * (the GPU time-slices the processes: correctness only, the times mean nothing, and NCCL
 * is skipped). Method: two input sets per shape, alternated; a 64 MiB memset (the GPU
 * busy while the host queues the rest), a lane barrier, then one CUDA graph of CALLS
 * back-to-back calls, timed with events; median of REPLAYS replays / CALLS per rank; the
 * table shows the slowest rank (the critical path), "-" where any rank did not run it.
 * Every variant's outputs are checked against float64 before timing (one eager call) and
 * after it (both sets, as the graph left them; the IPC variants' bitwise equal to eager).
 * Inputs and references are made once per row. The IPC variants are skipped, saying why,
 * where the lane has no peer memory. Calls chain with programmatic dependent launch unless
 * BK_CUDA_PDL=0 (the header says which): in a model the kernel before the allreduce does
 * not release early. A cell past the variant's domain (catalog) is marked *. Bytes and
 * bandwidth as nccl-tests: algbw = T x H x 2 bytes / time, busbw = algbw x 2(n-1)/n; time is
 * allreduce + norm, so NCCL's busbw here is below all_reduce_perf's. The header names the
 * GPU, driver, runtime, NCCL, date and command. Rows done before a failure are printed
 * (then exit 1). At world 2 and up on GPUs of their own, a summary against the goals
 * follows the table (ipc_summary.h). Not yet run on several GPUs (only one-GPU machines
 * were lent when it was written). */

#ifndef BK_HAVE_CUDA
/* Built without the CUDA toolkit: nothing to run. */
#include <stdio.h>

int main(void)
{
    printf("SKIP: no CUDA device: this build has no CUDA (BK_CUDA=OFF or no toolkit)\n");
    return 77;
}
#else
#include <getopt.h>
#include <jansson.h>
#include <nccl.h>
#include <time.h>

#include "../gpu/lane_call.h"
#include "ipc_summary.h"

#define CALLS 32
#define REPLAYS 10
#define DELAY_BYTES (64u << 20) /* a memset before each replay's barrier: ~16 us of GPU work */
#define NVAR 3 /* nccl_then_rmsnorm, ipc_oneshot_fused, ipc_twoshot_fused: ipc_summary.h */
_Static_assert(NVAR == IPC_NVAR, "the summary reads the table in its variants' order");
#define MAX_ROWS 32

typedef struct bench_arg {
    int64_t hidden, max_tokens;
    int shared_gpu;
} bench_arg;

/* us[row][variant][rank] in the shared page. */
#define US(shm, row, v, r) ((shm)->us[(row) * NVAR + (v)][r])

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static bk_status time_variant(const bk_variant *v, bk_cuda_comm *comm, lane_tensors *lt,
                              void *delay, double *us, bk_err *err)
{
    bk_status st = BK_OK;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float t[REPLAYS];
    cudaStream_t s = lt[0].stream;
    bk_cuda_comm_defer_abort(comm, 1); /* no NCCL abort while the graph holds its calls */
    LT_CUDA(cudaEventCreate(&a), "event");
    LT_CUDA(cudaEventCreate(&b), "event");
    LT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < CALLS && st == BK_OK; i++) {
        lane_tensors *x = &lt[i % 2];
        bk_call call = {.shape = &x->shape, .iter = i, .rank = comm->rank, .world = comm->world,
                        .t = x->t, .nt = 5, .comm = comm, .stream = s, .timeout_s = 10};
        st = v->run(NULL, &call, err);
    }
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (st != BK_OK)
        goto out;
    LT_CUDA(e, "end capture");
    LT_CUDA(cudaGraphInstantiate(&ex, g, 0), "instantiate");
    for (int r = -1; r < REPLAYS; r++) { /* r = -1: warm-up */
        /* the GPU busy while the host queues barrier, event and graph: on the last rank to
         * arrive, the barrier ends at once, and `a` must not be stamped before the graph
         * is even queued */
        LT_CUDA(cudaMemsetAsync(delay, r & 0xff, DELAY_BYTES, s), "delay");
        if ((st = bk_cuda_comm_barrier(comm, s, 10, err)) != BK_OK)
            goto out;
        LT_CUDA(cudaEventRecord(a, s), "record");
        LT_CUDA(cudaGraphLaunch(ex, s), "launch");
        LT_CUDA(cudaEventRecord(b, s), "record");
        if ((st = bk_cuda_comm_wait(comm, b, 30, err)) != BK_OK)
            goto out;
        if (r >= 0)
            LT_CUDA(cudaEventElapsedTime(&t[r], a, b), "elapsed");
    }
    qsort(t, REPLAYS, sizeof(float), cmp_f);
    *us = 0.5 * (t[REPLAYS / 2 - 1] + t[REPLAYS / 2]) * 1e3 / CALLS;
out:
    if (ex)
        cudaGraphExecDestroy(ex);
    if (g)
        cudaGraphDestroy(g);
    bk_cuda_comm_defer_abort(comm, 0); /* a due abort, now that the graph is gone */
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return st;
}

/* Both sets' outputs poisoned (every element written by a call, or the check fails). */
static bk_status poison(lane_tensors *lt, bk_err *err)
{
    const size_t n = (size_t)lt->tokens * lt->hidden;
    for (int i = 3; i < 5; i++)
        LT_CUDA(cudaMemset(lt->t[i].data, 0xFF, n * 2), "poison");
    LT_CUDA(cudaDeviceSynchronize(), "sync");
    return BK_OK;
}

static int bench_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const bench_arg *arg = argp;
    const bk_variant *vars[NVAR] = {&bk_variant_nccl_then_rmsnorm, &bk_variant_ipc_oneshot_fused,
                                    &bk_variant_ipc_twoshot_fused};
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    void *delay = NULL;
    int row = 0;
    lane_tensors lt[2];
    memset(lt, 0, sizeof(lt));
    bk_err_clear(err);
    const char *pdl = getenv("BK_CUDA_PDL");
    if (pdl && !strcmp(pdl, "0"))
        bk_cuda_pdl_set(0);
    BK_TRY(lane_comm_up(shm, rank, world, arg->shared_gpu ? 0 : rank,
                        bk_ar_rmsnorm_cuda_peer_bytes(arg->max_tokens, arg->hidden), 60, &comm,
                        err));
    if (rank == 0 && !comm->have_p2p)
        fprintf(stderr, "note: the IPC variants are skipped: no peer memory (%s)\n",
                comm->p2p_why);
    if (cudaMalloc(&delay, DELAY_BYTES) != cudaSuccess) {
        delay = NULL;
        st = BK_FAIL(err, BK_ERR_SYSTEM, "cudaMalloc of the delay buffer failed");
        goto out;
    }
    for (int64_t T = 1; T <= arg->max_tokens && row < MAX_ROWS; T *= 2, row++) {
        for (int k = 0; k < 2; k++) {
            BK_TRY(lt_alloc(&lt[k], T, arg->hidden, err));
            BK_TRY(lt_inputs(&lt[k], 77 + (uint64_t)k, rank, world, err));
        }
        for (int v = 0; v < NVAR; v++) {
            uint64_t eager = 0, graph = 0;
            const double rtol = v ? 8e-3 : 2e-2, atol = v ? 1e-3 : 2e-2;
            US(shm, row, v, rank) = -1;
            if (v == 0 && !comm->nccl)
                continue; /* NCCL refuses ranks sharing a GPU */
            if (v > 0 && !comm->have_p2p)
                continue;
            BK_TRY(poison(&lt[0], err));
            BK_TRY(poison(&lt[1], err));
            /* a 60 s bound: a peer may still be making its float64 reference */
            BK_TRY(lt_call(&lt[0], vars[v], comm, 0, 1, 60, err));
            BK_TRY(lt_check(&lt[0], vars[v]->name, rtol, atol, !v, &eager, err));
            double us = -1;
            BK_TRY(time_variant(vars[v], comm, lt, delay, &us, err));
            BK_TRY(lt_check(&lt[1], vars[v]->name, rtol, atol, !v, &graph, err));
            BK_TRY(lt_check(&lt[0], vars[v]->name, rtol, atol, !v, &graph, err));
            if (v > 0 && graph != eager) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s at %lld tokens: graph replay's outputs "
                             "differ from the eager call's", vars[v]->name, (long long)T);
                goto out;
            }
            US(shm, row, v, rank) = us; /* a time only for outputs that passed */
        }
        lt_free(&lt[0]);
        lt_free(&lt[1]);
        memset(lt, 0, sizeof(lt));
        if (rank == 0)
            __atomic_store_n(&shm->nhash, row + 1, __ATOMIC_RELEASE); /* rows to print */
    }
out:
    lane_wait_done(shm, rank, 120);
    lt_free(&lt[0]);
    lt_free(&lt[1]);
    if (delay)
        cudaFree(delay);
    bk_cuda_comm_destroy(comm);
    if (st != BK_OK)
        snprintf(shm->msg[rank], sizeof(shm->msg[rank]), "rank %d: %s [%s]", rank, err->msg,
                 err->trail);
    return st == BK_OK ? 0 : 1;
}

/* What this machine is, for the table's header: GPU 0's name, driver, runtime, NCCL. Found
 * in a child: the parent must not initialise CUDA before forking. */
typedef struct machine {
    int ngpu;
    char what[224];
} machine;

static void machine_probe(machine *m)
{
    int fd[2];
    memset(m, 0, sizeof *m);
    if (pipe(fd) != 0)
        return;
    pid_t p = fork();
    if (p == 0) {
        machine c;
        memset(&c, 0, sizeof c);
        struct cudaDeviceProp prop;
        int drv = 0, rt = 0, nccl = 0;
        (void)cudaGetDeviceCount(&c.ngpu);
        if (c.ngpu <= 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
            snprintf(prop.name, sizeof prop.name, "?");
        (void)cudaDriverGetVersion(&drv);
        (void)cudaRuntimeGetVersion(&rt);
        (void)ncclGetVersion(&nccl);
        snprintf(c.what, sizeof c.what, "%d x %.96s, driver API %d.%d, runtime %d.%d, NCCL "
                 "%d.%d.%d",
                 c.ngpu, prop.name, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
                 nccl / 10000, nccl / 100 % 100, nccl % 100);
        _exit(write(fd[1], &c, sizeof c) == sizeof c ? 0 : 1);
    }
    close(fd[1]);
    if (p < 0 || read(fd[0], m, sizeof *m) != sizeof *m)
        memset(m, 0, sizeof *m);
    close(fd[0]);
    if (p > 0)
        waitpid(p, NULL, 0);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"world", required_argument, 0, 'w'},
                                         {"hidden", required_argument, 0, 'H'},
                                         {"max-tokens", required_argument, 0, 't'},
                                         {"shared-gpu", no_argument, 0, 's'},
                                         {0, 0, 0, 0}};
    bench_arg arg = {.hidden = 8192, .max_tokens = 4096, .shared_gpu = 0};
    int world = 2, c, ndev = 0;
    char why[256];
    while ((c = getopt_long(argc, argv, "w:H:t:s", opts, NULL)) != -1) {
        if (c == 'w')
            world = atoi(optarg);
        else if (c == 'H')
            arg.hidden = atoll(optarg);
        else if (c == 't')
            arg.max_tokens = atoll(optarg);
        else if (c == 's')
            arg.shared_gpu = 1;
        else {
            fprintf(stderr, "usage: %s [--world N (2)] [--hidden H (8192)] [--max-tokens T "
                    "(4096)] [--shared-gpu]\n", argv[0]);
            return 2;
        }
    }
    if (world < 1 || world > BK_IPC_MAX_WORLD || arg.hidden <= 0 || arg.hidden % 8 ||
        arg.max_tokens < 1) {
        fprintf(stderr, "bad --world (1..%d), --hidden (multiple of 8) or --max-tokens\n",
                BK_IPC_MAX_WORLD);
        return 2;
    }
    if (!lane_probe(why, sizeof(why))) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    machine mach;
    machine_probe(&mach);
    ndev = mach.ngpu;
    if (!arg.shared_gpu && ndev < world) {
        printf("SKIP: --world %d needs %d GPUs, this machine has %d (--shared-gpu for a smoke "
               "test)\n", world, world, ndev);
        return 77;
    }
    lane_shm *shm = lane_map();
    if (!shm)
        return 1;
    /* 300 s: a run takes about a minute at world 8 x hidden 8192 x 8192 tokens (mostly
     * the float64 references on the host); a hang must not take a short loan with it */
    int failed = lane_run(shm, world, bench_rank, &arg, 300);
    for (int r = 0; r < world; r++)
        if (shm->msg[r][0])
            fprintf(stderr, "%s\n", shm->msg[r]);
    const double bus = world > 1 ? 2.0 * (world - 1) / world : 0.0;
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("%s; %s; NCCL_NVLS_ENABLE=0; programmatic dependent launch %s\n", mach.what, when,
           getenv("BK_CUDA_PDL") && !strcmp(getenv("BK_CUDA_PDL"), "0") ? "off" : "on");
    printf("command:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\nworld %d, hidden %lld, %s; us = allreduce + norm, slowest rank, median of %d "
           "graph replays / %d calls; * past the variant's domain\n", world,
           (long long)arg.hidden, arg.shared_gpu ? "SHARED GPU (times meaningless)"
                                                : "one GPU per rank", REPLAYS, CALLS);
    printf("%6s %10s | %9s %7s %7s | %9s %7s %7s | %9s %7s %7s | %s\n", "tokens", "bytes",
           "nccl us", "algbw", "busbw", "1shot us", "algbw", "busbw", "2shot us", "algbw",
           "busbw", "fastest");
    static const char *const short_name[NVAR] = {"nccl", "1shot", "2shot"};
    const bk_variant *vars[NVAR] = {&bk_variant_nccl_then_rmsnorm, &bk_variant_ipc_oneshot_fused,
                                    &bk_variant_ipc_twoshot_fused};
    double table[MAX_ROWS * NVAR]; /* the slowest rank's us, for the summary */
    const int rows = __atomic_load_n(&shm->nhash, __ATOMIC_ACQUIRE);
    int64_t T = 1;
    for (int row = 0; row < rows; row++, T *= 2) {
        const double bytes = (double)T * arg.hidden * 2;
        int best = -1;
        printf("%6lld %10.0f", (long long)T, bytes);
        for (int v = 0; v < NVAR; v++) {
            double us = -1;
            for (int r = 0; r < world; r++) {
                const double x = US(shm, row, v, r);
                if (x <= 0) { /* this rank did not run it: no time for the lane */
                    us = -1;
                    break;
                }
                if (x > us)
                    us = x;
            }
            table[row * NVAR + v] = us;
            const int past = vars[v]->domain.max_tokens && T > vars[v]->domain.max_tokens;
            if (us <= 0) {
                printf(" | %9s %7s %7s", "-", "-", "-");
                continue;
            }
            if (best < 0 || us < table[row * NVAR + best])
                best = v;
            printf(" | %8.2f%c %7.1f %7.1f", us, past ? '*' : ' ', bytes / us / 1e3,
                   bytes / us / 1e3 * bus);
        }
        printf(" | %s\n", best >= 0 ? short_name[best] : "-");
    }
    if (failed) {
        printf("FAILED after %d row(s): the rows above are complete; see the rank errors "
               "above\n", rows);
        return 1;
    }
    if (world > 1 && !arg.shared_gpu) { /* at world 1 or on a shared GPU: nothing to judge */
        ipc_summary sum;
        ipc_summarize(table, rows, &sum);
        ipc_summary_print(stdout, &sum, world, (long long)arg.hidden);
    }
    return 0;
}

#endif /* BK_HAVE_CUDA */
