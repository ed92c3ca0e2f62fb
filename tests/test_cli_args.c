/* test_cli_args.c - what every subcommand's flag parsing shares (runner/cli_args.c): an
 * integer argument is the whole string and inside its range, its limits included; getopt_long's
 * errors name the flag as written: unknown, ambiguous, missing its value, given one it takes
 * not, or given one of the options as its value (bk_cli_getopt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "runner/cli.h"

static void int_ok(const char *text, long long lo, long long hi, long long want)
{
    char msg[256] = "";
    long long v = -12345;
    if (bk_cli_int("--n", text, lo, hi, &v, msg, sizeof msg) != 0)
        fail_msg("'%s': %s", text, msg);
    assert_true(v == want);
}

static void int_bad(const char *text, long long lo, long long hi, const char *want)
{
    char msg[256] = "";
    long long v = -12345;
    assert_int_equal(bk_cli_int("--n", text, lo, hi, &v, msg, sizeof msg), -1);
    assert_string_equal(msg, want);
    assert_true(v == -12345); /* nothing written on an error */
}

static void test_cli_int(void **state)
{
    (void)state;
    int_ok("1", 1, 8, 1);
    int_ok("8", 1, 8, 8);
    int_ok("-1", -1, 8, -1);
    int_ok("+3", 1, 8, 3);
    int_bad("0", 1, 8, "--n: '0' is out of range (an integer in 1..8)");
    int_bad("9", 1, 8, "--n: '9' is out of range (an integer in 1..8)");
    int_bad("-2", -1, 8, "--n: '-2' is out of range (an integer in -1..8)");
    int_bad("", 1, 8, "--n: '' is not an integer in 1..8");
    int_bad(" 3", 1, 8, "--n: ' 3' is not an integer in 1..8");
    int_bad("3 ", 1, 8, "--n: '3 ' is not an integer in 1..8");
    int_bad("3x", 1, 8, "--n: '3x' is not an integer in 1..8");
    int_bad("0x10", 0, 99, "--n: '0x10' is not an integer in 0..99");
    int_bad("-", 0, 99, "--n: '-' is not an integer in 0..99");
    /* past long long: out of range, not the clamped LLONG_MAX taken as a value */
    int_bad("99999999999999999999", 0, INT64_MAX,
            "--n: '99999999999999999999' is out of range (an integer in 0..9223372036854775807)");
    int_bad("-99999999999999999999", INT64_MIN, 0,
            "--n: '-99999999999999999999' is out of range (an integer in "
            "-9223372036854775808..0)");
}

static const struct option opts[] = { { "quiet", no_argument, 0, 'q' },
                                      { "quota", required_argument, 0, 'Q' },
                                      { "seed", required_argument, 0, 's' },
                                      { 0, 0, 0, 0 } };

/* Parse argv (NULL-terminated, argv[0] included) and return the first error's message. */
static const char *first_error(char **argv)
{
    static char msg[256];
    int argc = 0, c;
    while (argv[argc])
        argc++;
    optind = 0; /* glibc: a full re-initialisation between parses */
    opterr = 0;
    msg[0] = '\0';
    while ((c = bk_cli_getopt(argc, argv, ":qQ:s:", opts)) != -1) {
        if (c == '?' || c == ':' || c == '!') {
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            break;
        }
    }
    return msg;
}

static void test_opt_errors(void **state)
{
    (void)state;
    char *a1[] = { "x", "--bogus", NULL };
    assert_string_equal(first_error(a1), "unknown option '--bogus'");
    char *a2[] = { "x", "--qu", NULL };
    assert_string_equal(first_error(a2), "ambiguous option '--qu'");
    char *a3[] = { "x", "--bogus=3", NULL };
    assert_string_equal(first_error(a3), "unknown option '--bogus'");
    char *a4[] = { "x", "--seed", NULL };
    assert_string_equal(first_error(a4), "--seed needs a value");
    char *a5[] = { "x", "-s", NULL };
    assert_string_equal(first_error(a5), "-s needs a value");
    char *a6[] = { "x", "--quiet=1", NULL };
    assert_string_equal(first_error(a6), "--quiet takes no value");
    char *a7[] = { "x", "-qx", NULL };
    assert_string_equal(first_error(a7), "unknown option '-x'");
    char *a8[] = { "x", "-q", "--quiet", "--seed=1", NULL };
    assert_string_equal(first_error(a8), "");
    /* a value that is one of the options: the value was left out */
    char *a9[] = { "x", "--seed", "--quiet", NULL };
    assert_string_equal(first_error(a9), "--seed needs a value: '--quiet' is an option (was "
                                         "the value left out? --seed=--quiet if it is the "
                                         "value)");
    char *a10[] = { "x", "-qs", "-q", NULL };
    assert_string_equal(first_error(a10), "-s needs a value: '-q' is an option (was the value "
                                          "left out? --seed=-q if it is the value)");
    char *a11[] = { "x", "--seed", "--quota=3", NULL };
    assert_non_null(strstr(first_error(a11), "'--quota=3' is an option"));
    /* taken: a value written into its own argument, one that is no option, a lone - */
    char *a12[] = { "x", "--seed=--quiet", "-s--quiet", "--seed", "-1", "-s", "-", "--seed",
                    "--bogus", "-s", "-x", NULL };
    assert_string_equal(first_error(a12), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_int),
        cmocka_unit_test(test_opt_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
