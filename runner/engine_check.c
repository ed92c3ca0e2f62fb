/* engine_check.c - what the engine checks of a variant's calls beside the audit: that its
 * last timed call computed what an untimed call on the same inputs computes, every output
 * element written (docs/variants.md, "The contract"). Shared by both backends. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/bf16.h"
#include "runner/engine.h"

bk_status bk_engine_check_inputs(const bk_shape_job *job, const bk_tensor *t,
                                 const void *const *now, const void *const *fresh, bk_err *err)
{
    for (int i = 0; i < job->target->ntensors; i++)
        if (!t[i].output && memcmp(now[i], fresh[i], t[i].elems * t[i].elem_bytes) != 0)
            return BK_FAIL(err, BK_ERR_CONTRACT, "%s mutated its input '%s' (rank %d, shape "
                           "%d): a variant must leave its inputs as they were",
                           job->variant->name, t[i].name, job->rank, job->shape_index);
    return BK_OK;
}

bk_status bk_engine_check_timed(const bk_shape_job *job, const bk_tensor *t,
                                const void *const *timed, const void *const *untimed,
                                bk_err *err)
{
    const char *v = job->variant->name;
    for (int i = 0; i < job->target->ntensors; i++) {
        if (!t[i].output || !memcmp(timed[i], untimed[i], t[i].elems * t[i].elem_bytes))
            continue;
        if (t[i].elem_bytes != 2) /* not bf16: equal bits are the only agreement */
            return BK_FAIL(err, BK_ERR_CONTRACT, "%s: rank %d shape %d: its last timed call "
                           "wrote other bytes to output '%s' than an untimed call on the same "
                           "inputs: a timed call must compute what the audit checks", v,
                           job->rank, job->shape_index, t[i].name);
        const uint16_t *a = timed[i], *b = untimed[i];
        for (size_t e = 0; e < t[i].elems; e++) {
            if (a[e] == b[e])
                continue;
            const double x = bk_bf16_to_f32(a[e]), y = bk_bf16_to_f32(b[e]);
            if (bk_bf16_is_nan(a[e]) && !bk_bf16_is_nan(b[e]))
                return BK_FAIL(err, BK_ERR_CONTRACT, "%s: rank %d shape %d: its last timed "
                               "call left output '%s' element %zu unwritten (or NaN) where an "
                               "untimed call on the same inputs writes %g: a timed call must "
                               "compute every output", v, job->rank, job->shape_index,
                               t[i].name, e, y);
            if (bk_bf16_is_nan(b[e]) || !(fabs(x - y) <= job->atol + job->rtol * fabs(y)))
                return BK_FAIL(err, BK_ERR_CONTRACT, "%s: rank %d shape %d: its last timed "
                               "call wrote %g to output '%s' element %zu, an untimed call on "
                               "the same inputs %g (rtol %g, atol %g): a timed call must "
                               "compute what the audit checks", v, job->rank,
                               job->shape_index, x, t[i].name, e, y, job->rtol, job->atol);
        }
    }
    return BK_OK;
}
