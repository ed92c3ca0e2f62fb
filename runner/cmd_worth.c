/* cmd_worth.c - `bracket worth`: the materiality bound 1 / ((1 - f) + f / k) of a slot,
 * checked against the arena's resolvable noise before any GPU time is spent. */
#include <errno.h>
#include <float.h>
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/cli.h"
#include "runner/score.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bracket worth --fraction F --speedup K [--noise N]\n"
            "\n"
            "Upper bound of the end-to-end speed-up when a slot taking fraction F of the\n"
            "critical path is made K times faster: 1 / ((1 - F) + F / K). Optimistic by\n"
            "construction: a filter for where to invest, not evidence of a win.\n"
            "\n"
            "  -f, --fraction F   critical-path fraction of the slot, in (0, 1]  (required)\n"
            "  -k, --speedup K    the slot's own speed-up factor, > 0           (required)\n"
            "  -n, --noise N      the arena's resolvable noise as a fraction,\n"
            "                     e.g. 0.01 for 1%%, in [0, 1) (default: none, not compared)\n"
            "  -h, --help         this text\n"
            "\n"
            "Exit status: 0 printed the bound, 2 bad or missing input.\n"
            "Example: bracket worth -f 0.08 -k 2 -n 0.01   (bound 1.0417, +4.17%%)\n");
}

/* Parse a whole argument as a finite decimal double; 0 on success, -1 when it is not one
 * (blanks around it, hexadecimal, garbage), -2 when it is one that a double cannot hold
 * (overflow, or a value too small for even a subnormal double, read as 0). */
static int parse_number(const char *text, double *out)
{
    char *end = NULL;
    const char *digits = text + (text[0] == '+' || text[0] == '-');
    if (isspace((unsigned char)text[0]) || (digits[0] == '0' && (digits[1] == 'x' ||
                                                                 digits[1] == 'X')))
        return -1;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || isnan(v))
        return -1;
    /* ERANGE with a subnormal result (1e-320) is a value held, if not to full precision */
    if (!isfinite(v) || (errno == ERANGE && v == 0.0))
        return -2;
    *out = v;
    return 0;
}

