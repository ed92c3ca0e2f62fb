/* test_rmsnorm_cfg.c - the residual + RMSNorm launch configurations' block shapes
 * (bk_rmsnorm_cfg_threads, the rule the launchers and bench_rmsnorm share): threads per
 * block from about-so-many threads per row, and the refusals (threads per row out of range,
 * more than 8 vectors per thread, more than 2 above 512 threads, gamma early off the lean
 * kernel or above 2 vectors per thread), which
 * bk_residual_rmsnorm_config must refuse alike, and its refusals of cfg.split. Host code only: no GPU is needed, but the
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
        const bk_rmsnorm_cfg cfg = {c->kernel, c->threads, 0, 0, 0, c->early, 0, 0};
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
        const bk_rmsnorm_cfg cfg = {c->kernel, c->threads, 0, 0, 0, c->early, 0, 0};
        bk_err err;
        bk_err_clear(&err);
        assert_int_equal(bk_residual_rmsnorm_config(NULL, NULL, NULL, NULL, NULL, 4, c->hidden,
                                                    1e-6f, &cfg, NULL, &err),
                         BK_ERR_INPUT);
        assert_non_null(strstr(err.msg, c->early ? "gamma_early" : "threads"));
    }
}

/* The default launch rule never picks a configuration its own launcher refuses: every
 * hidden the target takes (multiples of 8 up to 16384) at token counts on both sides of
 * the rule's switches, on this machine (bk_rmsnorm_default_cfg) and on any other the rule
 * may be given (its blocks per SM come from the device at run time): few or many SMs, few
 * or many blocks, unknown counts. */
static const bk_rmsnorm_occ k_machines[] = {
    {114, 4, 5, 6}, {78, 2, 3, 4}, {132, 9, 9, 9}, {1, 1, 1, 1}, {200, 0, 8, 8}, {16, 32, 32, 32},
};

static void test_rule_runs_anywhere(void **st)
{
    (void)st;
    static const int64_t tokens[] = {1, 63, 64, 255, 256, 300, 457, 535, 600, 642, 700, 1023,
                                     1024, 5000};
    int one_wave = 0;
    for (size_t m = 0; m < sizeof k_machines / sizeof k_machines[0]; m++)
        for (int64_t h = 8; h <= 16384; h += 8)
            for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
                bk_rmsnorm_cfg cfg;
                memset(&cfg, 0xA5, sizeof cfg);
                bk_rmsnorm_rule_cfg(tokens[t], h, 0, &k_machines[m], &cfg);
                if (bk_rmsnorm_cfg_threads(&cfg, h) == 0 || cfg.split < 1 || cfg.split > 8 ||
                    (cfg.stream_hint != 0 && cfg.stream_hint != 1) ||
                    (cfg.pdl != 0 && cfg.pdl != 1) ||
                    (cfg.gamma_early != 0 && cfg.gamma_early != 1))
                    fail_msg("rule on machine %zu at %lld x %lld: kernel %d, %d threads, gamma "
                             "early %d, split %d, hint %d, pdl %d: not a launch it can make", m,
                             (long long)tokens[t], (long long)h, (int)cfg.kernel, cfg.threads,
                             cfg.gamma_early, cfg.split, cfg.stream_hint, cfg.pdl);
                one_wave += !cfg.gamma_early && cfg.kernel == BK_RMSNORM_LEAN && h <= 8192;
            }
    assert_true(one_wave > 0);
}

