/* test_engine_cpu_comm.c - the cpu backend's peer blobs: each carries the segment name and the
 * node; a lane whose ranks are on two hosts is refused at connect, naming both (its shared
 * memory cannot span hosts: before, the ranks waited out the time-out for segments that never
 * appear), whichever rank of the lane is elsewhere, malformed blobs (too long a name or node
 * among them) are refused naming the rank, and nothing is left in /dev/shm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/engine.h"

static char RUN[64]; /* test-cpu-comm-PID: no clash with a crashed earlier run */

static unsigned char g_blobs[2][BK_BLOB_MAX];
static size_t g_lens[2];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Lane rank `r` (0 or 1) of a lane of 2 with its own blob in slot r; the other slot is the
 * test's. Returns ctx. */
static bk_backend_ctx *lane_rank(int r, const char *arm)
{
    bk_backend_ctx *ctx = NULL;
    bk_err err;
    bk_err_clear(&err);
    assert_int_equal(bk_engine_cpu.open(&ctx, r, 2, -1, &err), BK_OK);
    assert_int_equal(bk_engine_cpu.comm_create(ctx, RUN, arm, 4096, g_blobs[r], &g_lens[r], &err),
                     BK_OK);
    return ctx;
}

/* A blob as rank `r` would send it: its segment's name, then `node`. */
static void blob_of(int r, const char *arm, const char *node)
{
    char name[BK_SHM_NAME_LEN];
    bk_shm_name(RUN, arm, r, name);
    size_t n = strlen(name) + 1, m = strlen(node) + 1;
    memcpy(g_blobs[r], name, n);
    memcpy(g_blobs[r] + n, node, m);
    g_lens[r] = n + m;
}

static void peer_blob(const char *arm, const char *node)
{
    blob_of(1, arm, node);
}

static void assert_no_segment(const char *arm)
{
    char name[BK_SHM_NAME_LEN], path[BK_SHM_NAME_LEN + 16];
    bk_shm_name(RUN, arm, 0, name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_our_blob_names_our_node(void **state)
{
    (void)state;
    bk_backend_ctx *ctx = lane_rank(0, "N");
    char node[BK_NODE_LEN], name[BK_SHM_NAME_LEN];
    bk_node_self(node);
    bk_shm_name(RUN, "N", 0, name);
    assert_string_equal((const char *)g_blobs[0], name);
    assert_string_equal((const char *)g_blobs[0] + strlen(name) + 1, node);
    assert_int_equal(g_lens[0], strlen(name) + 1 + strlen(node) + 1);
    bk_engine_cpu.close(ctx);
    assert_no_segment("N");
}

static void test_lane_over_two_hosts_refused(void **state)
{
    (void)state;
    bk_backend_ctx *ctx = lane_rank(0, "H");
    peer_blob("H", "elsewhere boot 00000000-0000-0000-0000-000000000000");
    bk_err err;
    bk_err_clear(&err);
    double t0 = now_s();
    bk_status st = bk_engine_cpu.comm_connect(ctx, g_blobs, g_lens, 30.0, &err);
    double took = now_s() - t0;
    assert_int_equal(st, BK_ERR_UNSUPPORTED);
    assert_true(took < 5.0); /* refused at once, not after the 30 s wait for segments */
    assert_non_null(strstr(err.msg, "rank 1 on elsewhere boot 0000"));
    assert_non_null(strstr(err.msg, "one host"));
    char node[BK_NODE_LEN];
    bk_node_self(node);
    assert_non_null(strstr(err.msg, node));
    bk_engine_cpu.close(ctx);
    assert_no_segment("H");
}

/* The same seen from rank 1, its lane's rank 0 elsewhere: refused at once too. */
static void test_lane_rank0_elsewhere_refused(void **state)
{
    (void)state;
    bk_backend_ctx *ctx = lane_rank(1, "E");
    blob_of(0, "E", "elsewhere boot 00000000-0000-0000-0000-000000000000");
    bk_err err;
    bk_err_clear(&err);
    double t0 = now_s();
    bk_status st = bk_engine_cpu.comm_connect(ctx, g_blobs, g_lens, 30.0, &err);
    double took = now_s() - t0;
    assert_int_equal(st, BK_ERR_UNSUPPORTED);
    assert_true(took < 5.0);
    assert_non_null(strstr(err.msg, "rank 1 is on "));
    assert_non_null(strstr(err.msg, "rank 0 on elsewhere boot 0000"));
    bk_engine_cpu.close(ctx);
    char name[BK_SHM_NAME_LEN], path[BK_SHM_NAME_LEN + 16];
    bk_shm_name(RUN, "E", 1, name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_malformed_blobs_refused(void **state)
{
    (void)state;
    char node[BK_NODE_LEN];
    bk_node_self(node);
    char long_node[BK_NODE_LEN + 1];
    memset(long_node, 'n', BK_NODE_LEN);
    long_node[BK_NODE_LEN] = '\0';
    for (int k = 0; k < 7; k++) {
        bk_backend_ctx *ctx = lane_rank(0, "M");
        peer_blob("M", node);
        switch (k) {
        case 0: g_lens[1] = 0; break;                              /* empty */
        case 1: g_lens[1] = strlen((char *)g_blobs[1]) + 1; break; /* name only (old blob) */
        case 2: g_lens[1] -= 1; break;                             /* node not terminated */
        case 3: g_blobs[1][0] = '\0'; break;                       /* empty name */
        case 4: g_blobs[1][g_lens[1] - 3] = '\0'; break;           /* a NUL inside the node */
        case 5: /* a name of BK_SHM_NAME_LEN characters: no room for its NUL */
            memset(g_blobs[1], 'x', BK_SHM_NAME_LEN);
            g_blobs[1][BK_SHM_NAME_LEN] = '\0';
            memcpy(g_blobs[1] + BK_SHM_NAME_LEN + 1, node, strlen(node) + 1);
            g_lens[1] = BK_SHM_NAME_LEN + 1 + strlen(node) + 1;
            break;
        case 6: peer_blob("M", long_node); break; /* a node of BK_NODE_LEN characters */
        }
        bk_err err;
        bk_err_clear(&err);
        bk_status st = bk_engine_cpu.comm_connect(ctx, g_blobs, g_lens, 30.0, &err);
        if (st != BK_ERR_PEER || !strstr(err.msg, "rank 1 sent a malformed blob"))
            fail_msg("case %d: status %d, \"%s\"", k, (int)st, err.msg);
        bk_engine_cpu.close(ctx);
        assert_no_segment("M");
    }
}

int main(void)
{
    snprintf(RUN, sizeof RUN, "test-cpu-comm-%d", (int)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_our_blob_names_our_node),
        cmocka_unit_test(test_lane_over_two_hosts_refused),
        cmocka_unit_test(test_lane_rank0_elsewhere_refused),
        cmocka_unit_test(test_malformed_blobs_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
