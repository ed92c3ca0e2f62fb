/* test_topo_lane_reach.c - what a lane's members can reach of each other, from the topology:
 * one host (hostname + boot id, not the hostname alone) and CUDA peer access between its GPUs;
 * unknown access (no CUDA at probe time, GPUs the probing process could not see) is never
 * taken for a refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/topo_fixture.h"

static bk_rank_place *places_of(const bk_topo *t, int *n)
{
    bk_rank_place *pl = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_places_one_per_gpu(t, &pl, n, &err), BK_OK);
    return pl;
}

/* Peer access measured everywhere on host 0, except between GPUs x and y. */
static void measured(bk_topo_host *h, int x, int y)
{
    h->p2p_known = 1;
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++)
            h->p2p_access[i][j] = (int8_t)!((i == x && j == y) || (i == y && j == x));
}

static void test_nothing_known_is_ok(void **state)
{
    (void)state;
    bk_topo *t = load("pcie8_2s.json"); /* no "p2p" in the snapshot */
    int n = 0, a = -1, b = -1;
    bk_rank_place *pl = places_of(t, &n);
    const int lane[4] = { 2, 3, 4, 5 };
    assert_false(t->hosts[0].p2p_known);
    assert_int_equal(bk_lane_p2p_ok(t, pl, lane, 4, &a, &b, NULL, 0), 1);
    free(pl);
    bk_topo_free(t);
}

static void test_known_gap_refused(void **state)
{
    (void)state;
    bk_topo *t = load("pcie8_2s.json");
    int n = 0, a = -1, b = -1;
    char why[BK_WHY_LEN];
    bk_rank_place *pl = places_of(t, &n);
    measured(&t->hosts[0], 3, 4); /* the two sockets' nearest GPUs cannot reach each other */
    const int left[4] = { 0, 1, 2, 3 }, across[4] = { 2, 3, 4, 5 };
    assert_int_equal(bk_lane_p2p_ok(t, pl, left, 4, &a, &b, why, sizeof why), 1);
    assert_string_equal(why, "");
    assert_int_equal(bk_lane_p2p_ok(t, pl, across, 4, &a, &b, why, sizeof why), 0);
    assert_int_equal(a, 3);
    assert_int_equal(b, 4);
    assert_non_null(strstr(why, "0000:3e:00.0"));
    assert_non_null(strstr(why, "0000:88:00.0"));
    assert_non_null(strstr(why, "no CUDA peer access"));
    /* one way only is enough to refuse */
    t->hosts[0].p2p_access[3][4] = 1;
    assert_int_equal(bk_lane_p2p_ok(t, pl, across, 4, &a, &b, NULL, 0), 0);
    free(pl);
    bk_topo_free(t);
}

/* The prober saw one GPU (Slurm --gpus-per-task=1, a one-entry CUDA_VISIBLE_DEVICES): the
 * others have cuda_index -1 and access 0 written for them, which means "not asked". */
static void test_unseen_gpus_are_unknown(void **state)
{
    (void)state;
    bk_topo *t = load("pcie8_2s.json");
    bk_topo_host *h = &t->hosts[0];
    int n = 0, a = -1, b = -1;
    bk_rank_place *pl = places_of(t, &n);
    h->p2p_known = 1;
    memset(h->p2p_access, 0, sizeof h->p2p_access);
    for (int g = 0; g < h->ngpus; g++) {
        h->p2p_access[g][g] = 1;
        h->gpus[g].cuda_index = g == 0 ? 0 : -1;
    }
    const int lane[4] = { 0, 1, 2, 3 };
    assert_int_equal(bk_lane_p2p_ok(t, pl, lane, 4, &a, &b, NULL, 0), 1);
    /* two GPUs CUDA saw, access 0: known */
    h->gpus[1].cuda_index = 1;
    assert_int_equal(bk_lane_p2p_ok(t, pl, lane, 4, &a, &b, NULL, 0), 0);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    free(pl);
    bk_topo_free(t);
}

static void test_two_hosts(void **state)
{
    (void)state;
    bk_topo *t = load("cluster2x8_ib.json");
    int n = 0, a = -1, b = -1;
    char why[BK_WHY_LEN];
    bk_rank_place *pl = places_of(t, &n);
    assert_int_equal(n, 16);
    const int one[2] = { 6, 7 }, two[2] = { 7, 8 };
    assert_int_equal(bk_lane_one_host(pl, one, 2, &a, &b), 1);
    assert_int_equal(bk_lane_one_host(pl, two, 2, &a, &b), 0);
    assert_int_equal(a, 7);
    assert_int_equal(b, 8);
    a = b = -1;
    assert_int_equal(bk_lane_p2p_ok(t, pl, two, 2, &a, &b, why, sizeof why), 0);
    assert_int_equal(a, 7);
    assert_int_equal(b, 8);
    assert_non_null(strstr(why, "different hosts"));
    free(pl);
    bk_topo_free(t);
}

/* Two hosts with one hostname (containers, cloned images) are two hosts: the places say so,
 * whatever gethostname() returns on them. */
static void test_same_hostname_two_hosts(void **state)
{
    (void)state;
    bk_topo *t = load("cluster2x8_ib.json");
    int n = 0, a = -1, b = -1;
    snprintf(t->hosts[1].hostname, sizeof t->hosts[1].hostname, "%s", t->hosts[0].hostname);
    bk_rank_place *pl = places_of(t, &n);
    const int lane[4] = { 6, 7, 8, 9 };
    assert_int_equal(bk_lane_one_host(pl, lane, 4, &a, &b), 0);
    assert_int_equal(a, 6);
    assert_int_equal(b, 8);
    free(pl);
    bk_topo_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_known_is_ok),
        cmocka_unit_test(test_known_gap_refused),
        cmocka_unit_test(test_unseen_gpus_are_unknown),
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_same_hostname_two_hosts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