static void test_default_rule_runs(void **st)
{
    (void)st;
    static const int64_t tokens[] = {1,    15,   16,   63,   64,   255,   256,   264,
                                     265,  351,  352,  396,  397,  494,   495,   511,
                                     512,  528,  529,  618,  619,  660,   661,   742,
                                     743,  792,  793,  1023, 1024, 4096,  4097,  16383,
                                     16384, 1 << 20};
    int early = 0, late = 0, split = 0, pdl = 0;
    for (int64_t h = 8; h <= 16384; h += 8)
        for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++)
            for (int in_place = 0; in_place < 2; in_place++) {
                bk_rmsnorm_cfg cfg;
                memset(&cfg, 0xA5, sizeof cfg); /* every field must be set by the rule */
                bk_rmsnorm_default_cfg(tokens[t], h, in_place, &cfg);
                /* in place a row's blocks would read what another has written */
                if (in_place && cfg.split > 1)
                    fail_msg("default rule at %lld x %lld in place: split %d",
                             (long long)tokens[t], (long long)h, cfg.split);
                split += cfg.split > 1;
                if (bk_rmsnorm_cfg_threads(&cfg, h) == 0)
                    fail_msg("default rule at %lld x %lld: kernel %d, %d threads, gamma early %d "
                             "is refused by its launcher", (long long)tokens[t], (long long)h,
                             (int)cfg.kernel, cfg.threads, cfg.gamma_early);
                if (cfg.split < 1 || cfg.split > 8)
                    fail_msg("default rule at %lld x %lld: split %d", (long long)tokens[t],
                             (long long)h, cfg.split);
                if (cfg.stream_hint != 0 && cfg.stream_hint != 1)
                    fail_msg("default rule at %lld x %lld: stream_hint %d", (long long)tokens[t],
                             (long long)h, cfg.stream_hint);
                if (cfg.pdl != 0 && cfg.pdl != 1)
                    fail_msg("default rule at %lld x %lld: pdl %d", (long long)tokens[t],
                             (long long)h, cfg.pdl);
                pdl += cfg.pdl;
                early += cfg.gamma_early == 1;
                late += cfg.gamma_early == 0;
            }
    assert_int_equal(early + late, 2 * 2048 * (int)(sizeof tokens / sizeof tokens[0]));
    assert_true(early > 0 && late > 0);
    assert_true(split > 0); /* out of place at few tokens */
    assert_true(pdl > 0 && pdl < early + late);
}

/* Threads per row (and gamma early) where the rule switches, on the H200 (132 SMs, the
 * blocks per SM of bk_rmsnorm_occ_h200): 512 of 2 vectors from 256 tokens to one wave of the
 * 512-thread launch above hidden 4096 (528 rows at 4616-6144, 396 at 6664-8192 and
 * 9992-12288, 264 at 15368-16384), and at 10760-12288 from 144 tokens to half that wave
 * (198), 1024 past it, below 256 and from 1024 tokens (without gamma early at 160-192 to
 * hidden 12288, and at 9992-10752 on to half the wave)
 * (docs/bench/cuda.md); above 8192 the 512 are without gamma early, and at 15368-16384 back
 * at 352-1023; up to 8192, 512 or else 256 without gamma early where the rows fill one wave
 * of them to 15/16 or more (512: 528 rows at 6664-8192, so 495-528; 660 at 5640-6144, so
 * 619-660; 792 at 4616-5120; 256: 792 at 4616-6144, 660 at 6152-8192), past the 512-thread
 * launch's wave; where that wave is not known (4097-4615, 6145-6663, 8193-9991 and
 * 12289-15367) 512 at 256-1023. */
