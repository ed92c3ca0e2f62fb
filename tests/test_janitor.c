/* test_janitor.c - the janitor (runner/janitor.h): a rank's private folder and files are
 * removed however the rank ends, including at the moment right after its folder is made,
 * and a name the janitor was given and then took back is left alone; past its 64 paths
 * it removes the first 64 and exits cleanly; of Open MPI's segments it is given only this
 * user's, of this local rank. Each case runs a "rank" in a child process with a janitor of
 * its own; the rank reports through a pipe, then dies, and the test waits (bounded) for
 * its janitor to finish. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "collectives/collectives.h"
#include "runner/janitor.h"

static char g_parent[256];    /* a fresh folder of the test's own */
static int g_report = -1;       /* the rank's write end: NUL-terminated paths */
static int g_hook_calls;

static int exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* Wait up to 10 s for `p` to be gone (the janitor runs once its rank has exited). */
static int gone_soon(const char *p)
{
    for (int i = 0; i < 1000; i++) {
        if (!exists(p))
            return 1;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void report(const char *p)
{
    assert_int_equal(write(g_report, p, strlen(p) + 1), (ssize_t)strlen(p) + 1);
}

/* Run `rank` in a child with a janitor; return what it reported, NUL-separated, in out. */
static size_t run_rank(void (*rank)(void), char *out, size_t cap)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        g_report = fd[1];
        if (bk_janitor_start(0, NULL) != 0)
            _exit(3);
        rank();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < cap && (r = read(fd[0], out + n, cap - n)) != 0)
        if (r > 0)
            n += (size_t)r;
        else if (errno != EINTR)
            break;
    close(fd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    return n;
}

static void tmpl(char *buf, size_t len)
{
    snprintf(buf, len, "%s/bracket-t-XXXXXX", g_parent);
}

/* --- the moment right after mkdir: the folder exists, nothing else has run yet --- */

static void kill_after_mkdir(const char *dir, int made)
{
    g_hook_calls++;
    if (!made)
        return;
    report(dir);
    raise(SIGKILL);
}

static void rank_killed_after_mkdir(void)
{
    static const char *const files[] = { "plan.json", NULL };
    char d[PATH_MAX];
    tmpl(d, sizeof d);
    bk_janitor_test_hook(kill_after_mkdir);
    bk_janitor_mkdtemp(d, files);
    _exit(4); /* not reached: the hook kills the rank */
}

static void test_killed_right_after_mkdir(void **state)
{
    (void)state;
    char got[PATH_MAX];
    size_t n = run_rank(rank_killed_after_mkdir, got, sizeof got);
    assert_true(n > 0 && got[n - 1] == '\0');
    assert_non_null(strstr(got, "/bracket-t-"));
    assert_null(strstr(got, "XXXXXX"));
    assert_true(gone_soon(got));
}

/* --- a rank that wrote its files and exited without removing them --- */

static void rank_writes_files(void)
{
    static const char *const files[] = { "plan.json", "keys", NULL };
    char d[PATH_MAX], p[PATH_MAX + 16];
    tmpl(d, sizeof d);
    if (bk_janitor_mkdtemp(d, files) != 0)
        _exit(5);
    struct stat sb;
    if (stat(d, &sb) != 0 || (sb.st_mode & 0777) != 0700)
        _exit(6);
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", d, files[i]);
        FILE *f = fopen(p, "w");
        if (!f || fputs("x", f) < 0 || fclose(f) != 0)
            _exit(7);
    }
    report(d);
}

static void test_folder_and_files_removed(void **state)
{
    (void)state;
    char got[PATH_MAX];
    size_t n = run_rank(rank_writes_files, got, sizeof got);
    assert_true(n > 0);
    assert_true(gone_soon(got));
}

/* --- a name another process holds: taken back, another name tried --- */

static void take_first_name(const char *dir, int made)
{
    if (made) {
        report(dir); /* ours */
        return;
    }
    if (g_hook_calls++ == 0) {
        if (mkdir(dir, 0700) != 0) /* "another process" takes the name first */
            _exit(8);
        report(dir);
    }
}

static void rank_name_taken(void)
{
    static const char *const files[] = { "plan.json", NULL };
    char d[PATH_MAX], p[PATH_MAX + 16];
    tmpl(d, sizeof d);
    bk_janitor_test_hook(take_first_name);
    if (bk_janitor_mkdtemp(d, files) != 0)
        _exit(9);
    if (g_hook_calls != 2)
        _exit(10);
    snprintf(p, sizeof p, "%s/plan.json", d);
    FILE *f = fopen(p, "w");
    if (!f || fclose(f) != 0)
        _exit(11);
    raise(SIGKILL);
}

