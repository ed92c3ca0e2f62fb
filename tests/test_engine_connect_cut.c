/* test_engine_connect_cut.c - the set-up's second wait, the backend's connect, ends at the
 * arm's end too. A lane peer said hello and was then lost: its shared-memory segment never
 * appears, or it stopped before the lane's first barrier. The engine waiting for it (the
 * real program, BK_BRACKET, against a real coordinator in this process) gives up at the
 * arm's end less the time kept to report (timeouts.arm_s 6: about 4.8 s after its start),
 * not at timeouts.rendezvous_s (30 s here), and its status names the peer and says the arm's
 * time cut the wait. it_test_engine_setup_end covers the first wait, the rendezvous. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "collectives/collectives.h"
#include "plans/plan.h"
#include "runner/agent.h"
#include "runner/coordinator.h"
#include "runner/wire.h"

#define ARM_S 6
#define RENDEZVOUS_S 30
/* the engine must be done well before rendezvous_s, the old bound, and it gets twice that
 * before it is killed here */
#define DONE_BY_S 20.0
#define KILL_AT_S (2.0 * RENDEZVOUS_S)

static char RUN[64];
static char g_dir[256], g_plan[320];
static const char *g_exe;
static int g_nshapes, g_iters;

static int setup(void **state)
{
    (void)state;
    g_exe = getenv("BK_BRACKET");
    const char *src = getenv("BK_SOURCE_DIR");
    if (!g_exe || !src) {
        fprintf(stderr, "BK_BRACKET and BK_SOURCE_DIR must name the program and the source "
                        "tree (ctest sets both)\n");
        return -1;
    }
    snprintf(RUN, sizeof RUN, "test-connect-cut-%d", (int)getpid());
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/bk-connect-cut-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        return -1;
    /* the integration tests' plan (a lane of 2 on the cpu backend) with short time-outs */
    char in[512];
    snprintf(in, sizeof in, "%s/tests/fixtures/plans/it-cpu.json", src);
    json_error_t je;
    json_t *p = json_load_file(in, 0, &je);
    if (!p)
        return -1;
    json_object_set_new(p, "timeouts", json_pack("{s:i,s:i}", "arm_s", ARM_S, "rendezvous_s",
                                                 RENDEZVOUS_S));
    snprintf(g_plan, sizeof g_plan, "%s/plan.json", g_dir);
    int rc = json_dump_file(p, g_plan, JSON_INDENT(2));
    json_decref(p);
    if (rc != 0)
        return -1;
    bk_plan plan;
    bk_err err = { 0 };
    if (bk_plan_load(g_plan, NULL, 0, &plan, &err) != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    g_nshapes = plan.workload.nshapes;
    g_iters = plan.workload.iters;
    bk_plan_free(&plan);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_plan);
    rmdir(g_dir);
    return 0;
}

typedef struct lane {
    bk_coord *c;
    bk_arm_run arm;
    bk_proc eng[2];
} lane;

static void lane_open(lane *l)
{
    bk_err err = { 0 };
    memset(l, 0, sizeof *l);
    assert_int_equal(bk_coord_open(&l->c, RUN, g_nshapes, g_iters, 1, &err), BK_OK);
    l->arm.idx = BK_ARM_IDX_B;
    l->arm.name = "B";
    l->arm.world = 2;
    l->arm.r = calloc(2, sizeof *l->arm.r);
    l->arm.lane = calloc(2, sizeof *l->arm.lane);
    assert_non_null(l->arm.r);
    assert_non_null(l->arm.lane);
    assert_int_equal(bk_coord_begin_arm(l->c, &l->arm, &err), BK_OK);
}

static void lane_close(lane *l)
{
    bk_arm_free(&l->arm, g_nshapes, 1);
    bk_coord_close(l->c);
    l->c = NULL;
}

/* The test's lane: after each test, whatever way it ended, no engine of it is left (a
 * stopped one included: SIGKILL ends it), nor a segment, nor the coordinator. */
static lane g_lane;

static int lane_teardown(void **state)
{
    (void)state;
    for (int r = 0; r < 2; r++) {
        if (g_lane.eng[r].pid > 0 && !bk_proc_poll(&g_lane.eng[r]))
            bk_proc_kill(&g_lane.eng[r], 0.2, 0);
        char name[BK_SHM_NAME_LEN];
        bk_err err = { 0 };
        bk_shm_name(RUN, "B", r, name);
        bk_shm_unlink_name(name, &err);
    }
    if (g_lane.c)
        lane_close(&g_lane);
    return 0;
}

/* Lane rank r's engine: the real program, arm B of a lane of 2. */
static void spawn_engine(lane *l, int r)
{
    char rs[8];
    snprintf(rs, sizeof rs, "%d", r);
    char *argv[] = { (char *)g_exe, "engine", "--plan", g_plan, "--run", RUN, "--arm", "B",
                     "--variant", "shm_twopass", "--rendezvous",
                     (char *)bk_coord_rendezvous_ep(l->c), "--samples",
                     (char *)bk_coord_samples_ep(l->c), "--rank", rs, "--world", "2",
                     "--backend", "cpu", NULL };
    bk_err err = { 0 };
    assert_int_equal(bk_proc_spawn(g_exe, argv, &l->eng[r], &err), BK_OK);
}

