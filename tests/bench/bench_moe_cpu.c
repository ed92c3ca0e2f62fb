/* bench_moe_cpu.c - moe.fused_experts_reduce cpu variants: median per-call time (the slowest
 * rank's, per iteration) of moe_serial and moe_fused_combine, per shape and world size,
 * with forked ranks over POSIX shared memory, each call after a lane barrier as in the
 * engine. usage: bench_moe_cpu [ITERS [WORLD_MAX]]   (defaults 300 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "kernels/catalog_internal.h"
#include "kernels/moe_internal.h"

#define MAXW 4
#define MAXI 5000
#define WARMUP 20

static uint64_t *g_ns; /* [MAXW][MAXI], MAP_SHARED */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int rank_main(const char *variant, const bk_shape *s, const char *rid, int rank,
                     int world, int iters)
{
    const bk_target *tg = &bk__moe_target;
    const bk_variant *v = bk_catalog_variant(BK_MOE_TARGET, variant);
    char names[MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_tensor t[BK_MOE_NT];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    void *state = NULL;
    json_t *params = json_object();
    int rc = 1;
    memset(t, 0, sizeof t);
    for (int r = 0; r < world; r++) {
        bk_shm_name(rid, "C", r, names[r]);
        ptrs[r] = names[r];
    }
    for (int i = 0; i < BK_MOE_NT; i++) {
        t[i].name = tg->tensor_names[i];
        t[i].elems = tg->tensor_elems(s, world, i);
        t[i].elem_bytes = tg->tensor_elem_bytes(i);
        if (!(t[i].data = calloc(t[i].elems ? t[i].elems : 1, t[i].elem_bytes)))
            goto out;
    }
    tg->init_inputs(t, s, 1, 0, rank, world);
    if (!v || bk_shm_create(rid, "C", rank, world, tg->peer_bytes(s, world), &shm, mine,
                            &err) != BK_OK ||
        bk_shm_connect(shm, ptrs, 10.0, &err) != BK_OK ||
        v->create(params, BK_BACKEND_CPU, rank, world, &state, &err) != BK_OK)
        goto out;
    bk_call call = { .shape = s, .iter = -1, .rank = rank, .world = world, .t = t,
                     .nt = BK_MOE_NT, .comm = shm, .timeout_s = 30.0 };
    for (int it = 0; it < WARMUP + iters; it++) {
        if (bk_shm_barrier(shm, 30.0, &err) != BK_OK)
            goto out;
        uint64_t t0 = bk_now_ns();
        if (v->run(state, &call, &err) != BK_OK)
            goto out;
        if (it >= WARMUP)
            g_ns[rank * MAXI + it - WARMUP] = bk_now_ns() - t0;
    }
    rc = bk_shm_barrier(shm, 30.0, &err) != BK_OK;
out:
    if (rc)
        fprintf(stderr, "bench_moe_cpu: rank %d %s: %s\n", rank, variant, err.msg);
    if (v && state)
        v->destroy(state);
    bk_shm_destroy(shm);
    for (int i = 0; i < BK_MOE_NT; i++)
        free(t[i].data);
    json_decref(params);
    return rc;
}

/* Median over iterations of the slowest rank's time (us); < 0 on failure. */
static double lane(const char *variant, const bk_shape *s, int world, int iters)
{
    static int counter;
    char rid[64];
    pid_t pids[MAXW];
    int bad = 0;
    snprintf(rid, sizeof rid, "bench-moe-%d-%d", (int)getpid(), counter++);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(rank_main(variant, s, rid, r, world, iters));
        bad |= pids[r] < 0;
    }
    for (int r = 0; r < world; r++) {
        int ws = 0;
        if (pids[r] > 0 && (waitpid(pids[r], &ws, 0) != pids[r] || !WIFEXITED(ws) ||
                            WEXITSTATUS(ws) != 0))
            bad = 1;
    }
    if (bad)
        return -1.0;
    uint64_t *cp = malloc((size_t)iters * sizeof *cp);
    if (!cp)
        return -1.0;
    for (int i = 0; i < iters; i++) {
        cp[i] = 0;
        for (int r = 0; r < world; r++)
            cp[i] = g_ns[r * MAXI + i] > cp[i] ? g_ns[r * MAXI + i] : cp[i];
    }
    qsort(cp, (size_t)iters, sizeof *cp, cmp_u64);
    double med = (double)cp[iters / 2] * 1e-3;
    free(cp);
    return med;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    int wmax = argc > 2 ? atoi(argv[2]) : 2;
    static const bk_shape shapes[] = {
        { .tokens = 1, .hidden = 64, .experts = 4, .topk = 2, .intermediate = 32 },
        { .tokens = 4, .hidden = 128, .experts = 8, .topk = 2, .intermediate = 32 },
        { .tokens = 8, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 64 },
        { .tokens = 16, .hidden = 256, .experts = 8, .topk = 2, .intermediate = 64 },
        { .tokens = 64, .hidden = 512, .experts = 8, .topk = 2, .intermediate = 64 },
        { .tokens = 256, .hidden = 1024, .experts = 8, .topk = 2, .intermediate = 16 },
    };
    if (iters < 1 || iters > MAXI || wmax < 1 || wmax > MAXW) {
        fprintf(stderr, "usage: bench_moe_cpu [ITERS (1..%d) [WORLD_MAX (1..%d)]]\n", MAXI, MAXW);
        return 2;
    }
    g_ns = mmap(NULL, MAXW * MAXI * sizeof *g_ns, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_ns == MAP_FAILED)
        return 1;
    printf("| world | tokens | hidden | experts | topk | inter | moe_serial us | "
           "moe_fused_combine us | speed-up |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int w = 1; w <= wmax; w++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const bk_shape *s = &shapes[i];
            double a = lane("moe_serial", s, w, iters);
            double b = lane("moe_fused_combine", s, w, iters);
            if (a < 0 || b < 0)
                return 1;
            printf("| %d | %lld | %lld | %lld | %lld | %lld | %.1f | %.1f | %.3f |\n", w,
                   (long long)s->tokens, (long long)s->hidden, (long long)s->experts,
                   (long long)s->topk, (long long)s->intermediate, a, b, a / b);
            fflush(stdout);
        }
    return 0;
}