static void test_default_rule_threads(void **st)
{
    (void)st;
    static const struct { int64_t tokens, hidden; int threads, early; } k[] = {
        {255, 7168, 1024, 1},  {256, 7168, 512, 1},   {396, 7168, 512, 1},
        {159, 8200, 1024, 1},  {160, 8200, 1024, 0},  {192, 12288, 512, 0},
        {143, 12288, 1024, 1}, {144, 12288, 512, 0},  {144, 10760, 512, 0},
        {144, 10752, 1024, 1}, {160, 10752, 1024, 0}, {198, 11776, 512, 0},
        {199, 12288, 1024, 1}, {198, 12296, 1024, 1}, {192, 10760, 512, 0},
        {193, 10240, 1024, 0}, {198, 9992, 1024, 0},  {196, 10752, 1024, 0},
        {199, 10752, 1024, 1}, {199, 9992, 1024, 1},  {198, 9984, 1024, 1},
        {193, 10760, 512, 0},  {160, 12296, 1024, 1}, {192, 15360, 1024, 1},
        {160, 15368, 1024, 0}, {255, 16384, 1024, 0}, {256, 16384, 512, 0},
        {397, 7168, 1024, 1},  {494, 8192, 1024, 1},  {495, 6664, 512, 0},
        {511, 7168, 512, 0},   {528, 8192, 512, 0},   {529, 8192, 1024, 1},
        {511, 6656, 512, 1},   {511, 9992, 1024, 1},
        {1023, 8192, 1024, 1}, {528, 6144, 512, 1},   {529, 6144, 1024, 1},
        {448, 6144, 512, 1},   {529, 4616, 1024, 1},  {529, 4608, 512, 1},
        {1023, 5120, 1024, 1}, {1024, 8192, 1024, 1}, {448, 4096, 512, 1},
        {600, 4096, 512, 1},   {397, 6152, 512, 1},   {1023, 6656, 512, 1},
        {397, 6664, 1024, 1},  {255, 8200, 1024, 1},  {256, 8200, 512, 0},
        {1023, 9984, 512, 0},  {396, 12288, 512, 0},  {397, 9992, 1024, 1},
        {1023, 12288, 1024, 1}, {300, 12296, 512, 0}, {300, 15360, 512, 0},
        {264, 15368, 512, 0},  {265, 16384, 1024, 1}, {351, 16384, 1024, 1},
        {352, 16384, 512, 0},  {1023, 16384, 512, 0}, {1024, 16384, 1024, 1},
        /* the one-wave launches */
        {742, 5120, 1024, 1},  {743, 5120, 512, 0},   {792, 4616, 512, 0},
        {793, 5120, 1024, 1},  {618, 6144, 1024, 1},  {619, 6144, 512, 0},
        {660, 5640, 512, 0},   {661, 6144, 1024, 1},  {742, 6144, 1024, 1},
        {743, 6144, 256, 0},   {792, 6144, 256, 0},   {793, 6144, 1024, 1},
        {660, 5632, 1024, 1},  {618, 7168, 1024, 1},  {619, 6664, 256, 0},
        {660, 8192, 256, 0},   {661, 8192, 1024, 1},  {743, 4608, 512, 1},
        {640, 8200, 512, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg;
        bk_rmsnorm_rule_cfg(k[i].tokens, k[i].hidden, 0, NULL, &cfg);
        if (cfg.threads != k[i].threads || cfg.gamma_early != k[i].early)
            fail_msg("rule on the H200 at %lld x %lld: %d threads per row, gamma early %d; want "
                     "%d, %d", (long long)k[i].tokens, (long long)k[i].hidden, cfg.threads,
                     cfg.gamma_early, k[i].threads, k[i].early);
        /* without hints: the one-wave launches, and above 8192 the 1024-thread launches
         * without gamma early below 256 tokens (160-192 x 8193-12288, 193-198 x 9992-10752,
         * 160-255 x 15368-16384); the rest from 64 tokens, the 512-thread launch above 8192
         * too */
        if (cfg.stream_hint != (cfg.gamma_early || (k[i].hidden > 8192 &&
                                                    (k[i].tokens >= 256 || cfg.threads == 512))))
            fail_msg("rule on the H200 at %lld x %lld: stream_hint %d", (long long)k[i].tokens,
                     (long long)k[i].hidden, cfg.stream_hint);
    }
}

/* Rows over several blocks below 64 tokens out of place (8 a row to 8 tokens from hidden
 * 8192, 4 to 32, 2 below 64), one in place; the evict-first hint from 64 tokens (from 16 at
 * hidden 8192 and up), but not on split rows of 16 tokens or fewer (thirty-third session). */
static void test_default_rule_split(void **st)
{
    (void)st;
    static const struct { int64_t tokens, hidden; int in_place, split, hint; } k[] = {
        {1, 8192, 0, 8, 0},    {8, 8192, 0, 8, 0},    {9, 8192, 0, 4, 0},
        {15, 12288, 0, 4, 0},  {16, 8192, 0, 4, 0},   {16, 16384, 0, 4, 0},
        {16, 8192, 1, 1, 1},   {15, 8192, 1, 1, 0},   {17, 8192, 0, 4, 1},
        {32, 10240, 0, 4, 1},  {33, 8192, 0, 2, 1},   {63, 8192, 0, 2, 1},
        {64, 8192, 0, 1, 1},   {8, 7168, 0, 4, 0},    {16, 7168, 0, 4, 0},
        {32, 4096, 0, 4, 0},   {33, 4096, 0, 2, 0},   {63, 6144, 0, 2, 0},
        {64, 6144, 0, 1, 1},   {63, 6144, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg;
        bk_rmsnorm_rule_cfg(k[i].tokens, k[i].hidden, k[i].in_place, NULL, &cfg);
        if (cfg.split != k[i].split || cfg.stream_hint != k[i].hint)
            fail_msg("rule at %lld x %lld%s: split %d, hint %d; want %d, %d",
                     (long long)k[i].tokens, (long long)k[i].hidden,
                     k[i].in_place ? " in place" : "", cfg.split, cfg.stream_hint, k[i].split,
                     k[i].hint);
    }
}

/* The waves move with the machine the rule is given: 114 SMs with 4, 5 and 6 blocks an SM
 * (mid, l512, l256) at hidden 6144 put the switches at 456 / 457 rows (1024 threads), 535-570
 * (512 without gamma early), 642-684 (256); unknown counts give the older rule (512 with
 * gamma early at 256-1023); above 8192 the one-wave launches are not weighed. At
 * 10760-12288 the 512-thread launch from 144 tokens to half the wave: to 171 on 114 SMs of
 * 3 blocks (342 rows), nowhere where the counts are unknown. At 9992-10752 the 1024-thread
 * launch without gamma early past 192 tokens to half the wave: to 228 on 114 SMs of 4 blocks
 * (456 rows), not at all with 3 (171), nowhere unknown. */
static void test_rule_other_machines(void **st)
{
    (void)st;
    const bk_rmsnorm_occ m114 = {114, 4, 5, 6}, unknown = {132, 0, 0, 0}, big = {114, 3, 9, 9};
    static const struct { int m; int64_t tokens, hidden; int threads, early; } k[] = {
        {0, 456, 6144, 512, 1}, {0, 457, 6144, 1024, 1}, {0, 534, 6144, 1024, 1},
        {0, 535, 6144, 512, 0}, {0, 570, 6144, 512, 0},  {0, 571, 6144, 1024, 1},
        {0, 641, 6144, 1024, 1}, {0, 642, 6144, 256, 0}, {0, 684, 6144, 256, 0},
        {0, 685, 6144, 1024, 1}, {0, 1024, 6144, 1024, 1}, {0, 255, 6144, 1024, 1},
        {1, 700, 7168, 512, 1},  {1, 1023, 5120, 512, 1}, {1, 397, 10240, 512, 0},
        {2, 343, 12288, 1024, 1}, {2, 342, 12288, 512, 0}, {2, 1000, 10240, 1024, 1},
        {2, 144, 12288, 512, 0}, {2, 171, 11264, 512, 0}, {2, 172, 12288, 1024, 0},
        {2, 143, 12288, 1024, 1}, {1, 160, 12288, 1024, 0}, {1, 144, 12288, 1024, 1},
        {0, 228, 10240, 1024, 0}, {0, 229, 10240, 1024, 1}, {2, 193, 10240, 1024, 1},
        {1, 193, 10240, 1024, 1}, {0, 200, 9984, 1024, 1},
    };
    const bk_rmsnorm_occ *m[] = {&m114, &unknown, &big};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg;
        bk_rmsnorm_rule_cfg(k[i].tokens, k[i].hidden, 0, m[k[i].m], &cfg);
        if (cfg.threads != k[i].threads || cfg.gamma_early != k[i].early)
            fail_msg("rule on machine %d at %lld x %lld: %d threads per row, gamma early %d; "
                     "want %d, %d", k[i].m, (long long)k[i].tokens, (long long)k[i].hidden,
                     cfg.threads, cfg.gamma_early, k[i].threads, k[i].early);
    }
}

/* Without a device bk_rmsnorm_occ_device answers the H200's counts (and says so: 0), and
 * the default rule is the rule on them; with one, its own SMs. */
static void test_occ_device(void **st)
{
    (void)st;
    static const int64_t hidden[] = {4096, 4608, 5120, 6144, 7168, 8192, 10240, 12288, 16384};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        bk_rmsnorm_occ dev, h200;
        bk_rmsnorm_occ_h200(hidden[i], &h200);
        if (bk_rmsnorm_occ_device(hidden[i], &dev)) {
            assert_true(dev.sms > 0);
            continue; /* a GPU's own counts: tests/gpu/test_rmsnorm_cuda.c checks them */
        }
        assert_memory_equal(&dev, &h200, sizeof dev);
        for (int64_t t = 1; t < 1100; t++) { /* every token count the rule weighs the counts at */
            bk_rmsnorm_cfg a, b;
            bk_rmsnorm_default_cfg(t, hidden[i], 0, &a);
            bk_rmsnorm_rule_cfg(t, hidden[i], 0, NULL, &b);
            assert_memory_equal(&a, &b, sizeof a);
        }
    }
    bk_rmsnorm_occ o;
    bk_rmsnorm_occ_h200(7168, &o);
    assert_int_equal(o.sms, 132);
    assert_int_equal(o.mid, 3);
    assert_int_equal(o.l512, 4);
    assert_int_equal(o.l256, 5);
    bk_rmsnorm_occ_h200(4608, &o); /* not measured */
    assert_int_equal(o.mid + o.l512 + o.l256, 0);
}

