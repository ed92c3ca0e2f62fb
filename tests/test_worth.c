/* test_worth.c - the materiality bound and the `bracket worth` command (run in-process). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/score.h"

static void test_bound(void **state)
{
    (void)state;
    double b = 0;
    bk_err err = { 0 };
    /* ARENA.md's worked example: f 0.08, k 2 -> 1.0417 */
    assert_int_equal(bk_worth_bound(0.08, 2.0, &b, &err), BK_OK);
    assert_true(fabs(b - 1.0 / 0.96) < 1e-12);
    assert_true(fabs(b - 1.0417) < 5e-5);
    /* the whole path made twice as fast: 2; deleting 0.5% of it: ~1.005 */
    assert_int_equal(bk_worth_bound(1.0, 2.0, &b, &err), BK_OK);
    assert_true(fabs(b - 2.0) < 1e-12);
    assert_int_equal(bk_worth_bound(0.005, 1e300, &b, &err), BK_OK);
    assert_true(fabs(b - 1.0 / 0.995) < 1e-12);
    /* a slower slot lowers the bound below 1 */
    assert_int_equal(bk_worth_bound(0.5, 0.5, &b, &err), BK_OK);
    assert_true(fabs(b - 1.0 / 1.5) < 1e-12);
}

static void test_bound_rejects(void **state)
{
    (void)state;
    const double bad[][2] = { { 0.0, 2.0 }, { -0.1, 2.0 }, { 1.5, 2.0 }, { NAN, 2.0 },
                              { 0.5, 0.0 }, { 0.5, -1.0 }, { 0.5, INFINITY }, { 0.5, NAN } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double b = 0;
        bk_err err = { 0 };
        assert_int_equal(bk_worth_bound(bad[i][0], bad[i][1], &b, &err), BK_ERR_INPUT);
        assert_true(isnan(b));
        assert_true(strstr(err.msg, "fraction") || strstr(err.msg, "speed-up"));
    }
}

static void test_clears(void **state)
{
    (void)state;
    assert_int_equal(bk_worth_clears(1.0417, 0.01), 1);
    assert_int_equal(bk_worth_clears(1.004, 0.01), 0);
    assert_int_equal(bk_worth_clears(1.01, 0.01), 0); /* equal is not clearing */
    assert_int_equal(bk_worth_clears(0.9, 0.0), 0);
}