static void test_taken_name_left_alone(void **state)
{
    (void)state;
    char got[2 * PATH_MAX];
    size_t n = run_rank(rank_name_taken, got, sizeof got);
    assert_true(n > 0);
    const char *theirs = got, *ours = got + strlen(got) + 1;
    assert_true(ours < got + n);
    assert_string_not_equal(theirs, ours);
    /* ours was given after theirs: once ours is gone, theirs had its turn */
    assert_true(gone_soon(ours));
    assert_true(exists(theirs));
    assert_int_equal(rmdir(theirs), 0);
}

/* --- withdrawal takes back the latest equal path only --- */

static char g_a[PATH_MAX], g_b[PATH_MAX], g_sentinel[PATH_MAX];
static char g_got[64]; /* what the rank reported, for run_until_sentinel's callers */

static void rank_withdraws(void)
{
    bk_janitor_add(g_a);
    bk_janitor_withdraw(g_a);      /* a: given, taken back: kept */
    bk_janitor_add(g_b);
    bk_janitor_add(g_b);
    bk_janitor_withdraw(g_b);      /* b: given twice, taken back once: removed */
    bk_janitor_withdraw(g_parent); /* never given: nothing (teardown's rmdir then succeeds) */
    bk_janitor_add(g_sentinel);    /* last: gone means the janitor is done */
}

static void touch(const char *p)
{
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
}

/* Run `rank`, which gives g_sentinel (made here) to its janitor last, and wait until the
 * sentinel is gone: the janitor has then dealt with everything given before it. */
static void run_until_sentinel(void (*rank)(void))
{
    snprintf(g_sentinel, sizeof g_sentinel, "%s/sentinel", g_parent);
    touch(g_sentinel);
    memset(g_got, 0, sizeof g_got);
    run_rank(rank, g_got, sizeof g_got - 1);
    assert_true(gone_soon(g_sentinel));
}

static void test_withdraw(void **state)
{
    (void)state;
    snprintf(g_a, sizeof g_a, "%s/a", g_parent);
    snprintf(g_b, sizeof g_b, "%s/b", g_parent);
    touch(g_a);
    touch(g_b);
    run_until_sentinel(rank_withdraws);
    assert_true(exists(g_a));
    assert_false(exists(g_b));
    assert_int_equal(unlink(g_a), 0);
}

/* --- a cpu engine's segment: given before the spawn, taken back once the engine ended --- */

static char g_seg_kept[80], g_seg_gone[80];

static void seg_path(const char *arm, char *out)
{
    char name[BK_SHM_NAME_LEN];
    char run_id[32];
    snprintf(run_id, sizeof run_id, "jt%ld", (long)getpid());
    bk_shm_name(run_id, arm, 1, name);
    snprintf(out, 80, "/dev/shm%s", name);
}

static void rank_segments(void)
{
    char run_id[32];
    snprintf(run_id, sizeof run_id, "jt%ld", (long)getppid());
    bk_janitor_add_shm(run_id, "B", 1);
    bk_janitor_add_shm(run_id, "C", 1);
    bk_janitor_withdraw_shm(run_id, "B", 1); /* B's engine ended */
    bk_janitor_add(g_sentinel);
}

static void test_segments(void **state)
{
    (void)state;
    seg_path("B", g_seg_kept);
    seg_path("C", g_seg_gone);
    touch(g_seg_kept);
    touch(g_seg_gone);
    run_until_sentinel(rank_segments);
    assert_false(exists(g_seg_gone));
    assert_true(exists(g_seg_kept));
    assert_int_equal(unlink(g_seg_kept), 0);
}

/* --- of equal paths, a withdrawal takes back the latest: the order given holds --- */

static char g_dir[PATH_MAX], g_file[PATH_MAX];

static void rank_gives_file_twice(void)
{
    bk_janitor_add(g_file);
    bk_janitor_add(g_dir);
    bk_janitor_add(g_file);
    bk_janitor_withdraw(g_file); /* the second: the file still goes before its folder */
    bk_janitor_add(g_sentinel);
}

static void test_withdraw_takes_the_latest(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/d", g_parent);
    snprintf(g_file, sizeof g_file, "%s/d/f", g_parent);
    assert_int_equal(mkdir(g_dir, 0700), 0);
    touch(g_file);
    run_until_sentinel(rank_gives_file_twice);
    int file_left = exists(g_file), dir_left = exists(g_dir);
    unlink(g_file);
    rmdir(g_dir);
    assert_false(file_left);
    assert_false(dir_left);
}

