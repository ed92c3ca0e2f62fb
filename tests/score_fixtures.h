/* score_fixtures.h - what the scoring tests share (test_score.c, test_score_rules.c):
 * sample arrays freed at each test's teardown, uniform samples, a two-shape bracket, a
 * score that must compute, and a substring assertion. */
#ifndef BK_TEST_SCORE_FIXTURES_H
#define BK_TEST_SCORE_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "runner/rng.h"
#include "runner/score.h"

/* ---- sample fixtures: arrays live until the test's teardown ---- */

static uint64_t *pool[256];
static int npool;

static inline uint64_t *take(size_t n)
{
    assert_true(npool < 256);
    uint64_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    return pool[npool++] = v;
}

static inline int free_pool(void **state)
{
    (void)state;
    while (npool > 0)
        free(pool[--npool]);
    return 0;
}

/* n critical-path times uniform in [lo, hi) ns */
static inline uint64_t *uniform(bk_rng *rng, size_t n, double lo, double hi)
{
    uint64_t *v = take(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint64_t)(lo + (hi - lo) * bk_rng_uniform(rng));
    return v;
}

/* every shape of `arm` gets n times uniform in [lo, hi) scaled by the shape's index + 1 */
static inline void fill_arm(bk_score_input *in, int arm, bk_rng *rng, size_t n, double lo,
                            double hi)
{
    bk_score_arm *a = &in->arms[arm];
    a->present = 1;
    for (int s = 0; s < in->nshapes; s++) {
        a->cp[s] = uniform(rng, n, lo * (s + 1), hi * (s + 1));
        a->n[s] = n;
    }
}

/* two equal shapes, B and B' around 1000 ns, C around c_mid; quality passed */
static inline void bracket(bk_score_input *in, double c_mid, double bp_mid, uint64_t seed)
{
    bk_rng rng;
    bk_rng_seed(&rng, seed);
    bk_score_input_init(in);
    in->nshapes = 2;
    in->weights[0] = in->weights[1] = 0.5;
    in->quality = BK_QUALITY_PASS;
    fill_arm(in, BK_ARM_B, &rng, 400, 980, 1020);
    fill_arm(in, BK_ARM_C, &rng, 400, c_mid - 20, c_mid + 20);
    fill_arm(in, BK_ARM_BP, &rng, 400, bp_mid - 20, bp_mid + 20);
}

static inline bk_score score_ok(const bk_score_input *in)
{
    bk_score out;
    bk_err err = { 0 };
    assert_int_equal(bk_score_compute(in, &out, NULL, &err), BK_OK);
    return out;
}

#define assert_has(text, needle) assert_non_null(strstr((text), (needle)))

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* a fresh input of two shapes weighted 0.25 and 0.75, quality passed */
static inline void two_shapes(bk_score_input *in)
{
    bk_score_input_init(in);
    in->nshapes = 2;
    in->weights[0] = 0.25;
    in->weights[1] = 0.75;
    in->quality = BK_QUALITY_PASS;
}

#endif