/* Serve the coordinator until rank 0's engine ended (its status in, or a grace after) or
 * KILL_AT_S passed (then it is killed: a failure). Returns the seconds it ran. */
static double serve_until_rank0_ends(lane *l)
{
    const uint64_t t0 = l->eng[0].t_spawn_ns, kill_at = t0 + (uint64_t)(KILL_AT_S * 1e9);
    while (!bk_proc_poll(&l->eng[0])) {
        bk_coord_poll(l->c, 20);
        if (bk_now_ns() > kill_at) {
            bk_proc_kill(&l->eng[0], 1.0, 1);
            fail_msg("rank 0's engine still ran %.0f s after its start", KILL_AT_S);
        }
    }
    const uint64_t grace = bk_now_ns() + 3000000000ull;
    while (!l->arm.r[0].status_seen && bk_now_ns() < grace)
        bk_coord_poll(l->c, 20);
    return bk_proc_seconds(&l->eng[0]);
}

/* What rank 0's engine said, and when it gave up. */
static void assert_cut(const lane *l, double took_s, const char *wait_text)
{
    const bk_rank_data *d = &l->arm.r[0];
    char pd[96];
    bk_proc_describe(&l->eng[0], pd, sizeof pd);
    printf("rank 0: %s after %.1f s: %s\n", pd, took_s, d->status_msg);
    assert_int_equal(l->eng[0].signal, 0);
    assert_int_equal(l->eng[0].exit_code, 1);
    assert_true(d->status_seen);
    assert_false(d->status_ok);
    assert_non_null(strstr(d->status_msg, wait_text));
    assert_non_null(strstr(d->status_msg, BK_ARM_END_SAID));
    /* the wait ends about 4.8 s after the engine's start; the old bound was 30 s */
    assert_true(took_s > 3.0);
    assert_true(took_s < DONE_BY_S);
}

/* No segment of the run's arm B is left in /dev/shm. */
static void assert_no_segment(int r)
{
    char name[BK_SHM_NAME_LEN], path[BK_SHM_NAME_LEN + 16];
    struct stat sb;
    bk_shm_name(RUN, "B", r, name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_not_equal(stat(path, &sb), 0);
}

/* Rank 1 said hello (here, by hand), naming a segment that never appears: rank 0 waits for
 * it in connect until the arm's end. */
static void test_segment_never_appears(void **state)
{
    (void)state;
    lane_open(&g_lane);
    lane *l = &g_lane;
    char name[BK_SHM_NAME_LEN], node[BK_NODE_LEN];
    unsigned char blob[BK_BLOB_MAX];
    bk_shm_name(RUN, "B", 1, name);
    bk_node_self(node);
    const size_t n = strlen(name) + 1, m = strlen(node) + 1;
    memcpy(blob, name, n);
    memcpy(blob + n, node, m);
    void *zctx = zmq_ctx_new();
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    assert_non_null(s);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(s, bk_coord_rendezvous_ep(l->c)), 0);
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "B", 1 };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_hello(&b, &h, 2, (int64_t)getpid(), blob, n + m, &err), BK_OK);
    assert_true(zmq_send(s, b.data, b.size, 0) >= 0);
    bk_wire_buf_free(&b);

    spawn_engine(l, 0);
    const double took = serve_until_rank0_ends(l);
    assert_true(l->arm.r[1].hello); /* the rendezvous was answered: the wait was connect's */
    assert_cut(l, took, "rank 1's segment");
    assert_no_segment(0);
    zmq_close(s);
    zmq_ctx_term(zctx);
}

/* Rank 1 is the real engine, stopped (SIGSTOP) once its hello is in: its segment is there,
 * but it never reaches the lane's first barrier (connect's last step). */
static void test_peer_stops_before_barrier(void **state)
{
    (void)state;
    lane_open(&g_lane);
    lane *l = &g_lane;
    spawn_engine(l, 1);
    const uint64_t end = bk_now_ns() + 20000000000ull;
    while (!l->arm.r[1].hello && bk_now_ns() < end && !bk_proc_poll(&l->eng[1]))
        bk_coord_poll(l->c, 10);
    assert_true(l->arm.r[1].hello);
    assert_int_equal(kill(l->eng[1].pid, SIGSTOP), 0);

    spawn_engine(l, 0);
    const double took = serve_until_rank0_ends(l);
    bk_proc_kill(&l->eng[1], 0.2, 0); /* SIGKILL ends a stopped process */
    assert_int_equal(l->eng[1].signal, SIGKILL);
    /* rank 1, killed so, left its segment: the teardown removes it, as bracket's janitor
     * would */
    assert_cut(l, took, "barrier: rank 1 did not arrive");
    assert_no_segment(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_segment_never_appears, lane_teardown),
        cmocka_unit_test_teardown(test_peer_stops_before_barrier, lane_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