/* --- a path that begins with the withdrawal mark is no withdrawal --- */

static void rank_gives_marked_path(void)
{
    char marked[PATH_MAX + 1];
    snprintf(marked, sizeof marked, "\x01%s", g_a);
    bk_janitor_add(g_a);
    bk_janitor_add(marked); /* refused: read as a withdrawal, it would take g_a back */
    bk_janitor_add(g_sentinel);
}

static void test_marked_path_refused(void **state)
{
    (void)state;
    snprintf(g_a, sizeof g_a, "%s/a", g_parent);
    touch(g_a);
    run_until_sentinel(rank_gives_marked_path);
    int left = exists(g_a);
    unlink(g_a);
    assert_false(left);
}

/* --- more paths than the janitor holds: the first 64 go, the rest stay --- */

#define GIVEN 70
#define HELD 64 /* janitor.h: at most 64 paths */

static char g_many[GIVEN][PATH_MAX];

static void rank_gives_many(void)
{
    for (int i = 0; i < GIVEN; i++)
        bk_janitor_add(g_many[i]);
}

/* Run `rank` as run_rank does, under a subreaper: the rank's janitor, orphaned when the
 * rank exits, becomes the reaper's child, so the reaper sees it end. Returns the
 * janitor's wait status. */
static int run_rank_reaped(void (*rank)(void))
{
    int fd[2], ws[2] = { -1, -1 }; /* the rank's, the janitor's */
    assert_int_equal(pipe(fd), 0);
    pid_t reaper = fork();
    assert_true(reaper >= 0);
    if (reaper == 0) {
        close(fd[0]);
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
            _exit(20);
        pid_t pid = fork();
        if (pid < 0)
            _exit(21);
        if (pid == 0) {
            close(fd[1]);
            if (bk_janitor_start(0, NULL) != 0)
                _exit(3);
            rank();
            _exit(0);
        }
        for (;;) {
            int st;
            pid_t p = wait(&st);
            if (p < 0 && errno == EINTR)
                continue;
            if (p < 0)
                break; /* no child left: the rank and its janitor both ended */
            ws[p == pid ? 0 : 1] = st;
        }
        _exit(write(fd[1], ws, sizeof ws) == (ssize_t)sizeof ws ? 0 : 22);
    }
    close(fd[1]);
    ssize_t r;
    while ((r = read(fd[0], ws, sizeof ws)) < 0 && errno == EINTR)
        ;
    close(fd[0]);
    int st;
    assert_int_equal(waitpid(reaper, &st, 0), reaper);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(r, (ssize_t)sizeof ws);
    assert_true(WIFEXITED(ws[0]) && WEXITSTATUS(ws[0]) == 0);
    return ws[1];
}

static void test_more_paths_than_held(void **state)
{
    (void)state;
    for (int i = 0; i < GIVEN; i++) {
        snprintf(g_many[i], sizeof g_many[i], "%s/f%02d", g_parent, i);
        touch(g_many[i]);
    }
    int ws = run_rank_reaped(rank_gives_many);
    int left[GIVEN];
    for (int i = 0; i < GIVEN; i++) {
        left[i] = exists(g_many[i]);
        unlink(g_many[i]);
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        fail_msg("the janitor ended with wait status %#x", (unsigned)ws);
    for (int i = 0; i < GIVEN; i++)
        if (left[i] != (i >= HELD))
            fail_msg("path %d of %d: %s, expected %s", i + 1, GIVEN,
                     left[i] ? "left" : "removed", i >= HELD ? "left" : "removed");
}

/* --- Open MPI's segments: this local rank's, this user's only --- */

#define SEGS 4

static char g_seg[SEGS][PATH_MAX];
static int g_local_rank;

/* Map every g_seg file (every rank maps its peers' segments too), then give ours. */
static void rank_maps_segments(void)
{
    char n[16];
    for (int i = 0; i < SEGS && g_seg[i][0]; i++) {
        int fd = open(g_seg[i], O_RDWR);
        if (fd < 0 || mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED)
            _exit(12);
        close(fd);
    }
    snprintf(n, sizeof n, "%d", bk_janitor_add_mpi_segments(g_local_rank));
    report(n);
    bk_janitor_add(g_sentinel);
}

/* Make /dev/shm files named like Open MPI's for `suffixes` (NULL-terminated). */
static void make_segments(const char *const *suffixes)
{
    memset(g_seg, 0, sizeof g_seg);
    for (int i = 0; suffixes[i]; i++) {
        snprintf(g_seg[i], sizeof g_seg[i], "/dev/shm/%s", suffixes[i]);
        int fd = open(g_seg[i], O_RDWR | O_CREAT | O_EXCL, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 4096), 0);
        close(fd);
    }
}

