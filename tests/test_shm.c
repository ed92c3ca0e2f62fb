/* test_shm.c - POSIX shared-memory peer memory between forked processes: create, connect,
 * many barriers with data exchange (with and without a spin phase), time-outs with their
 * messages, segments that are not the peer's refused, and no segment left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/collectives.h"

#define PAYLOAD (64 * 1024)
#define ROUNDS 300
#define MAXW 8

/* What children tell the parent (a MAP_SHARED page made before fork). */
typedef struct report {
    int code[MAXW];
    char msg[MAXW][512];
} report;

static report *g_rep;
static int g_counter;
static uint64_t g_spin_ns; /* bk_shm_set_spin for the children (0: the default) */
static double g_end_in_s;  /* > 0: the surviving deserter sets an end this far away */

static void run_id(char *buf, size_t len)
{
    snprintf(buf, len, "test-shm-%d-%d", (int)getpid(), g_counter++);
}

static void names_of(const char *rid, const char *arm, int world, char names[][BK_SHM_NAME_LEN],
                     const char **ptrs)
{
    for (int r = 0; r < world; r++) {
        bk_shm_name(rid, arm, r, names[r]);
        ptrs[r] = names[r];
    }
}

static int shm_exists(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

/* ---- children ---- */

/* Every round: write (round, rank) patterns, barrier, check every peer's, barrier. */
static int child_exchange(const char *rid, int rank, int world)
{
    char names[MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    names_of(rid, "B'", world, names, ptrs);
    if (bk_shm_create(rid, "B'", rank, world, PAYLOAD, &shm, mine, &err) != BK_OK ||
        strcmp(mine, names[rank]) != 0)
        goto fail;
    bk_shm_set_spin(shm, g_spin_ns);
    if (bk_shm_connect(shm, ptrs, 10.0, &err) != BK_OK)
        goto fail;
    for (int round = 0; round < ROUNDS; round++) {
        if (round % 50 == 49)
            bk_sleep_ns(3000000ull * (unsigned)(rank + 1)); /* peers park on the futex */
        uint32_t *own = bk_shm_local(shm);
        for (size_t i = 0; i < PAYLOAD / 4; i++)
            own[i] = (uint32_t)(round * 1000003u + (unsigned)rank * 7919u + i);
        if (bk_shm_barrier(shm, 10.0, &err) != BK_OK)
            goto fail;
        for (int p = 0; p < world; p++) {
            const uint32_t *v = bk_shm_peer(shm, p);
            for (size_t i = 0; i < PAYLOAD / 4; i++)
                if (v[i] != (uint32_t)(round * 1000003u + (unsigned)p * 7919u + i)) {
                    snprintf(err.msg, sizeof err.msg, "round %d: rank %d's word %zu is wrong",
                             round, p, i);
                    goto fail;
                }
        }
        if (bk_shm_barrier(shm, 10.0, &err) != BK_OK)
            goto fail;
    }
    bk_shm_destroy(shm);
    return 0;
fail:
    bk_strlcpy(g_rep->msg[rank], err.msg, sizeof g_rep->msg[rank]);
    bk_shm_destroy(shm);
    return 1;
}

/* Rank 1 connects and dies (SIGKILL) before the next barrier, leaving its segment;
 * rank 0's next barrier must time out naming it. */
static int child_deserter(const char *rid, int rank, int world)
{
    char names[MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    names_of(rid, "C", world, names, ptrs);
    if (bk_shm_create(rid, "C", rank, world, PAYLOAD, &shm, mine, &err) != BK_OK ||
        (bk_shm_set_spin(shm, g_spin_ns), bk_shm_connect(shm, ptrs, 10.0, &err)) != BK_OK) {
        bk_strlcpy(g_rep->msg[rank], err.msg, sizeof g_rep->msg[rank]);
        return 1;
    }
    if (rank == 1)
        raise(SIGKILL); /* gone, segment left behind */
    if (g_end_in_s > 0) /* the arm's end, 0.3 s from now, comes before the 60 s bound */
        bk_shm_set_end(shm, bk_now_ns() + (uint64_t)(g_end_in_s * 1e9));
    g_rep->code[rank] = bk_shm_barrier(shm, g_end_in_s > 0 ? 60.0 : 0.3, &err);
    bk_strlcpy(g_rep->msg[rank], err.msg, sizeof g_rep->msg[rank]);
    bk_shm_destroy(shm);
    return 0;
}

typedef int (*child_fn)(const char *rid, int rank, int world);

/* Fork `world` children running fn; every child must exit 0, but `killed`
 * (-1: none) must die of SIGKILL. */
static void run_lane(const char *rid, int world, child_fn fn, int killed)
{
    pid_t pids[MAXW];
    memset(g_rep, 0, sizeof *g_rep);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(fn(rid, r, world));
    }
    for (int r = 0; r < world; r++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        if (r == killed) {
            assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
            continue;
        }
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            fail_msg("rank %d of %d failed (status %d): %s", r, world, ws, g_rep->msg[r]);
    }
}

/* ---- tests ---- */

static void exchange(int world)
{
    char rid[64], names[MAXW][BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    run_id(rid, sizeof rid);
    run_lane(rid, world, child_exchange, -1);
    names_of(rid, "B'", world, names, ptrs);
    for (int r = 0; r < world; r++)
        assert_false(shm_exists(names[r]));
}

static void test_exchange_2(void **state)
{
    (void)state;
    exchange(2);
}

static void test_exchange_4(void **state)
{
    (void)state;
    exchange(4);
}

/* A spin phase of 1 ms: the rounds where a peer sleeps 3-6 ms see the spin run out and
 * the waiter go on to yield and park; the data must come through either way. */
static void test_exchange_spinning(void **state)
{
    (void)state;
    g_spin_ns = 1000000ull;
    exchange(2);
    exchange(4);
    g_spin_ns = 0;
}

static void barrier_times_out(uint64_t spin_ns)
{
    char rid[64], names[MAXW][BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    g_spin_ns = spin_ns;
    uint64_t t0 = bk_now_ns();
    run_lane(rid, 2, child_deserter, 1);
    double took_s = (double)(bk_now_ns() - t0) / 1e9;
    g_spin_ns = 0;
    /* a bound, not a timing: a spin phase (of 60 s here) must not outlast the deadline */
    if (took_s > 20.0)
        fail_msg("the barrier's 0.3 s time-out took %.1f s (spin %.0f s)", took_s,
                 (double)spin_ns / 1e9);
    assert_int_equal(g_rep->code[0], BK_ERR_TIMEOUT);
    /* connect's barrier is epoch 1; the deserter never reached epoch 2 */
    assert_string_equal(g_rep->msg[0],
                        "barrier: rank 1 did not arrive within 0.3 s (epoch 2, it is at 1)");
    names_of(rid, "C", 2, names, ptrs);
    assert_false(shm_exists(names[0]));
    /* the deserter died by SIGKILL after connect: connect had unlinked its name */
    assert_false(shm_exists(names[1]));
    assert_int_equal(bk_shm_unlink_name(names[1], &err), BK_OK); /* absent is fine */
}

static void test_barrier_times_out_naming_the_peer(void **state)
{
    (void)state;
    barrier_times_out(0);
}

/* bk_shm_set_end: a barrier's bound (60 s) ends at the arm's end (0.3 s away), saying so */
static void test_barrier_ends_at_the_arms_end(void **state)
{
    (void)state;
    char rid[64];
    run_id(rid, sizeof rid);
    g_end_in_s = 0.3;
    uint64_t t0 = bk_now_ns();
    run_lane(rid, 2, child_deserter, 1);
    double took_s = (double)(bk_now_ns() - t0) / 1e9;
    g_end_in_s = 0;
    if (took_s > 20.0) /* a bound, not a timing: the 60 s bound must not be waited out */
        fail_msg("the barrier ending 0.3 s away took %.1f s", took_s);
    assert_int_equal(g_rep->code[0], BK_ERR_TIMEOUT);
    assert_string_equal(g_rep->msg[0], "barrier: rank 1 did not arrive within 0.3 s (the arm's "
                        "time ran out: timeouts.arm_s, less the time kept to report; epoch 2, it "
                        "is at 1)");
}

/* bk_shm_set_spin's spin phase keeps the deadline */
static void test_barrier_times_out_while_spinning(void **state)
{
    (void)state;
    barrier_times_out(60000000000ull);
}

static void test_missing_peer_times_out_on_connect(void **state)
{
    (void)state;
    char rid[64], names[MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[MAXW];
    bk_err err = { 0 };
    bk_shm *shm = NULL;
    run_id(rid, sizeof rid);
    names_of(rid, "A", 2, names, ptrs);
    assert_int_equal(bk_shm_create(rid, "A", 0, 2, 128, &shm, mine, &err), BK_OK);
    assert_true(shm_exists(mine));
    assert_int_equal(bk_shm_connect(shm, ptrs, 0.3, &err), BK_ERR_TIMEOUT);
    char want[256];
    snprintf(want, sizeof want, "shm connect: rank 1's segment %s did not appear within 0.3 s",
             names[1]);
    assert_string_equal(err.msg, want);
    bk_shm_destroy(shm);
    assert_false(shm_exists(mine));
}

static void test_name_and_exclusive_create(void **state)
{
    (void)state;
    char rid[64], a[BK_SHM_NAME_LEN], b[BK_SHM_NAME_LEN];
    bk_err err = { 0 };
    bk_shm *s1 = NULL, *s2 = NULL;
    char long_id[300];
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    bk_shm_name(long_id, "B'", 1023, a);
    assert_true(strlen(a) < BK_SHM_NAME_LEN);
    assert_non_null(strstr(a, "-Bp-1023"));
    run_id(rid, sizeof rid);
    assert_int_equal(bk_shm_create(rid, "B", 0, 1, 64, &s1, a, &err), BK_OK);
    assert_int_equal(bk_shm_create(rid, "B", 0, 1, 64, &s2, b, &err), BK_ERR_SYSTEM);
    assert_null(s2);
    assert_non_null(strstr(err.msg, "File exists"));
    /* world 1: connect and barriers need nobody */
    const char *ptrs[1] = { a };
    bk_err_clear(&err);
    assert_int_equal(bk_shm_connect(s1, ptrs, 0.1, &err), BK_OK);
    assert_int_equal(bk_shm_barrier(s1, 0.1, &err), BK_OK);
    assert_int_equal(bk_shm_bytes(s1), 64);
    assert_ptr_equal(bk_shm_peer(s1, 0), bk_shm_local(s1));
    bk_shm_destroy(s1);
    assert_false(shm_exists(a));
}

/* ---- refusals: one process makes a lane's segments itself ---- */

/* The lane's segments made here; lane_teardown unlinks what a failed case left. */
static bk_shm *g_lane[3];

static int lane_teardown(void **state)
{
    (void)state;
    for (int r = 0; r < 3; r++) {
        bk_shm_destroy(g_lane[r]);
        g_lane[r] = NULL;
    }
    return 0;
}

/* Make ranks 0..world-1 of one lane in g_lane, each with its payload size. */
static void make_lane(const char *rid, int world, const size_t *bytes,
                      char names[][BK_SHM_NAME_LEN])
{
    bk_err err = { 0 };
    for (int r = 0; r < world; r++)
        if (bk_shm_create(rid, "A", r, world, bytes[r], &g_lane[r], names[r], &err) != BK_OK)
            fail_msg("create rank %d: %s", r, err.msg);
}

static void destroy_lane(int world, char names[][BK_SHM_NAME_LEN])
{
    for (int r = 0; r < world; r++) {
        bk_shm_destroy(g_lane[r]);
        g_lane[r] = NULL;
        assert_false(shm_exists(names[r]));
    }
}

/* A rank out of range is refused before anything is made: rank == world would have a
 * segment named for a rank the lane has not, and its mapping stored past the table. */
static void test_rank_out_of_range(void **state)
{
    (void)state;
    char rid[64], name[BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN] = "";
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    bk_shm_name(rid, "B", 2, name);
    assert_int_equal(bk_shm_create(rid, "B", 2, 2, 64, &g_lane[0], mine, &err),
                     BK_ERR_INTERNAL);
    assert_null(g_lane[0]);
    assert_false(shm_exists(name));
    assert_string_equal(err.msg, "shm: rank 2 of world 2 is out of range");
    assert_string_equal(mine, "");
    bk_err_clear(&err);
    assert_int_equal(bk_shm_create(rid, "B", -1, 2, 64, &g_lane[0], mine, &err),
                     BK_ERR_INTERNAL);
    assert_null(g_lane[0]);
}

/* bk_shm_peer of a rank outside 0..world-1 is NULL. World 3: its table of 3 mappings
 * leaves no zeroed slack after it in the allocation, so a read of the slot past the end
 * would not come back NULL by luck. */
static void test_peer_out_of_range(void **state)
{
    (void)state;
    static const size_t bytes[1] = { 64 };
    char rid[64], names[1][BK_SHM_NAME_LEN];
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    assert_int_equal(bk_shm_create(rid, "A", 0, 3, bytes[0], &g_lane[0], names[0], &err),
                     BK_OK);
    bk_shm *shm = g_lane[0];
    assert_ptr_equal(bk_shm_peer(shm, 0), bk_shm_local(shm));
    assert_null(bk_shm_peer(shm, 1)); /* not connected */
    assert_null(bk_shm_peer(shm, 3));
    assert_null(bk_shm_peer(shm, -1));
    destroy_lane(1, names);
}

/* Peers whose payloads differ: each side's connect names the other's segment and both
 * sizes at once (the larger side must not take the smaller segment for one not sized yet,
 * wait out its time-out and say it did not appear). */
static void test_peer_of_another_size(void **state)
{
    (void)state;
    static const size_t bytes[2] = { 4096, 8192 };
    char rid[64], names[2][BK_SHM_NAME_LEN], want[512];
    const char *ptrs[2] = { names[0], names[1] };
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    make_lane(rid, 2, bytes, names);
    assert_int_equal(bk_shm_connect(g_lane[0], ptrs, 0.3, &err), BK_ERR_PEER);
    snprintf(want, sizeof want,
             "shm: segment %s is rank 1/2 with 8192 bytes, expected rank 1/2 with 4096",
             names[1]);
    assert_string_equal(err.msg, want);
    bk_err_clear(&err);
    assert_int_equal(bk_shm_connect(g_lane[1], ptrs, 0.3, &err), BK_ERR_PEER);
    snprintf(want, sizeof want,
             "shm: segment %s is rank 0/2 with 4096 bytes, expected rank 0/2 with 8192",
             names[0]);
    assert_string_equal(err.msg, want);
    destroy_lane(2, names);
}

/* A segment whose header is right but whose file is not its size (grown since it was
 * made) is refused too. */
static void test_segment_of_another_size(void **state)
{
    (void)state;
    static const size_t bytes[2] = { 4096, 4096 };
    char rid[64], names[2][BK_SHM_NAME_LEN], want[512];
    const char *ptrs[2] = { names[0], names[1] };
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    make_lane(rid, 2, bytes, names);
    int fd = shm_open(names[1], O_RDWR, 0);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(ftruncate(fd, sb.st_size + 4096), 0);
    close(fd);
    assert_int_equal(bk_shm_connect(g_lane[0], ptrs, 0.3, &err), BK_ERR_PEER);
    snprintf(want, sizeof want, "shm: segment %s has %lld bytes, expected %lld", names[1],
             (long long)sb.st_size + 4096, (long long)sb.st_size);
    assert_string_equal(err.msg, want);
    destroy_lane(2, names);
}

/* Names in the wrong order: the segment at names[1] says it is rank 2's. */
static void test_segment_of_another_rank(void **state)
{
    (void)state;
    static const size_t bytes[3] = { 4096, 4096, 4096 };
    char rid[64], names[3][BK_SHM_NAME_LEN], want[512];
    const char *ptrs[3] = { names[0], names[2], names[1] };
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    make_lane(rid, 3, bytes, names);
    assert_int_equal(bk_shm_connect(g_lane[0], ptrs, 0.3, &err), BK_ERR_PEER);
    snprintf(want, sizeof want,
             "shm: segment %s is rank 2/3 with 4096 bytes, expected rank 1/3 with 4096",
             names[2]);
    assert_string_equal(err.msg, want);
    destroy_lane(3, names);
}

/* names[rank] must be our own segment: another rank's name there is a caller's bug. */
static void test_names_without_our_own(void **state)
{
    (void)state;
    static const size_t bytes[2] = { 4096, 4096 };
    char rid[64], names[2][BK_SHM_NAME_LEN], want[512];
    const char *ptrs[2] = { names[1], names[1] };
    bk_err err = { 0 };
    run_id(rid, sizeof rid);
    make_lane(rid, 2, bytes, names);
    assert_int_equal(bk_shm_connect(g_lane[0], ptrs, 0.3, &err), BK_ERR_INTERNAL);
    snprintf(want, sizeof want, "shm connect: names[0] is %s, our segment is %s", names[1],
             names[0]);
    assert_string_equal(err.msg, want);
    destroy_lane(2, names);
}

int main(void)
{
    g_rep = mmap(NULL, sizeof *g_rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_rep == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_2),
        cmocka_unit_test(test_exchange_4),
        cmocka_unit_test(test_exchange_spinning),
        cmocka_unit_test(test_barrier_times_out_naming_the_peer),
        cmocka_unit_test(test_barrier_ends_at_the_arms_end),
        cmocka_unit_test(test_barrier_times_out_while_spinning),
        cmocka_unit_test(test_missing_peer_times_out_on_connect),
        cmocka_unit_test(test_name_and_exclusive_create),
        cmocka_unit_test_teardown(test_rank_out_of_range, lane_teardown),
        cmocka_unit_test_teardown(test_peer_out_of_range, lane_teardown),
        cmocka_unit_test_teardown(test_peer_of_another_size, lane_teardown),
        cmocka_unit_test_teardown(test_segment_of_another_size, lane_teardown),
        cmocka_unit_test_teardown(test_segment_of_another_rank, lane_teardown),
        cmocka_unit_test_teardown(test_names_without_our_own, lane_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
