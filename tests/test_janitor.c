/* test_janitor.c - the janitor (runner/janitor.h): a rank's private folder and files are
 * removed however the rank ends, including at the moment right after its folder is made,
 * and a name the janitor was given and then took back is left alone. Each case runs a
 * "rank" in a child process with a janitor of its own; the rank reports through a pipe,
 * then dies, and the test waits (bounded) for its janitor to finish. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    char got[16];
    snprintf(g_sentinel, sizeof g_sentinel, "%s/sentinel", g_parent);
    touch(g_sentinel);
    run_rank(rank, got, sizeof got);
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
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
