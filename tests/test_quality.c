/* test_quality.c - the audit A against the reference T: the tolerance test at its edge and
 * relative to T, NaN and size mismatches counted, and the states decided before any
 * comparison (a broken contract in C or A, A or T missing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "runner/run.h"

/* bf16 bit patterns */
enum { BF_0 = 0x0000, BF_1 = 0x3f80, BF_1_25 = 0x3fa0, BF_1_5 = 0x3fc0, BF_2 = 0x4000,
       BF_NAN = 0x7fc0 };

typedef struct fixture {
    bk_run *run;
    bk_rank_data rd[BK_ARM_NAMES];
    void *tensor[BK_ARM_NAMES][1];
    size_t len[BK_ARM_NAMES][1];
    uint16_t a[8], t[8];
} fixture;

/* One shape, one output "out", one lane rank; every arm ran and ended well; A holds a[0..n),
 * T holds t[0..n) */
static fixture *make(const uint16_t *a, const uint16_t *t, size_t n, double rtol, double atol)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->run = calloc(1, sizeof *f->run);
    assert_non_null(f->run);
    bk_run *run = f->run;
    run->plan.workload.nshapes = 1;
    run->plan.quality.rtol = rtol;
    run->plan.quality.atol = atol;
    run->noutputs = 1;
    run->output_names[0] = "out";
    memcpy(f->a, a, n * sizeof *a);
    memcpy(f->t, t, n * sizeof *t);
    for (int i = 0; i < BK_ARM_NAMES; i++) {
        bk_arm_run *arm = &run->arms[i];
        arm->name = bk_arm_names[i];
        arm->world = 1;
        arm->ran = arm->ok = 1;
        arm->r = &f->rd[i];
        f->rd[i].tensors = f->tensor[i];
        f->rd[i].tensor_len = f->len[i];
    }
    f->tensor[BK_ARM_IDX_A][0] = f->a;
    f->tensor[BK_ARM_IDX_T][0] = f->t;
    f->len[BK_ARM_IDX_A][0] = f->len[BK_ARM_IDX_T][0] = n * sizeof *a;
    return f;
}

static void drop(fixture *f)
{
    free(f->run->quality.per);
    free(f->run);
    free(f);
}

/* An element matches when |a - t| <= atol + rtol * |t|: equal to the bound is within it, and
 * the bound scales with T's value, not A's. */
static void test_tolerance(void **state)
{
    (void)state;
    /* element 0: |1.25 - 1| = 0.25 = 0.25 x 1, within; element 1: |2 - 1.5| = 0.5 > 0.25 x
     * 1.5 = 0.375, a mismatch (0.25 x |A| would be 0.5: within) */
    const uint16_t a[] = { BF_1_25, BF_2 }, t[] = { BF_1, BF_1_5 };
    fixture *f = make(a, t, 2, 0.25, 0.0);
    bk_run_quality(f->run);
    const bk_quality *q = &f->run->quality;
    assert_int_equal(q->per[0].elems, 2);
    assert_int_equal(q->per[0].mismatches, 1);
    assert_int_equal(q->state, BK_QUALITY_FAIL); /* one bad element is enough */
    assert_non_null(strstr(q->reason, "A differs from T in 1 element(s); first: "));
    assert_non_null(strstr(q->reason, "element 1: A 2, T 1.5"));
    drop(f);

    /* all within: pass */
    const uint16_t a2[] = { BF_1_25, BF_0 }, t2[] = { BF_1, BF_0 };
    f = make(a2, t2, 2, 0.25, 0.0);
    bk_run_quality(f->run);
    assert_int_equal(f->run->quality.state, BK_QUALITY_PASS);
    assert_string_equal(f->run->quality.reason, "");
    drop(f);
}