/* bk_rmsnorm_call_cfg: in place (one block a row) when the sum overlaps either output, even
 * in part; a row over several blocks when all three are apart (4 tokens x 4096). The
 * pointers are only compared. */
static void test_call_cfg_in_place(void **st)
{
    (void)st;
    static char buf[4 * 4096 * 2 * 4];
    const size_t row = 4096 * 2, plane = 4 * row;
    char *sum = buf, *ro = buf + plane, *out = buf + 2 * plane;
    const struct { const void *sum, *ro, *out; int split_one; } k[] = {
        {sum, ro, out, 0},              /* apart */
        {sum, sum, out, 1},             /* x == residual_out: the incumbent's call */
        {sum, ro, sum, 1},              /* out over the sum */
        {sum + row, sum, out, 1},       /* residual_out overlaps the sum's first 3 rows */
        {sum, ro, sum + plane - 2, 1},  /* out starts on the sum's last element */
        {sum, sum + plane, out, 0},     /* residual_out starts right after the sum */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg;
        bk_rmsnorm_call_cfg(k[i].sum, k[i].ro, k[i].out, 4, 4096, &cfg);
        if ((cfg.split == 1) != k[i].split_one)
            fail_msg("case %zu: split %d, want %s", i, cfg.split, k[i].split_one ? "1" : "> 1");
    }
}

