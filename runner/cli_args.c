/* cli_args.c - what every subcommand's option parsing shares: whole-string integer
 * arguments checked against their range, and getopt_long's errors named as written. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/cli.h"

int bk_cli_int(const char *flag, const char *text, long long lo, long long hi, long long *out,
               char *msg, size_t len)
{
    char *end = NULL;
    long long v = 0;
    int whole = text[0] != '\0' && !isspace((unsigned char)text[0]);
    errno = 0;
    if (whole) {
        v = strtoll(text, &end, 10);
        whole = end != text && *end == '\0';
    }
    if (!whole) {
        snprintf(msg, len, "%s: '%s' is not an integer in %lld..%lld", flag, text, lo, hi);
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        snprintf(msg, len, "%s: '%s' is out of range (an integer in %lld..%lld)", flag, text,
                 lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The table entry of the option whose value is `val`, or NULL. */
static const struct option *by_val(const struct option *opts, int val)
{
    for (; opts->name; opts++)
        if (opts->flag == NULL && opts->val == val)
            return opts;
    return NULL;
}

static char g_value_msg[320]; /* bk_cli_getopt's '!', said by bk_cli_opt_error */

int bk_cli_getopt(int argc, char **argv, const char *shorts, const struct option *opts)
{
    int c = getopt_long(argc, argv, shorts, opts, NULL);
    /* optarg is the whole of the argument before optind when the value was its own */
    if (c == -1 || c == '?' || c == ':' || !optarg || optind < 2 || optarg != argv[optind - 1])
        return c;
    const char *v = optarg;
    int option = 0;
    if (v[0] == '-' && v[1] == '-' && v[2]) {
        size_t n = strcspn(v + 2, "=");
        for (const struct option *p = opts; p->name && !option; p++)
            option = strlen(p->name) == n && strncmp(p->name, v + 2, n) == 0;
    } else if (v[0] == '-' && v[1] && !v[2] && v[1] != ':' && v[1] != '-') {
        option = strchr(shorts, v[1]) != NULL;
    }
    if (!option)
        return c;
    /* the flag as written: its argument is the one before the value's */
    const struct option *o = by_val(opts, c);
    char flag[64];
    if (o && strncmp(argv[optind - 2], "--", 2) == 0)
        snprintf(flag, sizeof flag, "--%s", o->name);
    else
        snprintf(flag, sizeof flag, "-%c", c);
    /* the way to give it as the value: --name=VALUE, or a short flag's -cVALUE */
    char as_value[64];
    if (o)
        snprintf(as_value, sizeof as_value, "--%s=%.40s", o->name, v);
    else
        snprintf(as_value, sizeof as_value, "-%c%.40s", c, v);
    snprintf(g_value_msg, sizeof g_value_msg, "%s needs a value: '%.40s' is an option (was the "
             "value left out? %s if it is the value)", flag, v, as_value);
    return '!';
}

void bk_cli_opt_error(int c, char **argv, const struct option *opts, char *msg, size_t len)
{
    if (c == '!') {
        snprintf(msg, len, "%s", g_value_msg);
        return;
    }
    /* after an error getopt_long has always moved past a long option's element, so
     * argv[optind - 1] is it; a short option is named by optopt (its element may be a
     * cluster such as -xq that optind has not left yet) */
    const char *last = optind > 0 ? argv[optind - 1] : "";
    int is_long = strncmp(last, "--", 2) == 0 && last[2] != '\0';
    size_t name_len = is_long ? strcspn(last + 2, "=") : 0;
    const struct option *o = optopt ? by_val(opts, optopt) : NULL;
    if (c == ':') {
        if (is_long && o && strncmp(o->name, last + 2, name_len) == 0)
            snprintf(msg, len, "--%s needs a value", o->name);
        else
            snprintf(msg, len, "-%c needs a value", optopt);
        return;
    }
    if (optopt == 0) { /* an unknown or ambiguous long option */
        int matches = 0;
        for (const struct option *p = opts; is_long && p->name; p++)
            matches += strncmp(p->name, last + 2, name_len) == 0;
        snprintf(msg, len, "%s option '%.*s'", matches > 1 ? "ambiguous" : "unknown",
                 (int)(name_len + 2), last);
        return;
    }
    /* --flag=VALUE for a flag that takes none, or an unknown short option */
    if (is_long && last[2 + name_len] == '=' && o && o->has_arg == no_argument &&
        strncmp(o->name, last + 2, name_len) == 0)
        snprintf(msg, len, "--%s takes no value", o->name);
    else if (isprint(optopt))
        snprintf(msg, len, "unknown option '-%c'", optopt);
    else
        snprintf(msg, len, "unknown option (character %d)", optopt);
}

static int g_stdout_errno; /* the first failed bk_cli_stdout_flush's errno */

void bk_cli_stdout_flush(void)
{
    errno = 0;
    if (fflush(stdout) != 0 && !g_stdout_errno)
        g_stdout_errno = errno ? errno : EIO;
}

int bk_cli_stdout_errno(void) { return g_stdout_errno; }
