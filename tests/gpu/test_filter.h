/* test_filter.h - BK_TEST_FILTER=PATTERN for the cmocka GPU test programs: only the tests
 * whose names match cmocka's pattern ('*' and '?') run, and the program says so. For one test
 * under a sanitizer or beside a load (scripts/gpu-run.sh's pdlstress step; by hand with
 * compute-sanitizer) or the test a sabotage must fail (its break step). Include after
 * <cmocka.h>. */
#ifndef BK_TEST_FILTER_H
#define BK_TEST_FILTER_H

#include <stdio.h>
#include <stdlib.h>

static inline void bk_test_filter(const char *prog)
{
    const char *only = getenv("BK_TEST_FILTER");
    if (only && *only) {
        cmocka_set_test_filter(only);
        printf("%s: only the tests matching %s (BK_TEST_FILTER)\n", prog, only);
    }
}

#endif
