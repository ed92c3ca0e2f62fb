/* test_rmsnorm_cfg.c - the residual + RMSNorm launch configurations' block shapes
 * (bk_rmsnorm_cfg_threads, the rule the launchers and bench_rmsnorm share): threads per
 * block from about-so-many threads per row, and the refusals (threads per row out of range,
 * more than 8 vectors per thread, more than 2 above 512 threads, gamma early off the lean
 * kernel or above 2 vectors per thread), which
 * bk_residual_rmsnorm_config must refuse alike. Host code only: no GPU is needed, but the
 * build must have the cuda backend (exit 77, skipped, without it). */
#include <stdio.h>

#ifndef BK_HAVE_CUDA
int main(void)
{
    printf("SKIP: this build has no cuda backend (no CUDA toolkit at configure time)\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "kernels/cuda_variants.h"

typedef struct cfg_case {
    bk_rmsnorm_kernel kernel;
    int threads;
    int64_t hidden;
    int want; /* threads per block, 0: refused */
    int early; /* gamma_early */
} cfg_case;

static const cfg_case k_cases[] = {
    {BK_RMSNORM_ROW, 512, 8192, 512, 0},    /* 2 vectors a thread */
    {BK_RMSNORM_ROW, 512, 16384, 512, 0},   /* 4 */
    {BK_RMSNORM_ROW, 512, 7168, 448, 0},    /* 896 vectors: 2 a thread, 448 threads */
    {BK_RMSNORM_ROW, 32, 4104, 0, 0},       /* 17 vectors a thread */
    {BK_RMSNORM_ROW, 600, 4096, 0, 0},      /* over 512 threads per row */
    {BK_RMSNORM_ROW, 16, 4096, 0, 0},       /* under 32 */
    {BK_RMSNORM_LEAN, 1024, 8192, 1024, 0}, /* one vector a thread */
    {BK_RMSNORM_LEAN, 1024, 16384, 1024, 0},
    {BK_RMSNORM_LEAN, 1024, 7168, 896, 0},
    {BK_RMSNORM_LEAN, 1024, 6144, 768, 0},
    {BK_RMSNORM_LEAN, 256, 8, 32, 0},       /* one vector: a warp */
    {BK_RMSNORM_LEAN, 700, 16384, 0, 0},    /* 3 vectors at 704 threads */
    {BK_RMSNORM_LEAN, 1024, 19200, 0, 0},   /* 3 vectors at 800 threads */
    {BK_RMSNORM_LEAN, 1025, 4096, 0, 0},
    {BK_RMSNORM_PIPE, 1024, 12288, 768, 0},
    {BK_RMSNORM_PIPE, 512, 16384, 512, 0},
    {BK_RMSNORM_PIPE, 1024, 24576, 0, 0},   /* 3 vectors at 1024 threads */
    {BK_RMSNORM_LEAN, 512, 4096, 512, 1},   /* gamma early: one vector a thread */
    {BK_RMSNORM_LEAN, 1024, 16384, 1024, 1}, /* 2 */
    {BK_RMSNORM_LEAN, 512, 8192, 512, 1},   /* 2 */
    {BK_RMSNORM_LEAN, 512, 12288, 0, 1},    /* 3 vectors: more than gamma early takes */
    {BK_RMSNORM_LEAN, 256, 8192, 0, 1},     /* 4 */
    {BK_RMSNORM_ROW, 512, 4096, 0, 1},      /* gamma early is the lean kernel's */
    {BK_RMSNORM_PIPE, 512, 4096, 0, 1},
};

static void test_block_shapes(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const cfg_case *c = &k_cases[i];
        const bk_rmsnorm_cfg cfg = {c->kernel, c->threads, 0, 0, 0, c->early};
        const int got = bk_rmsnorm_cfg_threads(&cfg, c->hidden);
        if (got != c->want)
            fail_msg("kernel %d, %d threads per row, hidden %lld, gamma early %d: %d threads "
                     "per block, want %d", (int)c->kernel, c->threads, (long long)c->hidden,
                     c->early, got, c->want);
    }
}

/* What the rule refuses, the launcher refuses before touching the device (so NULL
 * pointers are fine here), naming the threads (or gamma_early). */
static void test_launcher_agrees(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const cfg_case *c = &k_cases[i];
        if (c->want != 0 || c->hidden > 16384)
            continue; /* accepted shapes would launch; hidden over 16384 fails earlier */
        const bk_rmsnorm_cfg cfg = {c->kernel, c->threads, 0, 0, 0, c->early};
        bk_err err;
        bk_err_clear(&err);
        assert_int_equal(bk_residual_rmsnorm_config(NULL, NULL, NULL, NULL, NULL, 4, c->hidden,
                                                    1e-6f, &cfg, NULL, &err),
                         BK_ERR_INPUT);
        assert_non_null(strstr(err.msg, c->early ? "gamma_early" : "threads"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_shapes),
        cmocka_unit_test(test_launcher_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
