/* janitor.h - a rank's private files removed however the rank ends: a small child process
 * that waits for its rank to be gone and then removes them. A signal handler (terminate.h)
 * cannot cover an end that runs no code of the rank's own: SIGKILL, the OOM killer, or the
 * exit Open MPI's runtime makes every rank take when mpirun is gone (a second Ctrl-C). */
#ifndef BK_JANITOR_H
#define BK_JANITOR_H

/* Start this process's janitor. Call it before MPI_Init, while the process has one thread
 * (a fork after MPI_Init could upset MPI's transports, and a child of a threaded process
 * may only make async-signal-safe calls, which is all the janitor makes anyway). The child
 * holds no descriptor of the rank's but the read end of a pipe, ignores SIGINT / SIGTERM /
 * SIGHUP, runs in a session of its own (a kill of the rank's process group does not reach
 * it), and has its command line blanked (`pgrep -f "bracket run"` finds ranks only). When
 * the rank's end of the pipe closes (the rank exited, however), it removes the paths it was
 * given that are still there, in the order given, and exits. Returns 0, or -1 (errno set)
 * when it could not start: the rank runs on without it. */
int bk_janitor_start(int argc, char **argv);

/* Give the janitor `path` (a file, or a folder emptied by then: give a folder after its
 * files) to remove once the rank is gone. At most 64 paths of up to 511 bytes; more, or a
 * longer one, are not removed. Async-signal-safe; nothing when no janitor runs. */
void bk_janitor_add(const char *path);

/* Take back the latest `path` given, which is then not removed (say, a name another
 * process turned out to hold). Async-signal-safe; nothing when no janitor runs. */
void bk_janitor_withdraw(const char *path);

/* mkdtemp(3) whose folder is never unknown to the janitor: `tmpl` ends in "XXXXXX", which
 * becomes 6 random characters; `tmpl`/file for each of `files` (NULL-terminated, or NULL)
 * and then `tmpl` itself are given to the janitor before the folder is made (0700), and
 * withdrawn when that name is taken (another try, up to 100) or mkdir fails. So a rank
 * killed at any moment leaves no folder of these behind (nor the files named, once its
 * janitor has run). Returns 0 with `tmpl` the folder's path, or -1 with errno set
 * (EINVAL: no "XXXXXX" at the end or 512 bytes or more) and `tmpl` as it was given. */
int bk_janitor_mkdtemp(char *tmpl, const char *const *files);

/* Tests only: `hook(dir, 0)` runs after the names are given and before mkdir, and
 * `hook(dir, 1)` after mkdir made the folder; NULL (the default) for none. */
void bk_janitor_test_hook(void (*hook)(const char *dir, int made));

/* The shared-memory segment (/dev/shm) a cpu engine of run `run_id`, arm `arm`, lane rank
 * `rank` creates (bk_shm_name), for a spawn whose engine may be killed in the window before
 * it unlinks the segment itself. Not async-signal-safe. */
void bk_janitor_add_shm(const char *run_id, const char *arm, int rank);
/* Take that segment back once its engine has ended (it unlinked it, or its rank did). */
void bk_janitor_withdraw_shm(const char *run_id, const char *arm, int rank);

/* Open MPI's shared-memory segment of this process (local rank `local_rank` on its node):
 * the btl's file in /dev/shm (vader_segment.*.<local rank> in Open MPI 4, sm_segment.* in
 * 5), found among this process's mappings after MPI_Init. Open MPI unlinks it when the job
 * ends in order; when mpirun is gone at once (a second Ctrl-C) every rank exits without
 * that, and the 4 MiB files stay in /dev/shm until reboot (open-mpi/ompi#6322, #7394).
 * Only a file of this user's, named for this local rank, is given (peers' segments, which
 * every rank maps too, are their own janitors'). Returns how many were given. */
int bk_janitor_add_mpi_segments(int local_rank);

#endif
