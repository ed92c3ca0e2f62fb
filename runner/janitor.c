/* janitor.c - remove a rank's private files once the rank is gone (janitor.h). */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "runner/janitor.h"
#include "runner/status.h"

#define MAX_PATHS 64
#define PATH_BYTES 512

static int g_fd = -1; /* the rank's (write) end of the pipe; close-on-exec */

/* The child (forked before MPI_Init, so from one thread; still, async-signal-safe calls
 * only). Reads NUL-terminated paths until end of file (the rank gone), then removes them. */
static void janitor(int rd, int argc, char **argv, int maxfd)
{
    static char paths[MAX_PATHS][PATH_BYTES];
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGTERM, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    setsid();
    for (int i = 0; i < argc; i++)
        for (char *c = argv[i]; *c; c++)
            *c = '\0';
    for (int fd = 0; fd < maxfd; fd++)
        if (fd != rd)
            close(fd);
    int n = 0, len = 0, too_long = 0;
    char buf[PATH_BYTES];
    for (;;) {
        ssize_t r = read(rd, buf, sizeof buf);
        if (r == 0)
            break; /* the rank is gone */
        if (r < 0) {
            if (errno == EINTR)
                continue;
            _exit(1); /* cannot tell when the rank is gone: remove nothing */
        }
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] != '\0') {
                if (n < MAX_PATHS && len < PATH_BYTES - 1)
                    paths[n][len++] = buf[i];
                else
                    too_long = 1;
                continue;
            }
            if (n < MAX_PATHS && len > 0 && !too_long)
                paths[n++][len] = '\0';
            else if (n < MAX_PATHS)
                paths[n][0] = '\0'; /* dropped: a cut path must not name another file */
            len = too_long = 0;
        }
    }
    for (int i = 0; i < n; i++)
        if (unlink(paths[i]) != 0)
            rmdir(paths[i]);
    _exit(0);
}

int bk_janitor_start(int argc, char **argv)
{
    int fd[2];
    if (g_fd >= 0)
        return 0;
    struct rlimit rl;
    int maxfd = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
    if (pipe2(fd, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0)
        janitor(fd[0], argc, argv, maxfd);
    int e = errno;
    close(fd[0]);
    if (pid < 0) {
        close(fd[1]);
        errno = e;
        return -1;
    }
    g_fd = fd[1]; /* open, never read here, until this process ends */
    return 0;
}

void bk_janitor_add(const char *path)
{
    size_t len = strlen(path);
    if (g_fd < 0 || len == 0 || len >= PATH_BYTES)
        return;
    /* one write of at most PIPE_BUF bytes: whole, never interleaved */
    ssize_t r;
    do
        r = write(g_fd, path, len + 1);
    while (r < 0 && errno == EINTR);
}

void bk_janitor_add_coord(const char *ep_rv, const char *ep_samples)
{
    static const char ipc[] = "ipc://";
    const size_t n = sizeof ipc - 1;
    if (strncmp(ep_rv, ipc, n) || strncmp(ep_samples, ipc, n))
        return;
    char dir[PATH_BYTES];
    bk_strlcpy(dir, ep_rv + n, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = '\0';
    bk_janitor_add(ep_rv + n);
    bk_janitor_add(ep_samples + n);
    bk_janitor_add(dir);
}

void bk_janitor_add_shm(const char *run_id, const char *arm, int rank)
{
    char name[BK_SHM_NAME_LEN], path[BK_SHM_NAME_LEN + 16];
    bk_shm_name(run_id, arm, rank, name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    bk_janitor_add(path);
}