/* Programmatic dependent launch where it measured faster (docs/bench/cuda.md): everywhere
 * but hidden 4097-6144 at 272-463 tokens, 6145-8192 at 256-351 and 8193-12288 at 256-383,
 * 11265-12288 at 199-224 (past half the 512-thread launch's wave, 1024 threads with gamma
 * early; H100, thirty-sixth session), and 15368-16384 at 160-255 (the launch without gamma
 * early there, measured on the H100);
 * nowhere once the process turns it off. Each band's edges on both sides. These are the
 * bands of the H200 table's wave (the rule given no machine: bk_rmsnorm_rule_cfg with NULL);
 * on a device whose counts differ they move (test_rule_pdl_waves). On the H200 itself the
 * device's counts at hidden 4104 differ from the table's (which has none there): this test,
 * when it asked bk_rmsnorm_default_cfg, failed there with pdl 1 at 272 x 4104 (2026-12-05). */
static void test_default_rule_pdl(void **st)
{
    (void)st;
    static const struct { int64_t tokens, hidden; int pdl; } k[] = {
        {1, 4096, 1},     {1, 8192, 1},      {128, 8192, 1},   {255, 7168, 1},
        {256, 7168, 0},   {351, 8192, 0},    {352, 8192, 1},   {511, 8192, 1},
        {384, 4096, 1},   {271, 6144, 1},    {272, 4104, 0},   {463, 6144, 0},
        {464, 5120, 1},   {1024, 6144, 1},   {255, 12288, 1},  {256, 8200, 0},
        {383, 12288, 0},  {384, 10240, 1},   {300, 12296, 1},  {300, 16384, 1},
        {16384, 8192, 1}, {159, 16384, 1},   {160, 16384, 0},  {255, 15368, 0},
        {256, 16384, 1},  {200, 15360, 1},   {200, 12288, 0},  {198, 12288, 1},
        {199, 12288, 0},  {224, 11272, 0},   {225, 12288, 1},  {210, 11264, 1},
        {210, 12296, 1},
    };
    assert_int_equal(bk_cuda_pdl(), 1); /* on unless turned off */
    for (int on = 1; on >= 0; on--) {
        bk_cuda_pdl_set(on); /* BK_CUDA_PDL=0 in an engine: off at every shape */
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
            for (int in_place = 0; in_place < 2; in_place++) {
                bk_rmsnorm_cfg cfg;
                bk_rmsnorm_rule_cfg(k[i].tokens, k[i].hidden, in_place, NULL, &cfg);
                if (cfg.pdl != (on && k[i].pdl))
                    fail_msg("default rule at %lld x %lld%s, process pdl %d: pdl %d, want %d",
                             (long long)k[i].tokens, (long long)k[i].hidden,
                             in_place ? " in place" : "", on, cfg.pdl, on && k[i].pdl);
            }
    }
    bk_cuda_pdl_set(1);
}

