/* test_cublas_lazy.c - cuBLAS loaded on first use: every entry point resolves from the
 * library the build names, a call through one works (cublasGetStatusString needs no GPU),
 * a second call gives the same table, and the bracket binary no longer links cuBLAS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BK_HAVE_CUDA
#include "kernels/cublas_lazy.h"

static void test_loads_and_resolves(void **state)
{
    (void)state;
    const bk_cublas *a = NULL, *b = NULL;
    bk_err err = { 0 };
    if (bk_cublas_get(&a, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_non_null(a->create);
    assert_non_null(a->destroy);
    assert_non_null(a->set_workspace);
    assert_non_null(a->set_stream);
    assert_non_null(a->gemm_ex);
    assert_non_null(a->status_string);
    /* the wording moves between versions ("success", "CUBLAS_STATUS_SUCCESS"): two
     * codes give two non-empty texts */
    const char *ok = a->status_string(CUBLAS_STATUS_SUCCESS),
               *no = a->status_string(CUBLAS_STATUS_NOT_INITIALIZED);
    assert_non_null(ok);
    assert_non_null(no);
    assert_true(ok[0] && no[0] && strcmp(ok, no) != 0);
    assert_int_equal(bk_cublas_get(&b, &err), BK_OK);
    assert_ptr_equal(a, b);
}

/* the point of loading it lazily: `bracket` itself does not need libcublas to start */
static void test_bracket_does_not_link_cublas(void **state)
{
    (void)state;
    const char *exe = getenv("BK_BRACKET");
    if (!exe || !exe[0])
        skip();
    char cmd[1200], line[512];
    snprintf(cmd, sizeof cmd, "ldd '%s' 2>&1", exe);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int lines = 0, blas = 0;
    while (fgets(line, sizeof line, p)) {
        lines++;
        blas |= strstr(line, "libcublas") != NULL;
    }
    pclose(p);
    assert_true(lines > 3); /* ldd ran and listed libraries */
    if (blas)
        fail_msg("%s links libcublas: every process would pay its start-up", exe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_and_resolves),
        cmocka_unit_test(test_bracket_does_not_link_cublas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("SKIP: built without CUDA (no cuBLAS to load)\n");
    return 77;
}
#endif
