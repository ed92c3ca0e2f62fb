/* test_verify_row.c - how `bracket verify` judges one row of its table
 * (bk__verify_check_row): every element of every output of every lane rank within
 * rtol/atol of the float64 reference, the tolerance's edge inclusive; the first bad element
 * named by shape, tensor, rank and index; a NaN (an element left unwritten: the engine
 * poisons outputs) bad and the row's maxima nan; an output that did not come back whole
 * bad in all its elements. The outputs are the target's own reference rounded to bf16, as
 * a correct engine sends them, then spoiled one element at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/catalog.h"
#include "runner/verify_row.h"

#define AR "collective.allreduce_residual_rmsnorm"
#define WORLD 2
#define SEED 11

/* A plan of two shapes (the second larger, so a row that read the other shape's outputs
 * would see the wrong length) and arms[0] as a correct engine fills it: per lane rank and
 * shape, every output the reference rounded to bf16. */
typedef struct {
    bk_plan p;
    const bk_target *tg;
    int outs[BK_MAX_TENSORS], nout;
    bk_arm_run arms[2];
    bk_rank_data r[WORLD];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->tg = bk_catalog_target(AR);
    assert_non_null(f->tg);
    f->p.workload.nshapes = 2;
    f->p.workload.shapes[0] = (bk_shape){ .tokens = 3, .hidden = 16, .weight = 0.5 };
    f->p.workload.shapes[1] = (bk_shape){ .tokens = 5, .hidden = 32, .weight = 0.5 };
    f->p.quality.rtol = 1e-2;
    f->p.quality.atol = 1e-2;
    for (int t = 0; t < f->tg->ntensors; t++)
        if (f->tg->tensor_is_output[t])
            f->outs[f->nout++] = t;
    assert_int_equal(f->nout, 2); /* out, residual_out */
    f->arms[0].world = WORLD;
    f->arms[0].r = f->r;
    for (int r = 0; r < WORLD; r++) {
        f->r[r].tensors = calloc((size_t)(2 * f->nout), sizeof(void *));
        f->r[r].tensor_len = calloc((size_t)(2 * f->nout), sizeof(size_t));
        assert_non_null(f->r[r].tensors);
        assert_non_null(f->r[r].tensor_len);
        for (int s = 0; s < 2; s++) {
            double *ref[BK_MAX_TENSORS] = { 0 };
            bk_err err = { 0 };
            const bk_shape *sh = &f->p.workload.shapes[s];
            if (f->tg->reference(sh, SEED, s, r, WORLD, ref, &err) != BK_OK)
                fail_msg("reference: %s", err.msg);
            for (int q = 0; q < f->nout; q++) {
                size_t n = f->tg->tensor_elems(sh, WORLD, f->outs[q]);
                uint16_t *h = malloc(n * 2);
                assert_non_null(h);
                for (size_t i = 0; i < n; i++)
                    h[i] = bk_bf16_from_f32((float)ref[q][i]);
                f->r[r].tensors[s * f->nout + q] = h;
                f->r[r].tensor_len[s * f->nout + q] = n * 2;
                free(ref[q]);
            }
        }
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int r = 0; r < WORLD; r++) {
        for (int k = 0; k < 2 * f->nout; k++)
            free(f->r[r].tensors[k]);
        free(f->r[r].tensors);
        free(f->r[r].tensor_len);
    }
    free(f);
    return 0;
}

static void judge(fixture *f, int s, bk__verify_row *w)
{
    bk_err err = { 0 };
    if (bk__verify_check_row(&f->p, f->tg, f->arms, 0, f->outs, f->nout, s, WORLD, SEED, w,
                             &err) != BK_OK)
        fail_msg("check_row: %s", err.msg);
}

static uint16_t *tensor(fixture *f, int r, int s, int q) { return f->r[r].tensors[s * f->nout + q]; }

static size_t elems(const fixture *f, int s, int q)
{
    return f->tg->tensor_elems(&f->p.workload.shapes[s], WORLD, f->outs[q]);
}

/* The reference rounded to bf16 passes at both shapes, with no NaN and no bad element. */
static void test_correct_outputs_pass(void **state)
{
    fixture *f = *state;
    for (int s = 0; s < 2; s++) {
        bk__verify_row w;
        judge(f, s, &w);
        assert_int_equal(w.bad, 0);
        assert_int_equal(w.nans, 0);
        assert_int_equal(w.geq, 1);
        assert_string_equal(w.first, "");
        assert_true(w.max_abs >= 0 && w.max_abs <= f->p.quality.atol);
    }
}