/* A NaN in A is a mismatch and counted as one of A's */
static void test_nan_counted(void **state)
{
    (void)state;
    const uint16_t a[] = { BF_NAN, BF_1 }, t[] = { BF_1, BF_NAN };
    fixture *f = make(a, t, 2, 1.0, 1.0);
    bk_run_quality(f->run);
    const bk_quality_shape *p = &f->run->quality.per[0];
    assert_int_equal(p->nan_a, 1);
    assert_int_equal(p->nan_t, 1);
    assert_int_equal(p->mismatches, 2);
    assert_int_equal(f->run->quality.state, BK_QUALITY_FAIL);
    drop(f);
}

/* A longer than T is a size mismatch, not compared over A's length */
static void test_sizes_differ(void **state)
{
    (void)state;
    const uint16_t a[] = { BF_1, BF_1 }, t[] = { BF_1, BF_1 };
    fixture *f = make(a, t, 2, 0.0, 0.0);
    f->len[BK_ARM_IDX_T][0] = sizeof t[0]; /* T says one element */
    bk_run_quality(f->run);
    assert_int_equal(f->run->quality.state, BK_QUALITY_FAIL);
    assert_non_null(strstr(f->run->quality.reason, "A and T differ in size"));
    drop(f);
}

/* Decided before any comparison: a broken contract in C or in A (whichever lane rank,
 * rank 0 included) fails quality; A or T missing or failed is MISSING, each said. */
static void test_decided_first(void **state)
{
    (void)state;
    const uint16_t v[] = { BF_1 };
    const int arms[] = { BK_ARM_IDX_C, BK_ARM_IDX_A };
    for (int k = 0; k < 2; k++) {
        fixture *f = make(v, v, 1, 0.0, 0.0);
        f->rd[arms[k]].broke_contract = 1;
        bk_strlcpy(f->rd[arms[k]].status_msg, "wrote its input", sizeof f->rd[0].status_msg);
        bk_run_quality(f->run);
        assert_int_equal(f->run->quality.state, BK_QUALITY_FAIL);
        assert_non_null(strstr(f->run->quality.reason, "broke its contract in arm"));
        assert_non_null(strstr(f->run->quality.reason, bk_arm_names[arms[k]]));
        assert_null(f->run->quality.per);
        drop(f);
    }
    /* the engine's text is kept to 400 bytes, cut between UTF-8 characters: the reason is
     * recorded as JSON text (a cut character left jansson making no string: no quality) */
    fixture *g = make(v, v, 1, 0.0, 0.0);
    g->rd[BK_ARM_IDX_C].broke_contract = 1;
    char *m = g->rd[BK_ARM_IDX_C].status_msg;
    size_t n = 0;
    m[n++] = 'x'; /* 1 + 2 x 250 bytes: byte 400 is the first of an \u00e9 */
    for (int i = 0; i < 250; i++) {
        m[n++] = (char)0xc3;
        m[n++] = (char)0xa9;
    }
    m[n] = '\0';
    bk_run_quality(g->run);
    const char *r = g->run->quality.reason, *tail = strstr(r, "(lane rank 0): ");
    assert_non_null(tail);
    assert_int_equal(strlen(tail + strlen("(lane rank 0): ")), 399);
    json_t *j = json_string(r);
    assert_non_null(j);
    json_decref(j);
    drop(g);
    fixture *f = make(v, v, 1, 0.0, 0.0);
    f->run->arms[BK_ARM_IDX_A].ok = 0;
    bk_run_quality(f->run);
    assert_int_equal(f->run->quality.state, BK_QUALITY_MISSING);
    assert_string_equal(f->run->quality.reason, "audit A did not complete");
    f->run->arms[BK_ARM_IDX_A].ok = 1;
    f->run->arms[BK_ARM_IDX_T].ok = 0;
    bk_run_quality(f->run);
    assert_string_equal(f->run->quality.reason, "reference T did not complete");
    f->run->arms[BK_ARM_IDX_A].ran = f->run->arms[BK_ARM_IDX_T].ran = 0;
    bk_run_quality(f->run);
    assert_int_equal(f->run->quality.state, BK_QUALITY_MISSING);
    assert_string_equal(f->run->quality.reason, "audit A and reference T not run");
    drop(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_nan_counted),
        cmocka_unit_test(test_sizes_differ),
        cmocka_unit_test(test_decided_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
