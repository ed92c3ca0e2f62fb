/* main.c - the bracket command line: dispatch to subcommands. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} bk_command;

static const bk_command commands[] = {
    { "run", bk_cmd_run, "run a plan's B -> C -> B' bracket (under mpirun or srun)" },
    { "plan", bk_cmd_plan, "plan check PLAN: validate a plan; plan variants: what a plan can name" },
    { "score", bk_cmd_score, "recompute a record's verdict from its raw samples" },
    { "topo", bk_cmd_topo, "show this machine's GPUs, links, NUMA and NICs; --save a snapshot" },
    { "lanes", bk_cmd_lanes, "choose baseline and candidate lanes of TP x EP ranks" },
    { "verify", bk_cmd_verify, "check a variant's numerics against the float64 reference" },
    { "worth", bk_cmd_worth, "the materiality bound of a slot made k times faster" },
    { "engine", bk_cmd_engine, "(internal) one arm on one lane rank, started by the runner" },
    { NULL, NULL, NULL },
};

#ifdef BK_HAVE_CUDA
#define BK_BACKENDS "cpu cuda"
#else
#define BK_BACKENDS "cpu"
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: bracket COMMAND [ARGS]   (bracket COMMAND --help for each)\n\n");
    for (const bk_command *c = commands; c->name; c++)
        fprintf(f, "  %-8s %s\n", c->name, c->summary);
    fprintf(f, "\n  --version  this build's version and backends\n");
    fprintf(f, "\nbracket %s; backends in this build: %s\n", BK_VERSION, BK_BACKENDS);
    fprintf(f, "\nExit status: 0 PASS (or success), 3 FAIL, 4 NO_DECISION, 2 bad input or usage,\n"
               "1 internal failure.\n");
}

/* What a command printed for the user (a report, a snapshot, a table) lost to a full disk or
 * a closed file: said, and not a success. The exit status rc, or 1 in place of a 0. */
static int stdout_done(const char *cmd, int rc)
{
    errno = 0;
    const int flushed = fflush(stdout) == 0;
    const int e = errno ? errno : bk_cli_stdout_errno(); /* else an earlier flush's */
    if (flushed && !ferror(stdout))
        return rc;
    fprintf(stderr, "bracket%s%s: cannot write the standard output%s%s\n", cmd ? " " : "",
            cmd ? cmd : "", e ? ": " : "", e ? strerror(e) : "");
    return rc == 0 ? BK_EXIT_INTERNAL : rc;
}

/* A standard descriptor the caller closed (bracket ... >&-) is held by /dev/null opened for
 * reading: the next file, socket or ZeroMQ eventfd would otherwise take its number, and the
 * report would be written into it. Read-only, writes to it still fail (EBADF), so a closed
 * standard output is still said (stdout_done) and not taken for a success. */
static void hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            /* the lowest free number, fd itself (those below it are open by now) */
            const int got = open("/dev/null", O_RDONLY);
            if (got > fd) {
                dup2(got, fd);
                close(got);
            }
        }
}

/* A command that is no MPI program (plan, score, lanes, verify, worth) started by mpirun on
 * several ranks runs whole on each (mpirun may be a launcher over hosts on purpose), its
 * output once a rank: rank 0 says so, once. */
static void note_mpirun(const char *cmd)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!r || !n || strcmp(r, "0") != 0 || !strcmp(n, "1") || getenv("BK_MPIRUN_NOTED"))
        return;
    fprintf(stderr, "bracket %s: note: started by mpirun as rank 0 of %s; %s is no MPI "
            "program, so each rank runs it whole (its output once a rank)\n", cmd, n, cmd);
    setenv("BK_MPIRUN_NOTED", "1", 1); /* not again by the verifies verify --target starts */
}

int main(int argc, char **argv)
{
    hold_std_fds();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return stdout_done(NULL, argc < 2 ? BK_EXIT_USAGE : 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("bracket %s; backends in this build: %s\n", BK_VERSION, BK_BACKENDS);
        return stdout_done(NULL, 0);
    }
    for (const bk_command *c = commands; c->name; c++)
        if (!strcmp(c->name, argv[1])) {
            if (c->fn != bk_cmd_run && c->fn != bk_cmd_topo && c->fn != bk_cmd_engine)
                note_mpirun(c->name);
            const int rc = c->fn(argc - 1, argv + 1);
            /* an engine's output is its agent's, not checked here */
            return c->fn == bk_cmd_engine ? rc : stdout_done(c->name, rc);
        }
    fprintf(stderr, "bracket: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return BK_EXIT_USAGE;
}
