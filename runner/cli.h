/* cli.h - the bracket subcommands and the exit statuses they return. */
#ifndef BK_CLI_H
#define BK_CLI_H

#include <stddef.h>

#include "plans/plan.h"

/* Exit statuses of every command (documented in --help and README). */
enum {
    BK_EXIT_PASS = 0,        /* also: a command that succeeded */
    BK_EXIT_INTERNAL = 1,
    BK_EXIT_USAGE = 2,       /* bad input or usage */
    BK_EXIT_FAIL = 3,
    BK_EXIT_NO_DECISION = 4
};

struct option; /* <getopt.h> */

/* Parse the whole of `text` (the value of `flag`) as a decimal integer in lo..hi.
 * 0 on success with *out set; -1 with msg "FLAG: 'TEXT' is not an integer in LO..HI"
 * (empty, blanks, trailing characters) or "... is out of range (an integer in LO..HI)". */
int bk_cli_int(const char *flag, const char *text, long long lo, long long hi, long long *out,
               char *msg, size_t len);

/* The message for getopt_long's error return `c` ('?', or ':' when the optstring starts
 * with ':'), naming the option as the user wrote it: "unknown option '-x'", "unknown
 * option '--bogus'", "ambiguous option '--s'", "--out needs a value", "--quiet takes
 * no value", and bk_cli_getopt's '!'. Call it right after getopt_long / bk_cli_getopt
 * returned. */
void bk_cli_opt_error(int c, char **argv, const struct option *opts, char *msg, size_t len);

/* getopt_long(argc, argv, shorts, opts, NULL), but a value taken from the next argument that
 * is itself one of the command's options ("--out --quiet", "-o -q", "--save --help": the
 * value was left out) is an error: returns '!', and bk_cli_opt_error then says "--out needs
 * a value: '--quiet' is an option (was the value left out? --out=--quiet if it is the
 * value)". A value written into its own argument (--out=--quiet, -o--quiet) is taken. */
int bk_cli_getopt(int argc, char **argv, const char *shorts, const struct option *opts);

/* Flush the standard output now (a table a row at a time: what was printed stays printed
 * when the command is stopped). The first failure's errno is kept for the command's final
 * check of its standard output (bk_cli_stdout_errno; 0: none). */
void bk_cli_stdout_flush(void);
int bk_cli_stdout_errno(void);

/* Each subcommand: argv[0] is the subcommand name; returns an exit status.
 * Only rank 0 (or the single process) prints for the user. */
/* Why a plan whose candidate serves none of its shapes is refused, into buf: the lane size
 * when that is the cause, else each shape's reason (cmd_plan.c; run says the same). */
void bk_plan_none_served_text(const char *path, const bk_plan *plan, bk_backend b, char *buf,
                              size_t len);

int bk_cmd_run(int argc, char **argv);
int bk_cmd_plan(int argc, char **argv);
int bk_cmd_score(int argc, char **argv);
int bk_cmd_worth(int argc, char **argv);
int bk_cmd_engine(int argc, char **argv);
int bk_cmd_topo(int argc, char **argv);
int bk_cmd_lanes(int argc, char **argv);
int bk_cmd_verify(int argc, char **argv);

#endif
