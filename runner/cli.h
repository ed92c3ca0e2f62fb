/* cli.h - the bracket subcommands and the exit statuses they return. */
#ifndef BK_CLI_H
#define BK_CLI_H

/* Exit statuses of every command (documented in --help and README). */
enum {
    BK_EXIT_PASS = 0,        /* also: a command that succeeded */
    BK_EXIT_INTERNAL = 1,
    BK_EXIT_USAGE = 2,       /* bad input or usage */
    BK_EXIT_FAIL = 3,
    BK_EXIT_NO_DECISION = 4
};

/* Each subcommand: argv[0] is the subcommand name; returns an exit status.
 * Only rank 0 (or the single process) prints for the user. */
int bk_cmd_run(int argc, char **argv);
int bk_cmd_plan(int argc, char **argv);
int bk_cmd_score(int argc, char **argv);
int bk_cmd_worth(int argc, char **argv);
int bk_cmd_engine(int argc, char **argv);
int bk_cmd_topo(int argc, char **argv);
int bk_cmd_lanes(int argc, char **argv);
int bk_cmd_verify(int argc, char **argv);

#endif