/* Run rank_maps_segments; `left` says which g_seg files stayed, and all are removed. */
static void run_segments(int local_rank, int *left)
{
    g_local_rank = local_rank;
    run_until_sentinel(rank_maps_segments);
    for (int i = 0; i < SEGS; i++) {
        left[i] = g_seg[i][0] && exists(g_seg[i]);
        if (g_seg[i][0])
            unlink(g_seg[i]);
    }
}

static void test_mpi_segments_of_this_local_rank(void **state)
{
    (void)state;
    char a[64], b[64], c[64], d[64];
    long pid = (long)getpid();
    snprintf(a, sizeof a, "vader_segment.bk-test-%ld.1", pid); /* ours: local rank 1 */
    snprintf(b, sizeof b, "vader_segment.bk-test-%ld.2", pid);
    snprintf(c, sizeof c, "vader_segment.bk-test-%ld.11", pid);
    snprintf(d, sizeof d, "sm_segment.bk-test-%ld.2", pid);
    const char *const suffixes[] = { a, b, c, d, NULL };
    int left[SEGS];
    make_segments(suffixes);
    run_segments(1, left);
    assert_string_equal(g_got, "1");
    assert_false(left[0]);
    assert_true(left[1]);
    assert_true(left[2]);
    assert_true(left[3]);
}

/* Another user's segment named for our local rank is not ours to remove. A file of
 * another user's takes root to make (chown); CI runs the tests as root. */
static void test_mpi_segment_of_another_user(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("SKIPPED: not root, so no file of another user's can be made here\n");
        skip();
    }
    char a[64];
    snprintf(a, sizeof a, "vader_segment.bk-test-%ld.0", (long)getpid());
    const char *const suffixes[] = { a, NULL };
    int left[SEGS];
    make_segments(suffixes);
    if (chown(g_seg[0], 65534, 65534) != 0) {
        int e = errno;
        unlink(g_seg[0]);
        print_message("SKIPPED: chown to uid 65534 failed (%s): a user namespace without it?\n",
                      strerror(e));
        skip();
    }
    run_segments(0, left);
    assert_string_equal(g_got, "0");
    assert_true(left[0]);
}

/* --- errors: the template as given, errno set --- */

static void test_errors(void **state)
{
    (void)state;
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s/bracket-t-XXXXX", g_parent); /* five X */
    errno = 0;
    assert_int_equal(bk_janitor_mkdtemp(d, NULL), -1);
    assert_int_equal(errno, EINVAL);
    snprintf(d, sizeof d, "%s/no-such-folder/bracket-t-XXXXXX", g_parent);
    char before[PATH_MAX];
    snprintf(before, sizeof before, "%s", d);
    errno = 0;
    assert_int_equal(bk_janitor_mkdtemp(d, NULL), -1);
    assert_int_equal(errno, ENOENT);
    assert_string_equal(d, before);
    char longer[600];
    memset(longer, 'a', sizeof longer);
    memcpy(longer + sizeof longer - 7, "XXXXXX", 7);
    errno = 0;
    assert_int_equal(bk_janitor_mkdtemp(longer, NULL), -1);
    assert_int_equal(errno, EINVAL);
    /* without a janitor it is mkdtemp: the folder made, 0700, name filled in */
    tmpl(d, sizeof d);
    assert_int_equal(bk_janitor_mkdtemp(d, NULL), 0);
    struct stat sb;
    assert_int_equal(stat(d, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_null(strstr(d, "XXXXXX"));
    assert_int_equal(rmdir(d), 0);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_parent, sizeof g_parent, "%s/bk-test-janitor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(g_parent) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(g_parent); /* fails the run when a case left anything there */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_right_after_mkdir),
        cmocka_unit_test(test_folder_and_files_removed),
        cmocka_unit_test(test_taken_name_left_alone),
        cmocka_unit_test(test_withdraw),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_withdraw_takes_the_latest),
        cmocka_unit_test(test_marked_path_refused),
        cmocka_unit_test(test_more_paths_than_held),
        cmocka_unit_test(test_mpi_segments_of_this_local_rank),
        cmocka_unit_test(test_mpi_segment_of_another_user),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
