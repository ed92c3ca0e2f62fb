/* score_stats.c - the statistics the scorer stands on: per-iteration critical paths, the
 * radix sort of timings, lower medians, and the materiality bound of `bracket worth`. */
#include "runner/score.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- critical path, sorting, medians ---- */

bk_status bk_critical_path(const uint64_t *const *ranks, const size_t *counts, int nranks,
                           uint64_t *out, size_t out_cap, size_t *n, int *incomplete,
                           bk_err *err)
{
    *n = 0;
    *incomplete = 0;
    if (nranks < 1 || !ranks || !counts)
        return BK_FAIL(err, BK_ERR_INPUT, "critical path: need at least one rank (got %d)",
                       nranks);
    size_t m = counts[0];
    for (int r = 0; r < nranks; r++) {
        if (counts[r] > 0 && !ranks[r])
            return BK_FAIL(err, BK_ERR_INPUT, "critical path: rank %d has %zu samples but no "
                           "array", r, counts[r]);
        if (counts[r] != counts[0])
            *incomplete = 1;
        if (counts[r] < m)
            m = counts[r];
    }
    if (m > out_cap || (m > 0 && !out))
        return BK_FAIL(err, BK_ERR_INPUT, "critical path: output holds %zu, need %zu",
                       out_cap, m);
    memcpy(out, ranks[0], m * sizeof *out);
    for (int r = 1; r < nranks; r++) {
        const uint64_t *v = ranks[r];
        for (size_t i = 0; i < m; i++)
            out[i] = v[i] > out[i] ? v[i] : out[i];
    }
    *n = m;
    return BK_OK;
}

/* LSD radix sort, 8-bit digits. Timings in ns rarely use more than 3-5 bytes,
 * and a digit that is equal in every value is skipped, so this is a few linear
 * passes: several times faster than qsort's comparator calls on 10^7 values. */
bk_status bk_sort_u64(uint64_t *v, size_t n, bk_err *err)
{
    if (n < 2)
        return BK_OK;
    size_t (*hist)[256] = calloc(8, sizeof *hist);
    uint64_t *tmp = malloc(n * sizeof *tmp);
    bk_status st = BK_OK;
    if (!hist || !tmp) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "sort: out of memory for %zu values", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 8; d++)
            hist[d][(v[i] >> (8 * d)) & 0xff]++;
    uint64_t *src = v, *dst = tmp;
    for (int d = 0; d < 8; d++) {
        size_t *h = hist[d];
        if (h[(src[0] >> (8 * d)) & 0xff] == n)
            continue; /* every value has this digit: the pass would not move anything */
        size_t sum = 0;
        for (int b = 0; b < 256; b++) {
            size_t c = h[b];
            h[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[h[(src[i] >> (8 * d)) & 0xff]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
out:
    free(hist);
    free(tmp);
    return st;
}

uint64_t bk_lower_median(const uint64_t *sorted, size_t n) { return sorted[(n - 1) / 2]; }

/* ---- materiality ---- */

bk_status bk_worth_bound(double f, double k, double *bound, bk_err *err)
{
    *bound = NAN;
    if (!isfinite(f) || !(f > 0.0 && f <= 1.0))
        return BK_FAIL(err, BK_ERR_INPUT, "fraction %g must be in (0, 1]", f);
    if (!isfinite(k) || !(k > 0.0))
        return BK_FAIL(err, BK_ERR_INPUT, "speed-up %g must be a finite number > 0", k);
    *bound = 1.0 / ((1.0 - f) + f / k);
    return BK_OK;
}

int bk_worth_clears(double bound, double noise) { return bound > 1.0 + noise; }