int bk_cmd_worth(int argc, char **argv)
{
    static const struct option opts[] = {
        { "fraction", required_argument, NULL, 'f' },
        { "speedup", required_argument, NULL, 'k' },
        { "noise", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    double f = NAN, k = NAN, noise = NAN;
    int have_f = 0, have_k = 0, have_noise = 0, c;
    optind = 0; /* glibc: 0 fully re-initialises getopt (the command may run twice) */
    opterr = 0;
    while ((c = bk_cli_getopt(argc, argv, ":f:k:n:h", opts)) != -1) {
        double *dst = c == 'f' ? &f : c == 'k' ? &k : c == 'n' ? &noise : NULL;
        switch (c) {
        case 'f':
        case 'k':
        case 'n': {
            static const char *const rule[] = { "F must be in (0, 1]", "K must be > 0",
                                                "N must be in [0, 1)" };
            int bad = parse_number(optarg, dst), w = c == 'f' ? 0 : c == 'k' ? 1 : 2;
            const char *name = w == 0 ? "fraction" : w == 1 ? "speedup" : "noise";
            if (bad == -1) {
                fprintf(stderr, "bracket worth: --%s: '%s' is not a decimal number\n", name,
                        optarg);
                return BK_EXIT_USAGE;
            }
            if (bad == -2) {
                fprintf(stderr, "bracket worth: --%s: '%s' is out of range (%s; a double "
                        "holds 0 and magnitudes %.2g..%.2g)\n", name, optarg, rule[w],
                        DBL_TRUE_MIN, DBL_MAX);
                return BK_EXIT_USAGE;
            }
            have_f |= c == 'f';
            have_k |= c == 'k';
            have_noise |= c == 'n';
            break;
        }
        case 'h':
            usage(stdout);
            return BK_EXIT_PASS;
        default: {
            char msg[160];
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket worth: %s\n(bracket worth --help: the whole usage)\n", msg);
            return BK_EXIT_USAGE;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bracket worth: unexpected argument '%s'\n", argv[optind]);
        return BK_EXIT_USAGE;
    }
    if (!have_f || !have_k) {
        fprintf(stderr, "bracket worth: missing %s (see bracket worth --help)\n",
                !have_f && !have_k ? "--fraction and --speedup"
                : !have_f          ? "--fraction"
                                   : "--speedup");
        return BK_EXIT_USAGE;
    }
    /* each range said with its flag */
    if (!(f > 0.0 && f <= 1.0)) {
        fprintf(stderr, "bracket worth: --fraction: %g must be in (0, 1]\n", f);
        return BK_EXIT_USAGE;
    }
    if (!(k > 0.0)) {
        fprintf(stderr, "bracket worth: --speedup: %g must be > 0\n", k);
        return BK_EXIT_USAGE;
    }
    if (have_noise && !(noise >= 0.0 && noise < 1.0)) {
        fprintf(stderr, "bracket worth: --noise: %g must be a fraction in [0, 1) (e.g. 0.01 for "
                "1%%)\n", noise);
        return BK_EXIT_USAGE;
    }
    noise += 0.0; /* -0 is 0, and printed so */
    double bound;
    bk_err err = { 0 };
    if (bk_worth_bound(f, k, &bound, &err) != BK_OK) {
        fprintf(stderr, "bracket worth: %s\n", err.msg);
        return BK_EXIT_USAGE;
    }
    printf("fraction %.6g, slot speed-up %.6g\n", f, k);
    /* fixed decimals up to a million; past it (k 1e300) significant digits, not 300 of them,
     * and the factor alone where its percentage passes what a double holds (k 1e308) */
    if (bound != 1.0 && fabs(100.0 * (bound - 1.0)) < 0.005) {
        /* a gain (or loss) that four decimals show as 1.0000 (+0.00%): digits enough for
         * two of the difference from 1 (17 at most, all a double has) */
        char text[40];
        int digits = 2 + (int)ceil(-log10(fabs(bound - 1.0)));
        snprintf(text, sizeof text, "%.*g", digits < 17 ? digits : 17, bound);
        printf("end-to-end bound   %s  (%+.3g%%)\n", text, 100.0 * (bound - 1.0));
    } else if (bound < 1e6)
        printf("end-to-end bound   %.4f  (%+.2f%%)\n", bound, 100.0 * (bound - 1.0));
    else if (isfinite(100.0 * (bound - 1.0)))
        printf("end-to-end bound   %.6g  (%+.6g%%)\n", bound, 100.0 * (bound - 1.0));
    else
        printf("end-to-end bound   %.6g\n", bound);
    if (have_noise) {
        char pct[48];
        snprintf(pct, sizeof pct, "%.2f", 100.0 * noise);
        if (!strcmp(pct, "100.00")) /* below 1, never shown as 100% */
            snprintf(pct, sizeof pct, "%.10g", 100.0 * noise);
        if (!strcmp(pct, "100")) /* nor when ten digits round it there */
            snprintf(pct, sizeof pct, "%.17g", 100.0 * noise);
        if (noise > 0.0 && !strcmp(pct, "0.00")) /* nor above 0 as 0 */
            snprintf(pct, sizeof pct, "%.3g", 100.0 * noise);
        printf("resolvable noise   %s%%  -> %s\n", pct,
               bound < 1.0                   ? "a slowdown, not a gain: nothing to qualify"
               : k == 1.0                    ? "no gain (a slot speed-up of 1): nothing to "
                                               "qualify"
               : bk_worth_clears(bound, noise) ? "worth an experiment"
                   : "does not clear the arena's resolvable noise (the bound must exceed 1 + "
                     "N): choose another target");
    } else if (bound < 1.0)
        printf("a slot speed-up below 1 makes the stack slower: nothing to qualify\n");
    return BK_EXIT_PASS;
}
