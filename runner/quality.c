/* quality.c - the audit A against the pristine reference T, element by element. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/digest.h"
#include "runner/run.h"

static double bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

void bk_quality_element_text(char *buf, size_t len, int s, const bk_shape *sh, const char *tensor,
                             int rank, size_t i, const char *a_name, double a, const char *b_name,
                             double b, double rtol, double atol)
{
    snprintf(buf, len, "shape %d (tokens %lld, hidden %lld) %s rank %d element %zu: %s %g, %s %g "
             "(rtol %g, atol %g)", s, (long long)sh->tokens, (long long)sh->hidden, tensor, rank,
             i, a_name, a, b_name, b, rtol, atol);
}

/* Compare one output tensor of one shape on every lane rank. */
static void compare(const bk_run *run, int s, int o, bk_quality_shape *q, char *why, size_t wlen)
{
    const bk_arm_run *A = &run->arms[BK_ARM_IDX_A], *T = &run->arms[BK_ARM_IDX_T];
    double rtol = run->plan.quality.rtol, atol = run->plan.quality.atol;
    bk_sha256 ca, ct;
    bk_sha256_init(&ca);
    bk_sha256_init(&ct);
    for (int r = 0; r < A->world; r++) {
        size_t k = (size_t)s * (size_t)run->noutputs + (size_t)o;
        const uint16_t *a = A->r[r].tensors[k], *t = T->r[r].tensors[k];
        size_t la = A->r[r].tensor_len[k], lt = T->r[r].tensor_len[k];
        if (!a || !t || la != lt) {
            if (!why[0])
                snprintf(why, wlen, "shape %d %s rank %d: %s", s, run->output_names[o], r,
                         !a || !t ? "output missing" : "A and T differ in size");
            q->mismatches++;
            continue;
        }
        bk_sha256_update(&ca, a, la);
        bk_sha256_update(&ct, t, lt);
        size_t n = la / 2;
        q->elems += n;
        for (size_t i = 0; i < n; i++) {
            double x = bf16_to_double(a[i]), y = bf16_to_double(t[i]);
            int bad = 0;
            if (isnan(x)) {
                q->nan_a++;
                bad = 1;
            }
            if (isnan(y)) {
                q->nan_t++;
                bad = 1;
            }
            if (!bad) {
                double d = fabs(x - y);
                if (d > q->max_abs)
                    q->max_abs = d;
                if (y != 0 && d / fabs(y) > q->max_rel)
                    q->max_rel = d / fabs(y);
                bad = !(d <= atol + rtol * fabs(y));
            }
            if (bad) {
                if (!why[0])
                    bk_quality_element_text(why, wlen, s, &run->plan.workload.shapes[s],
                                            run->output_names[o], r, i, "A", x, "T", y, rtol,
                                            atol);
                q->mismatches++;
            }
        }
    }
    uint8_t d[BK_SHA256_LEN];
    bk_sha256_final(&ca, d);
    bk_sha256_format(d, q->digest_a);
    bk_sha256_final(&ct, d);
    bk_sha256_format(d, q->digest_t);
}

int bk_quality_missing(const bk_run *run, bk_quality *q)
{
    const bk_arm_run *A = &run->arms[BK_ARM_IDX_A], *T = &run->arms[BK_ARM_IDX_T];
    static const int cand[] = { BK_ARM_IDX_C, BK_ARM_IDX_A };
    for (int k = 0; k < 2; k++) {
        const bk_arm_run *a = &run->arms[cand[k]];
        const int r = a->ran ? bk_arm_broke_contract(a) : -1;
        if (r >= 0) {
            q->state = BK_QUALITY_FAIL;
            snprintf(q->reason, sizeof q->reason, "the candidate broke its contract in arm %s "
                     "(lane rank %d): %.*s", a->name, r % a->world,
                     bk_utf8_cut(a->r[r].status_msg, 400), a->r[r].status_msg);
            return 1;
        }
    }
    if (!A->ran && !T->ran) {
        q->state = BK_QUALITY_MISSING;
        snprintf(q->reason, sizeof q->reason, "audit A and reference T not run");
        return 1;
    }
    if (!A->ran || !A->ok || !T->ran || !T->ok) {
        q->state = BK_QUALITY_MISSING;
        snprintf(q->reason, sizeof q->reason, "%s", !A->ran || !A->ok ? "audit A did not complete"
                                                                       : "reference T did not complete");
        return 1;
    }
    return 0;
}

void bk_quality_decide(bk_quality *q, const char *first)
{
    uint64_t bad = 0;
    for (int i = 0; q->per && i < q->nshapes * q->noutputs; i++)
        bad += q->per[i].mismatches;
    q->state = bad ? BK_QUALITY_FAIL : BK_QUALITY_PASS;
    q->reason[0] = '\0';
    if (bad)
        snprintf(q->reason, sizeof q->reason, "A differs from T in %llu element(s); first: %s",
                 (unsigned long long)bad, first);
}

void bk_run_quality(bk_run *run)
{
    bk_quality *q = &run->quality;
    q->nshapes = run->plan.workload.nshapes;
    q->noutputs = run->noutputs;
    q->reason[0] = '\0';
    if (bk_quality_missing(run, q))
        return;
    free(q->per);
    q->per = calloc((size_t)(q->nshapes * q->noutputs), sizeof *q->per);
    if (!q->per) {
        q->state = BK_QUALITY_MISSING;
        snprintf(q->reason, sizeof q->reason, "out of memory comparing A with T");
        return;
    }
    char why[400] = "";
    for (int s = 0; s < q->nshapes; s++)
        for (int o = 0; o < q->noutputs; o++)
            compare(run, s, o, &q->per[s * q->noutputs + o], why, sizeof why);
    bk_quality_decide(q, why);
}
