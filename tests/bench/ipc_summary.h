/* ipc_summary.h - what a bench_ipc_allreduce table says about the cuda backend's goals
 * across GPUs (issue 4): each IPC variant's speed-up over nccl_then_rmsnorm at 32 tokens or
 * fewer (goal 3x), how far up in tokens it stays faster than NCCL + norm (the crossover),
 * from where the two-shot beats the one-shot, and the fastest IPC variant at 8 tokens (goal
 * 6 us or less at TP 8, hidden 6144). Host code only, so that tests/test_ipc_summary.c checks
 * it without a GPU. Rows are token counts 1, 2, 4, ... (each twice the last); a time <= 0 is
 * a variant that did not run at that row. */
#ifndef BK_IPC_SUMMARY_H
#define BK_IPC_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

enum { IPC_NCCL, IPC_ONESHOT, IPC_TWOSHOT, IPC_NVAR };

typedef struct ipc_summary {
    /* per IPC variant (IPC_ONESHOT, IPC_TWOSHOT; index IPC_NCCL unused) */
    double min_speedup[IPC_NVAR], max_speedup[IPC_NVAR]; /* nccl us / its us, rows <= 32
                                                          * tokens with both; 0: none */
    int64_t faster_upto[IPC_NVAR];  /* the largest token count up to which it beat NCCL at
                                     * every row where both ran; 0: not even at 1 token */
    int64_t first_slower[IPC_NVAR]; /* the first row where it did not; 0: none */
    int64_t twoshot_from;           /* the first row from which the two-shot beat the
                                     * one-shot at every later row both ran; 0: none */
    double best8_us;                /* the fastest IPC variant at 8 tokens; 0: none */
    int best8_v;
} ipc_summary;

/* us[row * IPC_NVAR + v]: the slowest rank's time of variant v at 2^row tokens. */
static inline void ipc_summarize(const double *us, int rows, ipc_summary *s)
{
    *s = (ipc_summary){ 0 };
#define US(row, v) us[(row) * IPC_NVAR + (v)]
    for (int v = IPC_ONESHOT; v < IPC_NVAR; v++) {
        int broken = 0;
        for (int row = 0; row < rows; row++) {
            const double n = US(row, IPC_NCCL), m = US(row, v);
            const int64_t t = (int64_t)1 << row;
            if (n <= 0 || m <= 0)
                continue;
            if (t <= 32) {
                const double x = n / m;
                if (s->min_speedup[v] == 0 || x < s->min_speedup[v])
                    s->min_speedup[v] = x;
                if (x > s->max_speedup[v])
                    s->max_speedup[v] = x;
            }
            if (!broken && m < n)
                s->faster_upto[v] = t;
            else if (!broken) {
                broken = 1;
                s->first_slower[v] = t;
            }
        }
    }
    for (int row = rows - 1; row >= 0; row--) {
        const double one = US(row, IPC_ONESHOT), two = US(row, IPC_TWOSHOT);
        if (one <= 0 || two <= 0)
            continue;
        if (two < one)
            s->twoshot_from = (int64_t)1 << row;
        else
            break;
    }
    if (rows > 3)
        for (int v = IPC_ONESHOT; v < IPC_NVAR; v++)
            if (US(3, v) > 0 && (s->best8_us == 0 || US(3, v) < s->best8_us)) {
                s->best8_us = US(3, v);
                s->best8_v = v;
            }
#undef US
}

static inline void ipc_summary_print(FILE *f, const ipc_summary *s, int world, long long hidden)
{
    static const char *const name[IPC_NVAR] = { "nccl_then_rmsnorm", "ipc_oneshot_fused",
                                                "ipc_twoshot_fused" };
    fprintf(f, "summary (world %d, hidden %lld):\n", world, hidden);
    for (int v = IPC_ONESHOT; v < IPC_NVAR; v++) {
        if (s->min_speedup[v] > 0)
            fprintf(f, "  %s: %.2f-%.2fx the speed of %s at 32 tokens or fewer (goal 3x: "
                    "%s)", name[v], s->min_speedup[v], s->max_speedup[v], name[IPC_NCCL],
                    s->min_speedup[v] >= 3.0 ? "met" : "not met");
        else
            fprintf(f, "  %s: no row of 32 tokens or fewer beside %s", name[v], name[IPC_NCCL]);
        if (s->faster_upto[v])
            fprintf(f, "; faster up to %lld tokens", (long long)s->faster_upto[v]);
        if (s->first_slower[v])
            fprintf(f, "; not faster from %lld", (long long)s->first_slower[v]);
        fprintf(f, "\n");
    }
    if (s->twoshot_from)
        fprintf(f, "  %s faster than %s from %lld tokens on\n", name[IPC_TWOSHOT],
                name[IPC_ONESHOT], (long long)s->twoshot_from);
    else
        fprintf(f, "  %s not faster than %s at the largest row both ran\n", name[IPC_TWOSHOT],
                name[IPC_ONESHOT]);
    const int goal8 = world == 8 && hidden == 6144; /* the goal's shape: 8 x 6144 at TP 8 */
    if (s->best8_us > 0)
        fprintf(f, "  8 tokens: %s %.2f us, the faster IPC variant%s\n", name[s->best8_v],
                s->best8_us, goal8 ? (s->best8_us <= 6.0 ? " (goal 6 us at TP 8: met)"
                                                         : " (goal 6 us at TP 8: not met)")
                                   : "");
    else if (goal8)
        fprintf(f, "  8 tokens: no IPC variant ran (goal 6 us at TP 8: unmeasured)\n");
}

#endif
