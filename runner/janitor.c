/* janitor.c - remove a rank's private files once the rank is gone (janitor.h). */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "runner/janitor.h"
#include "runner/status.h"

#define MAX_PATHS 64
#define PATH_BYTES 512
#define WITHDRAW '\x01' /* a record "\x01path": forget the latest "path" */

static int g_fd = -1; /* the rank's (write) end of the pipe; close-on-exec */
static void (*g_test_hook)(const char *dir, int made);

/* One record received: add it, or withdraw the latest equal path (the rest move up). */
static void take(char paths[][PATH_BYTES], int *n, const char *rec)
{
    if (rec[0] != WITHDRAW) {
        if (*n < MAX_PATHS && strlen(rec) < PATH_BYTES)
            memcpy(paths[(*n)++], rec, strlen(rec) + 1);
        return;
    }
    for (int i = *n - 1; i >= 0; i--)
        if (strcmp(paths[i], rec + 1) == 0) {
            memmove(paths[i], paths[i + 1], (size_t)(*n - 1 - i) * PATH_BYTES);
            (*n)--;
            return;
        }
}

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
    char buf[PATH_BYTES], rec[PATH_BYTES + 1]; /* a withdrawal: its mark, then a path */
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
                if (len < PATH_BYTES)
                    rec[len++] = buf[i];
                else
                    too_long = 1;
                continue;
            }
            rec[len] = '\0';
            if (len > 0 && !too_long) /* dropped: a cut path must not name another file */
                take(paths, &n, rec);
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

/* One record: `path` (withdraw 0) or WITHDRAW + `path`, in one write of at most PIPE_BUF
 * bytes: whole, never interleaved. */
static void send_rec(const char *path, int withdraw)
{
    char rec[PATH_BYTES + 1];
    size_t len = strlen(path);
    if (g_fd < 0 || len == 0 || len >= PATH_BYTES || path[0] == WITHDRAW)
        return;
    rec[0] = WITHDRAW;
    memcpy(rec + 1, path, len + 1);
    ssize_t r;
    do
        r = write(g_fd, withdraw ? rec : rec + 1, len + 1 + (withdraw != 0));
    while (r < 0 && errno == EINTR);
}

void bk_janitor_add(const char *path)
{
    send_rec(path, 0);
}

void bk_janitor_withdraw(const char *path)
{
    send_rec(path, 1);
}

/* Give (withdraw 0) or withdraw folder `dir` with its files: the files first, the folder
 * last (the janitor removes them in this order; a withdrawal looks each up). */
static void send_folder(const char *dir, const char *const *files, int withdraw)
{
    char p[PATH_BYTES];
    for (int i = 0; files && files[i]; i++)
        if (snprintf(p, sizeof p, "%s/%s", dir, files[i]) < (int)sizeof p)
            send_rec(p, withdraw);
    send_rec(dir, withdraw);
}

int bk_janitor_mkdtemp(char *tmpl, const char *const *files)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t len = strlen(tmpl);
    if (len < 6 || len >= PATH_BYTES || strcmp(tmpl + len - 6, "XXXXXX") != 0) {
        errno = EINVAL;
        return -1;
    }
    char *x = tmpl + len - 6;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char rnd[6];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            int e = errno;
            memcpy(x, "XXXXXX", 6);
            errno = e;
            return -1;
        }
        for (int i = 0; i < 6; i++)
            x[i] = abc[rnd[i] % (sizeof abc - 1)];
        /* before the folder exists: no moment when it exists unknown to the janitor */
        send_folder(tmpl, files, 0);
        if (g_test_hook)
            g_test_hook(tmpl, 0);
        if (mkdir(tmpl, 0700) == 0) {
            if (g_test_hook)
                g_test_hook(tmpl, 1);
            return 0;
        }
        int e = errno;
        send_folder(tmpl, files, 1); /* not ours: another process's, or none */
        if (e != EEXIST) {
            memcpy(x, "XXXXXX", 6);
            errno = e;
            return -1;
        }
    }
    memcpy(x, "XXXXXX", 6);
    errno = EEXIST;
    return -1;
}

void bk_janitor_test_hook(void (*hook)(const char *dir, int made))
{
    g_test_hook = hook;
}

static void shm_rec(const char *run_id, const char *arm, int rank, int withdraw)
{
    char name[BK_SHM_NAME_LEN], path[BK_SHM_NAME_LEN + 16];
    bk_shm_name(run_id, arm, rank, name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    send_rec(path, withdraw);
}

void bk_janitor_add_shm(const char *run_id, const char *arm, int rank)
{
    shm_rec(run_id, arm, rank, 0);
}

void bk_janitor_withdraw_shm(const char *run_id, const char *arm, int rank)
{
    shm_rec(run_id, arm, rank, 1);
}

int bk_janitor_add_mpi_segments(int local_rank)
{
    static const char *const prefix[] = { "vader_segment.", "sm_segment.", NULL };
    if (local_rank < 0)
        return 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[PATH_BYTES + 128], suffix[16], given[4][PATH_BYTES];
    int n = 0;
    snprintf(suffix, sizeof suffix, ".%d", local_rank);
    while (fgets(line, sizeof line, f) && n < 4) {
        line[strcspn(line, "\n")] = '\0';
        char *path = strstr(line, " /dev/shm/");
        if (!path)
            continue;
        path++;
        const char *base = path + strlen("/dev/shm/"), *end = path + strlen(path);
        int ours = 0;
        for (int i = 0; prefix[i]; i++)
            ours |= strncmp(base, prefix[i], strlen(prefix[i])) == 0;
        size_t sl = strlen(suffix);
        struct stat sb;
        if (!ours || (size_t)(end - base) <= sl || strcmp(end - sl, suffix) != 0 ||
            strchr(base, '/') || stat(path, &sb) != 0 || sb.st_uid != geteuid())
            continue;
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= strcmp(given[i], path) == 0;
        if (seen || strlen(path) >= PATH_BYTES)
            continue;
        memcpy(given[n++], path, strlen(path) + 1);
        bk_janitor_add(path);
    }
    fclose(f);
    return n;
}
