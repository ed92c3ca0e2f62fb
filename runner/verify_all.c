/* verify_all.c - `bracket verify --target T` with no --variant: every real variant of T on
 * the backend, each checked by its own `bracket verify --target T --variant V` (a child of
 * this process, so each has its own engines, janitor and private files, as when run alone),
 * then one line a variant and the exit status of the worst. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/catalog.h"
#include "runner/agent.h"
#include "runner/cli.h"
#include "runner/verify_probes.h"

/* One variant's verify: the exit status of `exe verify ARGS --variant V` (which picks the
 * same backend: V runs on it, and it is the --set one or the one auto picks), or -signal
 * when a signal ended it; BK_EXIT_INTERNAL when it could not start. */
static int verify_one(const char *exe, int argc, char **argv, const char *variant)
{
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        fprintf(stderr, "bracket verify: out of memory\n");
        return BK_EXIT_INTERNAL;
    }
    int n = 0;
    args[n++] = (char *)exe;
    for (int i = 0; i < argc; i++) /* argv[0] is "verify" */
        args[n++] = argv[i];
    args[n++] = "--variant";
    args[n++] = (char *)variant;
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        /* this process killed however (Ctrl-C, a job's time limit, SIGKILL): the child
         * goes too, and its engines with it (theirs is the same), its janitor cleaning up */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(BK_EXIT_INTERNAL);
        execv(exe, args);
        fprintf(stderr, "bracket verify: cannot start %s: %s\n", exe, strerror(errno));
        _exit(BK_EXIT_INTERNAL);
    }
    free(args);
    if (pid < 0) {
        fprintf(stderr, "bracket verify: cannot start a verify of %s: %s\n", variant,
                strerror(errno));
        return BK_EXIT_INTERNAL;
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return BK_EXIT_INTERNAL;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -WTERMSIG(ws);
}

int bk__verify_all(const bk_target *tg, bk_backend backend, int argc, char **argv)
{
    const unsigned mask = 1u << backend; /* as BK_BK_CPU, BK_BK_CUDA */
    const int ncat = bk_catalog_nvariants();
    const bk_variant **vs = malloc((size_t)(ncat > 0 ? ncat : 1) * sizeof *vs);
    int *rcs = malloc((size_t)(ncat > 0 ? ncat : 1) * sizeof *rcs);
    if (!vs || !rcs) {
        free(vs);
        free(rcs);
        fprintf(stderr, "bracket verify: out of memory\n");
        return BK_EXIT_INTERNAL;
    }
    int nv = 0, ndiag = 0, rc = BK_EXIT_INTERNAL;
    for (int i = 0; i < ncat; i++) {
        const bk_variant *v = bk_catalog_variant_at(i);
        if (strcmp(v->target, tg->name) != 0 || !(v->backends & mask))
            continue;
        if (v->diagnostic)
            ndiag++;
        else
            vs[nv++] = v;
    }
    if (nv == 0) {
        fprintf(stderr, "bracket verify: --target %s: no variant on backend %s in this build\n",
                tg->name, bk_backend_name(backend));
        rc = BK_EXIT_USAGE;
        goto out;
    }
    char exe[1024];
    bk_err err = { 0 };
    if (bk_self_exe(exe, sizeof exe, &err) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        goto out;
    }
    printf("bracket verify: --target %s: its %d variant(s) on backend %s, each as `bracket "
           "verify --target %s --variant V` would check it", tg->name, nv,
           bk_backend_name(backend), tg->name);
    if (ndiag)
        printf(" (its %d diagnostic variant(s), wrong on purpose, are left out: --variant "
               "checks one)", ndiag);
    printf("\n");
    for (int i = 0; i < nv; i++) {
        printf("\n== %d of %d: %s ==\n", i + 1, nv, vs[i]->name);
        rcs[i] = verify_one(exe, argc, argv, vs[i]->name);
    }
    int failed = 0, errors = 0, refused = 0;
    printf("\n%s on %s:\n", tg->name, bk_backend_name(backend));
    for (int i = 0; i < nv; i++) {
        const int r = rcs[i];
        const char *what = r == 0 ? "PASSED"
                         : r == BK_EXIT_FAIL ? "FAILED"
                         /* the reasons went to standard error, each as its section ran */
                         : r == BK_EXIT_USAGE ? "not verified: refused (the reason: on "
                                                "standard error, in its section)"
                         : r < 0 ? "not verified: verify was killed by a signal"
                                 : "not verified: an engine or verify failed (on standard "
                                   "error, in its section)";
        failed += r == BK_EXIT_FAIL;
        refused += r == BK_EXIT_USAGE;
        errors += r != 0 && r != BK_EXIT_FAIL && r != BK_EXIT_USAGE;
        printf("  %-26s %s", vs[i]->name, what);
        if (r < 0)
            printf(" (%d, %s)", -r, strsignal(-r));
        else if (r != 0 && r != BK_EXIT_FAIL && r != BK_EXIT_USAGE)
            printf(" (exit %d)", r);
        printf("\n");
    }
    const int passed = nv - failed - refused - errors;
    if (failed + refused + errors == 0)
        printf("PASSED: all %d variant(s)\n", nv);
    else
        printf("%s: %d of %d variant(s) passed, %d failed, %d not verified\n",
               failed ? "FAILED" : "NOT ALL VERIFIED", passed, nv, failed, refused + errors);
    rc = failed ? BK_EXIT_FAIL : errors ? BK_EXIT_INTERNAL : refused ? BK_EXIT_USAGE : 0;
out:
    free(vs);
    free(rcs);
    return rc;
}
