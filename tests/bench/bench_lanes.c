/* bench_lanes.c - lane finding on the 1024-GPU snapshot at TP 1-256 (goal: under 100 ms),
 * on 4096 CPU slots of one host (`bracket lanes --cpu-slots 4096`) at TP 8-256, and the probe
 * time of this machine. Prints a table; timings are wall clock.
 *
 * usage: bench_lanes [SNAPSHOT] [REPEATS]
 *   SNAPSHOT defaults to tests/fixtures/topo/cluster128x8.json, REPEATS to 20. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void row(const char *what, uint64_t *ns, int n, const char *note)
{
    qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
    printf("| %-38s | %9.3f | %9.3f | %9.3f | %s |\n", what, ns[0] / 1e6, ns[n / 2] / 1e6,
           ns[n - 1] / 1e6, note);
}

/* bk_lanes_choose timed `reps` times into ns; the last call's status (its pick in *pick) */
static bk_status time_choose(const bk_topo *t, int tp, int n, const bk_rank_place *pl, int reps,
                             uint64_t *ns, bk_lane_pick *pick)
{
    bk_status st = BK_OK;
    for (int i = 0; i < reps; i++) {
        bk_err e = { 0 };
        uint64_t t0 = bk_now_ns();
        st = bk_lanes_choose(t, tp, n, pl, BK_LANES_DISJOINT, pick, &e);
        ns[i] = bk_now_ns() - t0;
    }
    return st;
}

int main(int argc, char **argv)
{
    char path[1024];
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    bk_err err = { 0 };
    bk_topo *t = NULL;
    bk_rank_place *pl = NULL;
    int n = 0;
    uint64_t ns[1000];
    if (reps < 1 || reps > 1000)
        reps = 20;
    if (argc > 1)
        snprintf(path, sizeof path, "%s", argv[1]);
    else
        snprintf(path, sizeof path, "%s/tests/fixtures/topo/cluster128x8.json", BK_SOURCE_DIR);
    printf("| step | min ms | median ms | max ms | result |\n|---|---:|---:|---:|---|\n");
    for (int i = 0; i < reps; i++) {
        bk_topo *u = NULL;
        uint64_t t0 = bk_now_ns();
        if (bk_topo_load(path, &u, &err) != BK_OK) {
            fprintf(stderr, "bench_lanes: %s\n", err.msg);
            return 1;
        }
        ns[i] = bk_now_ns() - t0;
        if (i == 0)
            t = u;
        else
            bk_topo_free(u);
    }
    char note[256];
    snprintf(note, sizeof note, "%d hosts, %d GPUs", t->nhosts, bk_topo_ngpus(t));
    row("load + validate snapshot", ns, reps, note);
    if (bk_places_one_per_gpu(t, &pl, &n, &err) != BK_OK) {
        fprintf(stderr, "bench_lanes: %s\n", err.msg);
        return 1;
    }
    bk_lane_pick *pick = calloc(1, sizeof *pick);
    if (!pick)
        return 1;
    static const int tps[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };
    for (size_t k = 0; k < sizeof tps / sizeof tps[0]; k++) {
        bk_status st = time_choose(t, tps[k], n, pl, reps, ns, pick);
        char what[64];
        snprintf(what, sizeof what, "lanes TP %d (%d ranks)", tps[k], n);
        snprintf(note, sizeof note, "%s, %d natural lanes, %s", st == BK_OK ? "pair" : "refused",
                 pick->nlanes, pick->baseline_sig);
        row(what, ns, reps, note);
    }
    /* CPU slots of host 0, filled NUMA node by NUMA node as `bracket lanes --cpu-slots` does:
     * one host of many ranks, where lanes are also grown greedily from seeds */
    enum { SLOTS = 4096 };
    bk_rank_place *cpu = calloc(SLOTS, sizeof *cpu);
    if (!cpu)
        return 1;
    const bk_topo_host *h0 = &t->hosts[0];
    for (int r = 0; r < SLOTS; r++) {
        cpu[r].host = 0;
        cpu[r].gpu = -1;
        cpu[r].numa = h0->nnuma > 0 ? r / ((SLOTS + h0->nnuma - 1) / h0->nnuma) : -1;
    }
    static const int cpu_tps[] = { 8, 64, 256 };
    for (size_t k = 0; k < sizeof cpu_tps / sizeof cpu_tps[0]; k++) {
        int creps = reps < 5 ? reps : 5; /* seconds a repeat before 2026-12-07 */
        bk_status st = time_choose(t, cpu_tps[k], SLOTS, cpu, creps, ns, pick);
        char what[64];
        snprintf(what, sizeof what, "lanes TP %d (%d CPU slots, 1 host)", cpu_tps[k], SLOTS);
        snprintf(note, sizeof note, "%s, %d natural lanes", st == BK_OK ? "pair" : "refused",
                 pick->nlanes);
        row(what, ns, creps, note);
    }
    free(cpu);
    for (int i = 0; i < reps; i++) {
        bk_topo *p = NULL;
        uint64_t t0 = bk_now_ns();
        if (bk_topo_probe(&p, &err) != BK_OK) {
            fprintf(stderr, "bench_lanes: probe: %s\n", err.msg);
            return 1;
        }
        ns[i] = bk_now_ns() - t0;
        if (i == reps - 1)
            snprintf(note, sizeof note, "%d PUs, %d GPUs, %d notes", p->hosts[0].pus,
                     p->hosts[0].ngpus, p->hosts[0].nnotes);
        bk_topo_free(p);
    }
    row("probe this machine (hwloc+NVML+CUDA)", ns, reps, note);
    free(pick);
    free(pl);
    bk_topo_free(t);
    return 0;
}
