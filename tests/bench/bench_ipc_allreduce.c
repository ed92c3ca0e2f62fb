/* bench_ipc_allreduce.c - allreduce + residual + RMSNorm across GPUs: nccl_then_rmsnorm
 * against ipc_oneshot_fused and ipc_twoshot_fused, one forked process per GPU, graph mode.
 *
 *   bench_ipc_allreduce [--world N] [--hidden H] [--max-tokens T] [--shared-gpu]
 *
 * Needs N GPUs (rank r on GPU r); --shared-gpu puts every rank on GPU 0 for a smoke test
 * (the GPU time-slices the processes: correctness only, the times mean nothing, and NCCL
 * is skipped). Method: two input sets per shape, alternated; a lane barrier, then one
 * CUDA graph of CALLS back-to-back calls, timed with events; median of REPLAYS replays /
 * CALLS per rank; the table shows the slowest rank (the critical path). Every variant's
 * outputs are checked against float64 once per shape before timing. Bytes and bandwidth as
 * nccl-tests: algbw = T x H x 2 bytes / time, busbw = algbw x 2(n-1)/n. At world 2 and up
 * on GPUs of their own, a summary against the goals follows the table (ipc_summary.h).
 * Not yet run on several GPUs (only one-GPU machines were lent when it was written). */

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

#include "../gpu/lane_call.h"
#include "ipc_summary.h"

#define CALLS 32
#define REPLAYS 10
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
                              double *us, bk_err *err)
{
    bk_status st = BK_OK;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float t[REPLAYS];
    cudaStream_t s = lt[0].stream;
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
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return st;
}

static int bench_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const bench_arg *arg = argp;
    const bk_variant *vars[NVAR] = {&bk_variant_nccl_then_rmsnorm, &bk_variant_ipc_oneshot_fused,
                                    &bk_variant_ipc_twoshot_fused};
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    int row = 0;
    bk_err_clear(err);
    BK_TRY(lane_comm_up(shm, rank, world, arg->shared_gpu ? 0 : rank,
                        bk_ar_rmsnorm_cuda_peer_bytes(arg->max_tokens, arg->hidden), 60, &comm,
                        err));
    for (int64_t T = 1; T <= arg->max_tokens && row < MAX_ROWS; T *= 2, row++) {
        lane_tensors lt[2];
        memset(lt, 0, sizeof(lt));
        for (int k = 0; k < 2; k++)
            BK_TRY(lt_alloc(&lt[k], T, arg->hidden, err));
        for (int v = 0; v < NVAR; v++) {
            uint64_t h;
            US(shm, row, v, rank) = -1;
            if (v == 0 && !comm->nccl)
                continue; /* NCCL refuses ranks sharing a GPU */
            for (int k = 1; k >= 0; k--)
                BK_TRY(lt_inputs(&lt[k], 77 + (uint64_t)k, rank, world, err));
            BK_TRY(lt_call(&lt[0], vars[v], comm, 0, 1, 10, err));
            BK_TRY(lt_check(&lt[0], vars[v]->name, v ? 8e-3 : 2e-2, v ? 1e-3 : 2e-2, !v, &h,
                            err));
            BK_TRY(time_variant(vars[v], comm, lt, &US(shm, row, v, rank), err));
        }
        lt_free(&lt[0]);
        lt_free(&lt[1]);
    }
    shm->nhash = row;
out:
    lane_wait_done(shm, rank, 120);
    bk_cuda_comm_destroy(comm);
    if (st != BK_OK)
        snprintf(shm->msg[rank], sizeof(shm->msg[rank]), "rank %d: %s [%s]", rank, err->msg,
                 err->trail);
    return st == BK_OK ? 0 : 1;
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
    /* Count GPUs in a child too: the parent must not initialise CUDA before forking. */
    {
        int fd[2];
        if (pipe(fd) != 0)
            return 1;
        pid_t p = fork();
        if (p == 0) {
            int n = 0;
            (void)cudaGetDeviceCount(&n);
            _exit(write(fd[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
        }
        close(fd[1]);
        if (read(fd[0], &ndev, sizeof(ndev)) != sizeof(ndev))
            ndev = 0;
        close(fd[0]);
        waitpid(p, NULL, 0);
    }
    if (!arg.shared_gpu && ndev < world) {
        printf("SKIP: --world %d needs %d GPUs, this machine has %d (--shared-gpu for a smoke "
               "test)\n", world, world, ndev);
        return 77;
    }
    lane_shm *shm = lane_map();
    if (!shm)
        return 1;
    int failed = lane_run(shm, world, bench_rank, &arg, 600);
    for (int r = 0; r < world; r++)
        if (shm->msg[r][0])
            fprintf(stderr, "%s\n", shm->msg[r]);
    if (failed)
        return 1;
    const double bus = world > 1 ? 2.0 * (world - 1) / world : 0.0;
    printf("world %d, hidden %lld, %s; us = slowest rank, median of %d graph replays / %d "
           "calls\n", world, (long long)arg.hidden, arg.shared_gpu ? "SHARED GPU (times "
           "meaningless)" : "one GPU per rank", REPLAYS, CALLS);
    printf("%6s %10s | %9s %7s %7s | %9s %7s %7s | %9s %7s %7s\n", "tokens", "bytes", "nccl us",
           "algbw", "busbw", "1shot us", "algbw", "busbw", "2shot us", "algbw", "busbw");
    double table[MAX_ROWS * NVAR]; /* the slowest rank's us, for the summary */
    int64_t T = 1;
    for (int row = 0; row < shm->nhash; row++, T *= 2) {
        const double bytes = (double)T * arg.hidden * 2;
        printf("%6lld %10.0f", (long long)T, bytes);
        for (int v = 0; v < NVAR; v++) {
            double us = -1;
            for (int r = 0; r < world; r++)
                if (US(shm, row, v, r) > us)
                    us = US(shm, row, v, r);
            table[row * NVAR + v] = us;
            if (us <= 0)
                printf(" | %9s %7s %7s", "-", "-", "-");
            else
                printf(" | %9.2f %7.1f %7.1f", us, bytes / us / 1e3, bytes / us / 1e3 * bus);
        }
        printf("\n");
    }
    if (world > 1 && !arg.shared_gpu) { /* at world 1 or on a shared GPU: nothing to judge */
        ipc_summary sum;
        ipc_summarize(table, shm->nhash, &sum);
        ipc_summary_print(stdout, &sum, world, (long long)arg.hidden);
    }
    return 0;
}

#endif /* BK_HAVE_CUDA */
