/* cuda_half.h - for unit tests with a cpu half and a cuda half (include after cmocka.h and
 * kernels/catalog.h). In a build with the cuda backend the cuda half must run: its variant
 * missing from the catalog fails the test. Without it, the half is skipped and says so in a
 * "SKIPPED:" line (scripts/list-skips.sh counts it), while the cpu half has passed. */
#ifndef BK_TESTS_CUDA_HALF_H
#define BK_TESTS_CUDA_HALF_H

static inline int bk_test_cuda_half(const char *target, const char *variant, const char *test)
{
#ifdef BK_HAVE_CUDA
    if (!bk_catalog_variant(target, variant))
        fail_msg("%s: a cuda build whose catalog has no %s", test, variant);
    return 1;
#else
    (void)target;
    print_message("SKIPPED: %s's cuda half (%s): this build has no cuda backend\n", test, variant);
    return 0;
#endif
}

#endif