/* The pdl bands move with the device's wave of the 512-thread launch (sms x mid rows): off
 * from max(256, 272 W / 528) to the band's end x W / W0. The H200's counts at 9216 (4 blocks
 * an SM: 528 rows) and 4608 (5: 660), both measured; a machine of 114 SMs at 5120; the
 * table's own wave (10240: 3 an SM, 396) and unknown counts keep the bands of the test
 * above. Each edge on both sides. */
static void test_rule_pdl_waves(void **st)
{
    (void)st;
    const bk_rmsnorm_occ w528 = {132, 4, 0, 0}, w660 = {132, 5, 0, 0}, m114 = {114, 4, 0, 0},
                         w396 = {132, 3, 0, 0}, unknown = {0, 0, 0, 0}, w1320 = {264, 5, 0, 0};
    static const struct { int m; int64_t tokens, hidden; int pdl; } k[] = {
        {0, 256, 9216, 1}, {0, 271, 9216, 1}, {0, 272, 9216, 0}, {0, 384, 9216, 0},
        {0, 511, 9216, 0}, {0, 512, 9216, 1},
        {1, 320, 4608, 1}, {1, 339, 4608, 1}, {1, 340, 4608, 0}, {1, 512, 4608, 0},
        {1, 579, 4608, 0}, {1, 580, 4608, 1}, {1, 640, 4608, 1},
        {2, 255, 5120, 1}, {2, 256, 5120, 0}, {2, 400, 5120, 0}, {2, 401, 5120, 1},
        {3, 255, 10240, 1}, {3, 256, 10240, 0}, {3, 383, 10240, 0}, {3, 384, 10240, 1},
        {4, 255, 9216, 1}, {4, 256, 9216, 0}, {4, 383, 9216, 0}, {4, 384, 9216, 1},
        {4, 463, 5120, 0}, {4, 464, 5120, 1},
        {0, 300, 14848, 1}, {1, 300, 4096, 1}, {0, 1023, 9216, 1},
        {5, 1023, 6144, 0}, {5, 1024, 6144, 1}, /* a wave of 1320 rows: the band ends at 1023 */
        {2, 228, 12288, 1}, {2, 229, 12288, 0}, {2, 257, 12288, 0},
        {4, 198, 12288, 1}, {4, 199, 12288, 0}, {4, 224, 12288, 0}, {4, 225, 12288, 1},
    };
    const bk_rmsnorm_occ *m[] = {&w528, &w660, &m114, &w396, &unknown, &w1320};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg;
        bk_rmsnorm_rule_cfg(k[i].tokens, k[i].hidden, 0, m[k[i].m], &cfg);
        if (cfg.pdl != k[i].pdl)
            fail_msg("rule on machine %d at %lld x %lld: pdl %d, want %d", k[i].m,
                     (long long)k[i].tokens, (long long)k[i].hidden, cfg.pdl, k[i].pdl);
    }
}

