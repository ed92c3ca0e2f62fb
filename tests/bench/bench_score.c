/* bench_score.c - time the scorer on a full bracket: 2 ranks x 3 arms x 2 shapes of
 * per-rank samples (10^7 in all by default) with 2000 bootstrap resamples.
 * usage: bench_score [TOTAL_SAMPLES [RESAMPLES [REPEATS]]]   (defaults 1e7 2000 3) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runner/rng.h"
#include "runner/score.h"

enum { NRANKS = 2, NSHAPES = 2 };

static double secs(uint64_t a, uint64_t b) { return (double)(b - a) * 1e-9; }

/* One row: generate, take critical paths, score; returns 0 on success. */
static int run(size_t total, int resamples, int repeats)
{
    const size_t per = total / (NRANKS * BK_NARMS * NSHAPES);
    uint64_t *rank[BK_NARMS][NSHAPES][NRANKS] = { { { 0 } } };
    uint64_t *cp[BK_NARMS][NSHAPES] = { { 0 } };
    int rc = 1;
    bk_rng rng;
    bk_rng_seed(&rng, 7);
    /* shape s costs ~20 us * (s + 1); C is 3% faster; exponential-ish jitter */
    for (int a = 0; a < BK_NARMS; a++)
        for (int s = 0; s < NSHAPES; s++) {
            double base = 20000.0 * (s + 1) * (a == BK_ARM_C ? 0.97 : 1.0);
            for (int r = 0; r < NRANKS; r++) {
                uint64_t *v = rank[a][s][r] = malloc(per * sizeof *v);
                if (!v)
                    goto out;
                for (size_t i = 0; i < per; i++)
                    v[i] = (uint64_t)(base - 500.0 * log(1.0 - bk_rng_uniform(&rng)));
            }
            if (!(cp[a][s] = malloc(per * sizeof *cp[a][s])))
                goto out;
        }
    for (int rep = 0; rep < repeats; rep++) {
        bk_err err = { 0 };
        uint64_t t0 = bk_now_ns();
        bk_score_input in;
        bk_score_input_init(&in);
        in.nshapes = NSHAPES;
        in.weights[0] = 0.5;
        in.weights[1] = 0.5;
        in.quality = BK_QUALITY_PASS;
        in.resamples = resamples;
        for (int a = 0; a < BK_NARMS; a++) {
            in.arms[a].present = 1;
            for (int s = 0; s < NSHAPES; s++) {
                size_t counts[NRANKS], n = 0;
                int incomplete = 0;
                for (int r = 0; r < NRANKS; r++)
                    counts[r] = per;
                if (bk_critical_path((const uint64_t *const *)rank[a][s], counts, NRANKS,
                                     cp[a][s], per, &n, &incomplete, &err) != BK_OK)
                    goto fail;
                in.arms[a].cp[s] = cp[a][s];
                in.arms[a].n[s] = n;
            }
        }
        uint64_t t1 = bk_now_ns();
        bk_score out;
        bk_score_timing tm;
        if (bk_score_compute(&in, &out, &tm, &err) != BK_OK)
            goto fail;
        uint64_t t2 = bk_now_ns();
        printf("| %10zu | %9d | %8.3f | %8.3f | %9.3f | %8.3f | %-11s %.4f [%.4f, %.4f] |\n",
               per * NRANKS * BK_NARMS * NSHAPES, resamples, secs(t0, t1), tm.sort_s,
               tm.bootstrap_s, secs(t0, t2), bk_verdict_name(out.verdict), out.speedup,
               out.speedup_lo, out.speedup_hi);
        continue;
    fail:
        fprintf(stderr, "bench_score: %s (%s)\n", err.msg, err.trail);
        goto out;
    }
    rc = 0;
out:
    for (int a = 0; a < BK_NARMS; a++)
        for (int s = 0; s < NSHAPES; s++) {
            for (int r = 0; r < NRANKS; r++)
                free(rank[a][s][r]);
            free(cp[a][s]);
        }
    return rc;
}

int main(int argc, char **argv)
{
    size_t total = argc > 1 ? (size_t)strtod(argv[1], NULL) : 10000000;
    int resamples = argc > 2 ? atoi(argv[2]) : 2000;
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    if (total < NRANKS * BK_NARMS * NSHAPES || resamples < 1 || repeats < 1) {
        fprintf(stderr, "usage: bench_score [TOTAL_SAMPLES [RESAMPLES [REPEATS]]]\n");
        return 2;
    }
    printf("scoring %d ranks x %d arms x %d shapes; times in seconds (one thread)\n\n",
           NRANKS, BK_NARMS, NSHAPES);
    printf("| %10s | %9s | %8s | %8s | %9s | %8s | %-38s |\n", "samples", "resamples",
           "crit", "sort", "bootstrap", "total", "verdict, speed-up [95% interval]");
    printf("|-----------:|----------:|---------:|---------:|----------:|---------:|"
           "----------------------------------------|\n");
    if (argc > 1)
        return run(total, resamples, repeats);
    /* the default: a size ladder, then the goal size */
    if (run(100000, resamples, 1) || run(1000000, resamples, 1))
        return 1;
    return run(total, resamples, repeats);
}
