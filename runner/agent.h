/* agent.h - an agent's engine process: spawn it in its own process group, watch it with a
 * bound, and kill the whole group when it must go. */
#ifndef BK_AGENT_H
#define BK_AGENT_H

#include <stdint.h>
#include <sys/types.h>

#include "runner/status.h"

typedef struct bk_proc {
    pid_t pid;            /* also the process group id */
    uint64_t t_spawn_ns;
    uint64_t t_exit_ns;
    int done;
    int exit_code;        /* valid when done and !signal */
    int signal;           /* terminating signal, 0 if it exited */
    int timed_out;        /* killed by us after its time-out */
    int killed;           /* killed by us (time-out or abort) */
} bk_proc;

/* Path of the running bracket binary (for spawning engines). */
bk_status bk_self_exe(char *out, size_t len, bk_err *err);

/* posix_spawn argv[0]=exe in a new process group. */
bk_status bk_proc_spawn(const char *exe, char *const argv[], bk_proc *p, bk_err *err);

/* Non-blocking: 1 once the process has ended (fields filled), else 0. */
int bk_proc_poll(bk_proc *p);

/* SIGTERM to the group, up to grace_s for it to end, then SIGKILL and reap.
 * Always leaves no process of the group behind (the group is signalled even
 * after its leader is gone). */
void bk_proc_kill(bk_proc *p, double grace_s, int timed_out);

/* Seconds from spawn to exit; 0 while unknown. */
double bk_proc_seconds(const bk_proc *p);

/* "exit 0", "exit 3", "signal 6 (Aborted)", "timed out (killed)" */
void bk_proc_describe(const bk_proc *p, char *out, size_t len);

#endif