/* Run bk_cmd_worth with stdout captured into `out`; returns its exit status. */
static int run_worth(char *out, size_t len, const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = "worth";
    for (; args[argc - 1]; argc++)
        argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
    char path[] = "/tmp/bk_test_worth_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDOUT_FILENO) >= 0);
    int rc = bk_cmd_worth(argc, argv);
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    ssize_t n = pread(fd, out, len - 1, 0);
    assert_true(n >= 0);
    out[n] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static void test_command(void **state)
{
    (void)state;
    char out[4096];
    const char *ex[] = { "--fraction", "0.08", "--speedup", "2", "--noise", "0.01", NULL };
    assert_int_equal(run_worth(out, sizeof out, ex), 0);
    assert_non_null(strstr(out, "1.0417"));
    assert_non_null(strstr(out, "+4.17%"));
    assert_non_null(strstr(out, "worth an experiment"));

    const char *small[] = { "-f", "0.005", "-k", "1e9", "-n", "0.01", NULL };
    assert_int_equal(run_worth(out, sizeof out, small), 0);
    assert_non_null(strstr(out, "choose another target"));

    /* a slower slot is a slowdown, with or without a noise to clear */
    const char *slower[] = { "-f", "0.08", "-k", "0.5", "-n", "0.01", NULL };
    assert_int_equal(run_worth(out, sizeof out, slower), 0);
    assert_non_null(strstr(out, "-7.41%"));
    assert_non_null(strstr(out, "a slowdown, not a gain"));
    assert_null(strstr(out, "choose another target"));
    const char *slower_nn[] = { "-f", "0.08", "-k", "0.5", NULL };
    assert_int_equal(run_worth(out, sizeof out, slower_nn), 0);
    assert_non_null(strstr(out, "makes the stack slower"));

    const char *nonoise[] = { "-f0.5", "--speedup=2", NULL };
    assert_int_equal(run_worth(out, sizeof out, nonoise), 0);
    assert_non_null(strstr(out, "1.3333"));
    assert_null(strstr(out, "noise"));

    /* a bound equal to 1 + N as printed does not clear it, and is not called "below" it */
    const char *equal[] = { "-f", "1", "-k", "1.01", "-n", "0.01", NULL };
    assert_int_equal(run_worth(out, sizeof out, equal), 0);
    assert_non_null(strstr(out, "resolvable noise   1.00%  -> does not clear the arena's "
                                "resolvable noise (the bound must exceed 1 + N): choose another "
                                "target"));
    /* no speed-up is no gain, whatever the noise */
    const char *none[] = { "-f", "0.1", "-k", "1", "-n", "0", NULL };
    assert_int_equal(run_worth(out, sizeof out, none), 0);
    assert_non_null(strstr(out, "-> no gain (a slot speed-up of 1): nothing to qualify"));
    /* a bound that rounds to 1 from a real speed-up is no gain to clear, not "a speed-up of 1" */
    const char *tiny[] = { "-f", "1e-17", "-k", "2", "-n", "0", NULL };
    assert_int_equal(run_worth(out, sizeof out, tiny), 0);
    assert_non_null(strstr(out, "-> does not clear the arena's resolvable noise"));
    assert_null(strstr(out, "no gain"));
    /* a real gain too small for four decimals is not shown as +0.00%, nor its bound as 1 */
    const char *gain[] = { "-f", "1e-6", "-k", "2", "-n", "0", NULL };
    assert_int_equal(run_worth(out, sizeof out, gain), 0);
    assert_non_null(strstr(out, "end-to-end bound   1.0000005  (+5e-05%)\n"));
    assert_non_null(strstr(out, "-> worth an experiment"));
    const char *smaller[] = { "-f", "1e-15", "-k", "2", NULL };
    assert_int_equal(run_worth(out, sizeof out, smaller), 0);
    assert_non_null(strstr(out, "end-to-end bound   1.0000000000000004  (+4.44e-14%)\n"));
    const char *lower[] = { "-f", "1e-6", "-k", "0.5", NULL };
    assert_int_equal(run_worth(out, sizeof out, lower), 0);
    assert_non_null(strstr(out, "end-to-end bound   0.999999  (-0.0001%)\n"));
    /* -0 is printed as 0; a noise just below 1 is not rounded to 100% */
    const char *negzero[] = { "-f", "0.1", "-k", "2", "-n", "-0", NULL };
    assert_int_equal(run_worth(out, sizeof out, negzero), 0);
    assert_non_null(strstr(out, "resolvable noise   0.00%  -> worth an experiment"));
    const char *high[] = { "-f", "0.5", "-k", "2", "-n", "0.9999999", NULL };
    assert_int_equal(run_worth(out, sizeof out, high), 0);
    assert_non_null(strstr(out, "resolvable noise   99.99999%"));
    /* a huge bound in significant digits, not hundreds of them */
    const char *huge[] = { "-f", "1", "-k", "1e300", NULL };
    assert_int_equal(run_worth(out, sizeof out, huge), 0);
    assert_non_null(strstr(out, "end-to-end bound   1e+300  (+1e+302%)\n"));
    assert_true(strlen(out) < 100);
    /* ... and no "+inf%" where the percentage passes what a double holds */
    const char *inf[] = { "-f", "1", "-k", "1e308", NULL };
    assert_int_equal(run_worth(out, sizeof out, inf), 0);
    assert_non_null(strstr(out, "end-to-end bound   1e+308\n"));
    assert_null(strstr(out, "inf"));
    /* a subnormal noise is a noise above 0, not "out of range", nor shown as 0 */
    const char *sub[] = { "-f", "0.5", "-k", "2", "-n", "1e-320", NULL };
    assert_int_equal(run_worth(out, sizeof out, sub), 0);
    assert_non_null(strstr(out, "resolvable noise   1e-318%  -> worth an experiment"));
    /* nor a noise that ten digits round to 100% */
    const char *closer[] = { "-f", "0.5", "-k", "2", "-n", "0.9999999999999", NULL };
    assert_int_equal(run_worth(out, sizeof out, closer), 0);
    assert_null(strstr(out, "noise   100%"));

    const char *help[] = { "--help", NULL };
    assert_int_equal(run_worth(out, sizeof out, help), 0);
    assert_non_null(strstr(out, "--fraction"));
    assert_non_null(strstr(out, "default"));
}

static void test_command_rejects(void **state)
{
    (void)state;
    char out[4096];
    const char *cases[][8] = {
        { "--speedup", "2", NULL },                       /* missing --fraction */
        { "--fraction", "0.1", NULL },                    /* missing --speedup */
        { "-f", "0", "-k", "2", NULL },                   /* f not in (0, 1] */
        { "-f", "1.2", "-k", "2", NULL },
        { "-f", "0.1", "-k", "0", NULL },                 /* k <= 0 */
        { "-f", "0.1", "-k", "-3", NULL },
        { "-f", "0.1x", "-k", "2", NULL },                /* garbage numbers */
        { "-f", "abc", "-k", "2", NULL },
        { "-f", " 0.1", "-k", "2", NULL },               /* blanks: not the whole number */
        { "-f", "0.1 ", "-k", "2", NULL },
        { "-f", "0x1p-3", "-k", "2", NULL },             /* hexadecimal: not a decimal */
        { "-f", "-0X1", "-k", "2", NULL },
        { "-f", "0.1", "-k", "nan", NULL },
        { "-f", "0.1", "-k", "2", "-n", "-0.01", NULL },  /* negative noise */
        { "-f", "0.1", "-k", "2", "-n", "5", NULL },      /* 500%: a percentage, not a fraction */
        { "-f", "0.1", "-k", "2", "-n", "1", NULL },
        { "-f", "0.1", "-k", "2", "--bogus", NULL },      /* unknown option */
        { "-f", "0.1", "-k", "2", "extra", NULL },        /* stray argument */
        { "-f", "0.1", "-k", NULL },                      /* option without its value */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(run_worth(out, sizeof out, cases[i]), BK_EXIT_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_bound_rejects),
        cmocka_unit_test(test_clears),
        cmocka_unit_test(test_command),
        cmocka_unit_test(test_command_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
