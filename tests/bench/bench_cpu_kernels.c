/* bench_cpu_kernels.c - times the cpu variants of collective.allreduce_residual_rmsnorm on
 * lanes of forked processes over shared memory, nccl-tests style: per iteration the slowest
 * rank's time, then the median, algorithm and bus bandwidth, and the one-shot's speed-up.
 *
 *   bench_cpu_kernels [-w WORLDS] [-t TOKENS] [-H HIDDEN] [-n ITERS] [-W WARMUP]
 *     -w, --worlds   comma list of lane sizes            (default 2,4)
 *     -t, --tokens   comma list of token counts          (default 1,8,32,128,512,2048)
 *     -H, --hidden   hidden size                         (default 4096)
 *     -n, --iters    timed iterations per shape           (default 200)
 *     -W, --warmup   warm-up iterations per shape         (default 20) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "kernels/catalog_internal.h"

#define MAXW 8
#define MAXT 16
#define MAXI 100000

typedef struct shared {
    uint64_t ns[MAXW][MAXI];
    char msg[MAXW][256];
} shared;

static shared *g;

static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        out[n++] = strtoll(s, &end, 10);
        if (end == s || out[n - 1] < 1)
            return -1;
    }
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One rank: warm up, then time `iters` calls of one shape. */
static int bench_rank(const char *variant, const bk_shape *s, int rank, int world, int warmup,
                      int iters)
{
    const bk_target *t = bk_catalog_target(BK_AR_TARGET);
    const bk_variant *v = bk_catalog_variant(BK_AR_TARGET, variant);
    char rid[64], names[MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_tensor ts[BK_AR_NT];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    void *state = NULL;
    json_t *params = json_object();
    snprintf(rid, sizeof rid, "bench-%d-%s-%lld", (int)getppid(), variant, (long long)s->tokens);
    for (int r = 0; r < world; r++) {
        bk_shm_name(rid, "C", r, names[r]);
        ptrs[r] = names[r];
    }
    if (bk_shm_create(rid, "C", rank, world, t->peer_bytes(s, world), &shm, mine, &err) != BK_OK
        || bk_shm_connect(shm, ptrs, 30.0, &err) != BK_OK ||
        v->create(params, BK_BACKEND_CPU, rank, world, &state, &err) != BK_OK)
        goto fail;
    for (int i = 0; i < BK_AR_NT; i++) {
        ts[i] = (bk_tensor){ .name = t->tensor_names[i], .output = t->tensor_is_output[i],
                             .elems = t->tensor_elems(s, world, i), .elem_bytes = 2 };
        ts[i].data = calloc(ts[i].elems, 2);
        if (!ts[i].data)
            goto fail;
    }
    t->init_inputs(ts, s, 1, 0, rank, world);
    bk_call call = { .shape = s, .rank = rank, .world = world, .t = ts, .nt = BK_AR_NT,
                     .comm = shm, .timeout_s = 30.0 };
    for (int it = -warmup; it < iters; it++) {
        call.iter = it < 0 ? -1 : it;
        uint64_t t0 = bk_now_ns();
        if (v->run(state, &call, &err) != BK_OK)
            goto fail;
        if (it >= 0)
            g->ns[rank][it] = bk_now_ns() - t0;
    }
    v->destroy(state);
    bk_shm_destroy(shm);
    return 0;
fail:
    bk_strlcpy(g->msg[rank], err.msg, sizeof g->msg[rank]);
    bk_shm_destroy(shm);
    return 1;
}

/* Median over iterations of the slowest rank's time, in ns (0 on failure). */
static double bench_lane(const char *variant, const bk_shape *s, int world, int warmup,
                         int iters)
{
    pid_t pids[MAXW];
    int ok = 1;
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0)
            return 0.0;
        if (pids[r] == 0)
            _exit(bench_rank(variant, s, r, world, warmup, iters));
    }
    for (int r = 0; r < world; r++) {
        int ws = 0;
        if (waitpid(pids[r], &ws, 0) != pids[r] || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "%s rank %d failed: %s\n", variant, r, g->msg[r]);
            ok = 0;
        }
    }
    if (!ok)
        return 0.0;
    static uint64_t crit[MAXI];
    for (int it = 0; it < iters; it++) {
        crit[it] = 0;
        for (int r = 0; r < world; r++)
            crit[it] = g->ns[r][it] > crit[it] ? g->ns[r][it] : crit[it];
    }
    qsort(crit, (size_t)iters, sizeof crit[0], cmp_u64);
    return (double)crit[iters / 2];
}

