/* agent.c - spawning, watching and killing engine processes. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/agent.h"

extern char **environ;

bk_status bk_self_exe(char *out, size_t len, bk_err *err)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n <= 0 || (size_t)n >= len - 1)
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot find the bracket binary (/proc/self/exe): %s",
                       strerror(errno));
    out[n] = '\0';
    return BK_OK;
}

bk_status bk_proc_spawn(const char *exe, char *const argv[], bk_proc *p, bk_err *err)
{
    memset(p, 0, sizeof *p);
    posix_spawnattr_t attr;
    int rc = posix_spawnattr_init(&attr);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                             POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, pipe;
    sigemptyset(&none);
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE); /* the runner ignores it (cmd_run.c); the engine does not */
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&attr, &pipe);
    if (rc == 0) {
        p->t_spawn_ns = bk_now_ns();
        rc = posix_spawn(&p->pid, exe, NULL, &attr, argv, environ);
    }
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot start engine %s: %s", exe, strerror(rc));
    return BK_OK;
}

static void fill_status(bk_proc *p, int status)
{
    p->done = 1;
    p->t_exit_ns = bk_now_ns();
    if (WIFEXITED(status)) {
        p->exit_code = WEXITSTATUS(status);
        p->signal = 0;
    } else if (WIFSIGNALED(status)) {
        p->signal = WTERMSIG(status);
        p->exit_code = 128 + p->signal;
    }
}

int bk_proc_poll(bk_proc *p)
{
    if (p->done || p->pid <= 0)
        return 1;
    int status = 0;
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) {
        fill_status(p, status);
        /* the engine is gone; anything it started goes with it */
        kill(-p->pid, SIGKILL);
        return 1;
    }
    if (r < 0 && errno == ECHILD) {
        p->done = 1;
        p->exit_code = -1;
        p->t_exit_ns = bk_now_ns();
        return 1;
    }
    return 0;
}

void bk_proc_kill(bk_proc *p, double grace_s, int timed_out)
{
    if (p->pid <= 0)
        return;
    /* an engine that already ended (crashed, say) but was not reaped yet is not killed */
    if (!bk_proc_poll(p)) {
        p->killed = 1;
        p->timed_out = timed_out;
        kill(-p->pid, SIGTERM);
        uint64_t deadline = bk_now_ns() + (uint64_t)(grace_s * 1e9);
        while (!bk_proc_poll(p) && bk_now_ns() < deadline)
            bk_sleep_ns(2000000);
        if (!p->done) {
            kill(-p->pid, SIGKILL);
            int status = 0;
            while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
            }
            fill_status(p, status);
        }
        /* ... nor one that died of a signal of its own while ours was on its way */
        if (p->signal && p->signal != SIGTERM && p->signal != SIGKILL)
            p->killed = 0;
    }
    kill(-p->pid, SIGKILL); /* stragglers of the group, if any */
}

double bk_proc_seconds(const bk_proc *p)
{
    return p->t_exit_ns > p->t_spawn_ns ? (double)(p->t_exit_ns - p->t_spawn_ns) / 1e9 : 0;
}

void bk_proc_describe(const bk_proc *p, char *out, size_t len)
{
    if (!p->done)
        snprintf(out, len, "running");
    else if (p->timed_out && p->killed)
        snprintf(out, len, "timed out (killed, signal %d)", p->signal);
    else if (p->killed)
        snprintf(out, len, "killed by the runner (signal %d)", p->signal);
    else if (p->signal)
        snprintf(out, len, "signal %d (%s)", p->signal, strsignal(p->signal));
    else
        snprintf(out, len, "exit %d", p->exit_code);
}
