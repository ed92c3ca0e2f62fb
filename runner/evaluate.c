/* evaluate.c - from a run's arms (per-rank samples, exit statuses) and quality to the
 * scorer's input, and the verdict. Used by `bracket run` and `bracket score` alike, so a
 * record re-scored from its raw samples gives the same numbers bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/run.h"

static const int timed_arm[BK_NARMS] = { BK_ARM_IDX_B, BK_ARM_IDX_C, BK_ARM_IDX_BP };

bk_status bk_run_evaluate(const bk_run *run, int bc_only, bk_score *out, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_plan *p = &run->plan;
    int ns = p->workload.nshapes;
    bk_score_input in;
    uint64_t *bufs[BK_NARMS][BK_MAX_SHAPES];
    memset(bufs, 0, sizeof bufs);
    bk_score_input_init(&in);
    bk_score_input_from_plan(&in, p);
    /* under v7, a B' that was not run because B/C decided leaves B and C to decide */
    in.bc_only = bc_only || (p->protocol.version == BK_PROTO_V7 && !run->arms[BK_ARM_IDX_BP].ran &&
                             run->arms[BK_ARM_IDX_B].ran && run->arms[BK_ARM_IDX_B].ok &&
                             run->arms[BK_ARM_IDX_C].ran && run->arms[BK_ARM_IDX_C].ok);
    in.quality = bc_only && run->quality.state == BK_QUALITY_NOT_RUN ? BK_QUALITY_NOT_RUN
                                                                      : run->quality.state;
    bk_strlcpy_words(in.quality_reason, run->quality.reason, sizeof in.quality_reason);

    for (int k = 0; k < BK_NARMS; k++) {
        const bk_arm_run *a = &run->arms[timed_arm[k]];
        bk_score_arm *sa = &in.arms[k];
        sa->present = a->ran;
        if (!a->ran)
            continue;
        if (!a->ok) {
            sa->failed = 1;
            bk_strlcpy_words(sa->reason, a->reason[0] ? a->reason : "arm failed",
                             sizeof sa->reason);
            continue;
        }
        /* rounds one after another: round j's critical path at j * iters */
        const int rounds = bk_arm_rounds(a);
        const uint64_t **ranks = calloc((size_t)a->world, sizeof *ranks);
        size_t *counts = calloc((size_t)a->world, sizeof *counts);
        if (!ranks || !counts) {
            free(ranks);
            free(counts);
            st = BK_FAIL(err, BK_ERR_SYSTEM, "evaluate: out of memory");
            goto out;
        }
        sa->rounds = rounds;
        for (int s = 0; s < ns; s++) {
            size_t cap = (size_t)p->workload.iters;
            bufs[k][s] = malloc((size_t)rounds * cap * sizeof(uint64_t));
            if (!bufs[k][s]) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "evaluate: out of memory");
                break;
            }
            sa->cp[s] = bufs[k][s];
            sa->n[s] = 0;
            for (int j = 0; j < rounds && st == BK_OK; j++) {
                const bk_rank_data *d = a->r + (size_t)j * (size_t)a->world;
                for (int r = 0; r < a->world; r++) {
                    ranks[r] = d[r].ns ? d[r].ns[s] : NULL;
                    counts[r] = ranks[r] ? (d[r].ns_seen[s] < cap ? d[r].ns_seen[s] : cap) : 0;
                }
                size_t n = 0;
                int incomplete = 0;
                st = bk_critical_path(ranks, counts, a->world, bufs[k][s] + sa->n[s], cap, &n,
                                      &incomplete, err);
                if (st != BK_OK)
                    break;
                sa->n[s] += n;
                /* rounds are scored as equal lengths: each must be whole */
                if (incomplete || n == 0 || (rounds > 1 && n != cap)) {
                    sa->failed = 1;
                    if (rounds > 1)
                        snprintf(sa->reason, sizeof sa->reason, "arm %s round %d shape %d: "
                                 "ranks' samples incomplete", a->name, j + 1, s);
                    else
                        snprintf(sa->reason, sizeof sa->reason, "arm %s shape %d: ranks' "
                                 "samples incomplete", a->name, s);
                }
            }
            if (st != BK_OK)
                break;
        }
        free(ranks);
        free(counts);
        if (st != BK_OK)
            goto out;
    }
    BK_TRY(bk_score_compute(&in, out, NULL, err));
out:
    for (int k = 0; k < BK_NARMS; k++)
        for (int s = 0; s < BK_MAX_SHAPES; s++)
            free(bufs[k][s]);
    return st;
}