int main(int argc, char **argv)
{
    int64_t worlds[MAXT] = { 2, 4 }, tokens[MAXT] = { 1, 8, 32, 128, 512, 2048 };
    int nw = 2, nt = 6, iters = 200, warmup = 20;
    int64_t hidden = 4096;
    static const struct option opts[] = {
        { "worlds", required_argument, NULL, 'w' }, { "tokens", required_argument, NULL, 't' },
        { "hidden", required_argument, NULL, 'H' }, { "iters", required_argument, NULL, 'n' },
        { "warmup", required_argument, NULL, 'W' }, { NULL, 0, NULL, 0 } };
    for (int c; (c = getopt_long(argc, argv, "w:t:H:n:W:", opts, NULL)) != -1;) {
        if (c == 'w' && (nw = parse_list(optarg, worlds, MAXT)) > 0)
            continue;
        if (c == 't' && (nt = parse_list(optarg, tokens, MAXT)) > 0)
            continue;
        if (c == 'H' && (hidden = strtoll(optarg, NULL, 10)) > 0)
            continue;
        if (c == 'n' && (iters = atoi(optarg)) > 0 && iters <= MAXI)
            continue;
        if (c == 'W' && (warmup = atoi(optarg)) >= 0)
            continue;
        fprintf(stderr, "usage: %s [-w 2,4] [-t 1,8,32,128,512,2048] [-H 4096] [-n 200] "
                        "[-W 20]\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < nw; i++)
        if (worlds[i] > MAXW) {
            fprintf(stderr, "--worlds: at most %d\n", MAXW);
            return 2;
        }
    g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        return 1;
    const bk_target *t = bk_catalog_target(BK_AR_TARGET);
    printf("# %s, hidden %lld, %d iterations after %d warm-up; time = median over iterations "
           "of the slowest rank\n", BK_AR_TARGET, (long long)hidden, iters, warmup);
    printf("%5s %6s %10s | %10s %8s %8s | %10s %8s %8s | %7s\n", "world", "tokens", "bytes",
           "twopass_us", "algbw", "busbw", "oneshot_us", "algbw", "busbw", "speedup");
    for (int w = 0; w < nw; w++)
        for (int i = 0; i < nt; i++) {
            bk_shape s = { .tokens = tokens[i], .hidden = hidden };
            double bytes = t->algo_bytes(&s, (int)worlds[w]);
            double bf = t->busbw_factor((int)worlds[w]);
            double a = bench_lane("shm_twopass", &s, (int)worlds[w], warmup, iters);
            double b = s.tokens <= 512
                           ? bench_lane("shm_oneshot_fused", &s, (int)worlds[w], warmup, iters)
                           : 0.0;
            printf("%5lld %6lld %10.0f | %10.1f %8.3f %8.3f | ", (long long)worlds[w],
                   (long long)s.tokens, bytes, a / 1e3, a ? bytes / a : 0.0,
                   a ? bytes / a * bf : 0.0);
            if (b > 0.0)
                printf("%10.1f %8.3f %8.3f | %7.2f\n", b / 1e3, bytes / b, bytes / b * bf, a / b);
            else
                printf("%10s %8s %8s | %7s\n", "routed", "-", "-", "-");
            fflush(stdout);
        }
    printf("# algbw, busbw in GB/s (bytes / ns); busbw = algbw * 2(n-1)/n\n");
    return 0;
}