/* Two bad elements of rank 1's first output: both counted, the first of them named. */
static void test_first_bad_element_named(void **state)
{
    fixture *f = *state;
    uint16_t *t = tensor(f, 1, 1, 0), keep5 = t[5], keep9 = t[9];
    t[5] = bk_bf16_from_f32(bk_bf16_to_f32(keep5) + 4.0f);
    t[9] = bk_bf16_from_f32(bk_bf16_to_f32(keep9) - 4.0f);
    bk__verify_row w;
    judge(f, 1, &w);
    t[5] = keep5;
    t[9] = keep9;
    assert_int_equal(w.bad, 2);
    const char *want = "shape 1 (tokens 5, hidden 32) out rank 1 element 5: got ";
    if (strncmp(w.first, want, strlen(want)) != 0)
        fail_msg("first bad: '%s', want it to start '%s'", w.first, want);
    assert_true(w.max_abs > 3.0);
    judge(f, 0, &w); /* the other shape is untouched */
    assert_int_equal(w.bad, 0);
}

/* The last element of the last output of the last rank is checked too. */
static void test_last_element_checked(void **state)
{
    fixture *f = *state;
    const size_t n = elems(f, 0, f->nout - 1);
    uint16_t *t = tensor(f, WORLD - 1, 0, f->nout - 1), keep = t[n - 1];
    t[n - 1] = bk_bf16_from_f32(bk_bf16_to_f32(keep) + 4.0f);
    bk__verify_row w;
    judge(f, 0, &w);
    t[n - 1] = keep;
    assert_int_equal(w.bad, 1);
    char want[128];
    snprintf(want, sizeof want, "residual_out rank %d element %zu: got ", WORLD - 1, n - 1);
    if (!strstr(w.first, want))
        fail_msg("first bad: '%s', want '%s'", w.first, want);
}

/* An element left as the engine's poison (NaN) is bad, counted as a NaN, and the row's
 * largest differences are no number (not the finite maxima of the other elements). */
static void test_nan_is_bad(void **state)
{
    fixture *f = *state;
    uint16_t *t = tensor(f, 0, 0, 1), keep = t[2];
    t[2] = BK_BF16_POISON;
    bk__verify_row w;
    judge(f, 0, &w);
    t[2] = keep;
    assert_int_equal(w.bad, 1);
    assert_int_equal(w.nans, 1);
    assert_true(isnan(w.max_abs));
    assert_true(isnan(w.max_rel));
    assert_non_null(strstr(w.first, "residual_out rank 0 element 2: got "));
    assert_non_null(strstr(w.first, "nan, want ")); /* the poison's sign is its own */
}

/* An output that did not come back, or came back short, is bad in every element. */
static void test_missing_output_all_bad(void **state)
{
    fixture *f = *state;
    const size_t n = elems(f, 0, 1);
    void **slot = &f->r[0].tensors[0 * f->nout + 1];
    void *keep = *slot;
    bk__verify_row w;
    char want[160];
    *slot = NULL;
    judge(f, 0, &w);
    *slot = keep;
    assert_int_equal(w.bad, n);
    snprintf(want, sizeof want, "shape 0 (tokens 3, hidden 16) residual_out rank 0: 0 bytes "
             "came back, want %zu", n * 2);
    assert_string_equal(w.first, want);
    f->r[0].tensor_len[1] = n * 2 - 2;
    judge(f, 0, &w);
    f->r[0].tensor_len[1] = n * 2;
    assert_int_equal(w.bad, n);
    snprintf(want, sizeof want, "residual_out rank 0: %zu bytes came back, want %zu", n * 2 - 2,
             n * 2);
    assert_non_null(strstr(w.first, want));
}

/* The tolerance is inclusive: with rtol 0 and atol the row's largest difference, it passes;
 * with atol just below that, the element at the difference fails. */
static void test_tolerance_edge_inclusive(void **state)
{
    fixture *f = *state;
    const double rtol = f->p.quality.rtol, atol = f->p.quality.atol;
    bk__verify_row w;
    judge(f, 1, &w);
    assert_true(w.max_abs > 0); /* bf16 rounding leaves some difference */
    f->p.quality.rtol = 0;
    f->p.quality.atol = w.max_abs;
    judge(f, 1, &w);
    const uint64_t at_edge = w.bad;
    f->p.quality.atol = nextafter(f->p.quality.atol, 0);
    judge(f, 1, &w);
    f->p.quality.rtol = rtol;
    f->p.quality.atol = atol;
    assert_int_equal(at_edge, 0);
    assert_true(w.bad >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_correct_outputs_pass),
        cmocka_unit_test(test_first_bad_element_named),
        cmocka_unit_test(test_last_element_checked),
        cmocka_unit_test(test_nan_is_bad),
        cmocka_unit_test(test_missing_output_all_bad),
        cmocka_unit_test(test_tolerance_edge_inclusive),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
