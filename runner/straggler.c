/* straggler.c - find the lane rank that holds a lane back, from its own samples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/straggler.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int bk_stragglers(const double *cost, int n, double factor, int *out, double *ref)
{
    *ref = 0;
    if (n < 2)
        return 0;
    double *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return 0;
    memcpy(sorted, cost, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    *ref = sorted[(n - 1) / 2];
    free(sorted);
    int k = 0;
    for (int r = 0; r < n; r++)
        if (*ref > 0 && cost[r] > factor * *ref)
            out[k++] = r;
    return k;
}

/* Lower median of one rank's samples of one shape (UINT64_MAX marks a missing one). */
static double rank_median(const uint64_t *ns, size_t n, uint64_t *tmp)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ns[i] != UINT64_MAX)
            tmp[m++] = ns[i];
    if (!m)
        return 0;
    qsort(tmp, m, sizeof *tmp, cmp_u64);
    return (double)tmp[(m - 1) / 2];
}

void bk_straggler_note(const bk_run *run, bk_arm_run *a)
{
    if (run->lane_gpu_shared) /* time slices, not a slow rank (bk_run.lane_gpu_shared) */
        return;
    const bk_plan *p = &run->plan;
    size_t iters = (size_t)p->workload.iters;
    double *cost = calloc((size_t)a->world, sizeof *cost);
    int *who = calloc((size_t)a->world, sizeof *who);
    uint64_t *tmp = malloc(iters * sizeof *tmp);
    if (!cost || !who || !tmp)
        goto out;
    for (int r = 0; r < a->world; r++)
        for (int s = 0; s < p->workload.nshapes; s++)
            if (a->r[r].ns && a->r[r].ns[s])
                cost[r] += p->workload.shapes[s].weight * rank_median(a->r[r].ns[s], iters, tmp);
    double ref = 0;
    int k = bk_stragglers(cost, a->world, BK_STRAGGLER_FACTOR, who, &ref);
    size_t len = strlen(a->reason);
    for (int i = 0; i < k && len + 1 < sizeof a->reason; i++) {
        const bk_rank_data *d = &a->r[who[i]];
        int n = snprintf(a->reason + len, sizeof a->reason - len,
                         "%sstraggler: lane rank %d (host %s, MPI rank %d) cost %.1f us, %.1fx "
                         "the lane's median %.1f us", len ? "; " : "", who[i], d->host,
                         d->mpi_rank, cost[who[i]] / 1e3, cost[who[i]] / ref, ref / 1e3);
        if (n < 0)
            break;
        len += (size_t)n < sizeof a->reason - len ? (size_t)n : sizeof a->reason - len - 1;
    }
    if (k)
        fprintf(stderr, "bracket: arm %s: %s\n", a->name, a->reason);
out:
    free(cost);
    free(who);
    free(tmp);
}
