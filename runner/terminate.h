/* terminate.h - SIGTERM / SIGINT to a run (Slurm's time limit, scancel, Ctrl-C): the handler
 * only notes the signal; rank 0 and the agents look at it in their polling loops, kill their
 * engines, and rank 0 writes a partial record (NO_DECISION, reasons starting "terminated by SIGTERM" or "SIGINT").
 * An end no handler sees (SIGKILL, the OOM killer, a lost node, a second Ctrl-C that makes
 * mpirun abort the ranks at once) leaves the unfinished record rank 0 wrote before the arm
 * that was running (bk_terminate_mark_unfinished; docs/record.md, "Unfinished runs"), and
 * the rank's private files to its janitor (janitor.h). */
#ifndef BK_TERMINATE_H
#define BK_TERMINATE_H

#include <stddef.h>

#include "runner/score.h"

/* Install the handler for SIGTERM and SIGINT (SA_RESTART off: blocking waits wake up).
 * Returns 0, or -1 when sigaction failed (errno set). */
int bk_terminate_install(void);

/* The first termination signal received (SIGTERM or SIGINT), 0 when none. Async-safe. */
int bk_terminate_signal(void);

/* Remove `path` (a file, or an empty folder) from inside the signal handler itself, so a
 * rank killed soon after (mpirun's SIGKILL follows its SIGTERM by 1 s) leaves no private
 * file behind: an agent's plan copy, its key file, then their folder, in that order. At
 * most 8 paths of up to 511 bytes; register before the handler can run for them. */
void bk_terminate_remove_on_signal(const char *path);

/* "SIGTERM", "SIGINT" or "signal N" for the signal above ("" when none). */
const char *bk_terminate_name(void);
/* The same for signal `sig` (another rank's, say); not async-safe for other signals. */
const char *bk_terminate_signame(int sig);

/* A run ended by a termination signal: whatever its arms say, the verdict is NO_DECISION
 * (status no_decision) and the reasons start with "terminated by SIGTERM" (or SIGINT);
 * `stopped` (len bytes) says so too when still empty. */
void bk_terminate_mark(bk_score *sc, char *stopped, size_t len);
/* The same for the signal named `name` ("SIGTERM"...): `bracket score` marks a recomputed
 * score the way the run marked the record it reads. */
void bk_terminate_mark_as(bk_score *sc, const char *name, char *stopped, size_t len);
/* The score of a provisional record written before arm `arm` ("C"...), in case the run
 * ends before it replaces it: the verdict NO_DECISION (status no_decision), the reasons
 * starting "unfinished: the run ended during or before arm C without writing its final
 * record". `bracket run` marks what it writes and `bracket score` its recomputation alike. */
void bk_terminate_mark_unfinished(bk_score *sc, const char *arm);

#endif
