/* test_lane_where.c - a lane's ranks by node and GPU: identical hosts repeat PCI bus ids, so
 * only the same node and the same bus id make a shared GPU; a lane over two nodes is seen as
 * such by every one of its ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collectives/collectives.h"

#define W 4

static char g_nodes[W][BK_NODE_LEN];
static char g_buses[W][BK_BUS_LEN];

static void put(int r, const char *node, const char *bus)
{
    snprintf(g_nodes[r], BK_NODE_LEN, "%s", node);
    snprintf(g_buses[r], BK_BUS_LEN, "%s", bus);
}

static bk_lane_where_t where(int world, int rank, int with_buses)
{
    bk_lane_where_t w;
    bk_lane_where((const char(*)[BK_NODE_LEN])g_nodes,
                  with_buses ? (const char(*)[BK_BUS_LEN])g_buses : NULL, world, rank, &w);
    return w;
}

static void test_one_node_distinct_gpus(void **state)
{
    (void)state;
    for (int r = 0; r < W; r++) {
        char bus[BK_BUS_LEN];
        snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + r);
        put(r, "gpu01 boot b1", bus);
    }
    for (int r = 0; r < W; r++) {
        bk_lane_where_t w = where(W, r, 1);
        assert_int_equal(w.other, -1);
        assert_int_equal(w.pair_a, -1);
        assert_int_equal(w.pair_b, -1);
    }
}

/* Two identical hosts: ranks 0 and 2 (and 1 and 3) have the same bus id on different
 * nodes. That is not a shared GPU; every rank sees a peer on the other node. */
static void test_two_identical_hosts(void **state)
{
    (void)state;
    put(0, "gpu01 boot b1", "00000000:18:00.0");
    put(1, "gpu01 boot b1", "00000000:2A:00.0");
    put(2, "gpu02 boot b2", "00000000:18:00.0");
    put(3, "gpu02 boot b2", "00000000:2A:00.0");
    const int want_other[W] = {2, 2, 0, 0};
    for (int r = 0; r < W; r++) {
        bk_lane_where_t w = where(W, r, 1);
        assert_int_equal(w.other, want_other[r]);
        assert_int_equal(w.pair_a, -1);
    }
    /* the first two ranks alone are on one node */
    assert_int_equal(where(2, 0, 1).other, -1);
}

static void test_shared_gpu(void **state)
{
    (void)state;
    put(0, "gpu01 boot b1", "00000000:18:00.0");
    put(1, "gpu01 boot b1", "00000000:2A:00.0");
    put(2, "gpu01 boot b1", "00000000:2A:00.0");
    put(3, "gpu01 boot b1", "00000000:18:00.0");
    bk_lane_where_t w = where(W, 3, 1);
    assert_int_equal(w.other, -1);
    assert_int_equal(w.pair_a, 1); /* the first pair found going up the ranks: (1, 2) */
    assert_int_equal(w.pair_b, 2);
    w = where(W, 0, 0); /* no bus ids: no pair asked for */
    assert_int_equal(w.pair_a, -1);
    assert_int_equal(w.pair_b, -1);
}

/* Same hostname, another boot id: another node (a host that rebooted, or two containers
 * told apart by the kernel they run on). */
static void test_boot_id_tells_nodes_apart(void **state)
{
    (void)state;
    put(0, "gpu01 boot b1", "00000000:18:00.0");
    put(1, "gpu01 boot b9", "00000000:18:00.0");
    assert_int_equal(where(2, 1, 1).other, 0);
    assert_int_equal(where(2, 1, 1).pair_a, -1);
}

static void test_node_self(void **state)
{
    (void)state;
    char node[BK_NODE_LEN], again[BK_NODE_LEN], host[256] = "";
    bk_node_self(node);
    bk_node_self(again);
    assert_string_equal(node, again);
    assert_int_equal(gethostname(host, sizeof host - 1), 0);
    assert_memory_equal(node, host, strlen(host));
    if (access("/proc/sys/kernel/random/boot_id", R_OK) == 0)
        assert_non_null(strstr(node, " boot "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node_distinct_gpus),
        cmocka_unit_test(test_two_identical_hosts),
        cmocka_unit_test(test_shared_gpu),
        cmocka_unit_test(test_boot_id_tells_nodes_apart),
        cmocka_unit_test(test_node_self),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