/* cfg.split's refusals, made before anything is launched (the pointers are never read):
 * off the lean kernel or without gamma early, other than 0, 1, 2, 4 or 8, a grid over 2^31 - 1 blocks, and in place (sum
 * overlapping residual_out or out, wholly or in part), where a row's blocks would read
 * what another block of the row has already written. */
static void test_split_refusals(void **st)
{
    (void)st;
    static char buf[4][4096];
    const int64_t T = 4, H = 256; /* 2048 bytes a tensor */
    const struct {
        bk_rmsnorm_kernel kernel;
        int split;
        int64_t tokens;
        const void *sum, *ro, *out;
        const char *says;
        int early;
    } k[] = {
        {BK_RMSNORM_ROW, 2, T, buf[0], buf[2], buf[3], "the lean kernel's", 1},
        {BK_RMSNORM_PIPE, 4, T, buf[0], buf[2], buf[3], "the lean kernel's", 1},
        {BK_RMSNORM_LEAN, 16, T, buf[0], buf[2], buf[3], "2, 4 or 8", 1},
        {BK_RMSNORM_LEAN, 3, T, buf[0], buf[2], buf[3], "2, 4 or 8", 1},
        {BK_RMSNORM_LEAN, -1, T, buf[0], buf[2], buf[3], "split -1", 1},
        {BK_RMSNORM_LEAN, 2, (int64_t)1 << 30, buf[0], buf[2], buf[3], "2^31 - 1", 1},
        {BK_RMSNORM_LEAN, 2, T, buf[0], buf[0], buf[3], "in place", 1},
        {BK_RMSNORM_LEAN, 8, T, buf[0], buf[2], buf[0], "in place", 1},
        {BK_RMSNORM_LEAN, 2, T, buf[0], buf[0] + 2046, buf[3], "in place", 1}, /* 2 bytes */
        {BK_RMSNORM_LEAN, 4, T, buf[0] + 1024, buf[2], buf[0], "in place", 1},
        {BK_RMSNORM_LEAN, 2, T, buf[0], buf[2], buf[3], "gamma early", 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bk_rmsnorm_cfg cfg = {k[i].kernel, 512, 0, 0, 0, k[i].early, k[i].split, 0};
        bk_err err = {0};
        const bk_status s = bk_residual_rmsnorm_config(k[i].sum, buf[1], buf[1] + 2048,
                                                       (void *)k[i].ro, (void *)k[i].out,
                                                       k[i].tokens, H, 1e-6f, &cfg, NULL, &err);
        if (s != BK_ERR_INPUT || !strstr(err.msg, k[i].says))
            fail_msg("case %zu: status %d, \"%s\" (want BK_ERR_INPUT saying \"%s\")", i,
                     (int)s, err.msg, k[i].says);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_refusals),
        cmocka_unit_test(test_default_rule_split),
        cmocka_unit_test(test_block_shapes),
        cmocka_unit_test(test_launcher_agrees),
        cmocka_unit_test(test_default_rule_runs),
        cmocka_unit_test(test_rule_runs_anywhere),
        cmocka_unit_test(test_default_rule_threads),
        cmocka_unit_test(test_rule_other_machines),
        cmocka_unit_test(test_occ_device),
        cmocka_unit_test(test_call_cfg_in_place),
        cmocka_unit_test(test_default_rule_pdl),
        cmocka_unit_test(test_rule_pdl_waves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
