/* test_topo_lane_rules.c - the lane finder's rules (topology/topo_lanes.c,
 * topo_lane_sig.c) on small synthetic layouts where one rule alone decides the pick: which
 * group wins (fewest hosts, then the strongest weakest link), which natural lanes exist,
 * the closest pair when none is equal, a GPU the topology lacks, and the canonical-form
 * memo. Lane choice on the saved fixtures is test_topo_lanes.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/topo_fixture.h"

/* A topology of hosts with ngpus[h] GPUs, every GPU on NUMA node 0 with no NIC, and
 * every link between two GPUs of a host NODE (set others with set_link()). */
static bk_topo *synth(int nhosts, const int *ngpus)
{
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_new(nhosts, &t, &err), BK_OK);
    for (int h = 0; h < nhosts; h++) {
        bk_topo_host *x = &t->hosts[h];
        snprintf(x->hostname, sizeof x->hostname, "node%02d", h);
        snprintf(x->boot_id, sizeof x->boot_id, "boot-%02d", h);
        x->nnuma = 2;
        x->ngpus = ngpus[h];
        for (int g = 0; g < x->ngpus; g++) {
            snprintf(x->gpus[g].bus_id, sizeof x->gpus[g].bus_id, "0000:%02x:00.0", 16 + g);
            x->gpus[g].numa = 0;
            x->gpus[g].nic = -1;
            x->gpus[g].cuda_index = g;
            for (int k = 0; k < x->ngpus; k++)
                x->links[g][k] = (bk_link){ (uint8_t)(g == k ? BK_LINK_SELF : BK_LINK_NODE), 0 };
        }
    }
    return t;
}

static void set_link(bk_topo *t, int h, int a, int b, bk_link_class cls, int nvlinks)
{
    bk_link l = { (uint8_t)cls, (uint8_t)nvlinks };
    t->hosts[h].links[a][b] = t->hosts[h].links[b][a] = l;
}

static void expect_lanes(const bk_lane_pick *p, const int *base, const int *cand)
{
    for (int i = 0; i < p->size; i++)
        if (p->baseline[i] != base[i] || p->candidate[i] != cand[i])
            fail_msg("lanes %d.. and %d.., expected %d.. and %d.. (%s)", p->baseline[0],
                     p->candidate[0], base[0], cand[0], p->why);
}

/* The score ranks a lane by its weakest NVLink: of one box's quads, two with NV4 pairs but
 * one NV1 pair each, and two with all NV2 pairs, the NV2 quads win (NV2 > NV1), though the
 * others' strongest links are stronger. */
static void test_weakest_nvlink_ranks(void **state)
{
    (void)state;
    const int ngpus[] = { 16 };
    bk_topo *t = synth(1, ngpus);
    for (int q = 0; q < 4; q++)
        for (int a = 4 * q; a < 4 * q + 4; a++)
            for (int b = a + 1; b < 4 * q + 4; b++)
                set_link(t, 0, a, b, BK_LINK_NV, q < 2 ? 4 : 2);
    set_link(t, 0, 0, 1, BK_LINK_NV, 1);
    set_link(t, 0, 4, 5, BK_LINK_NV, 1);
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    if (pick(t, 4, BK_LANES_DISJOINT, p, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    static const int b[] = { 8, 9, 10, 11 }, c[] = { 12, 13, 14, 15 };
    expect_lanes(p, b, c);
    assert_true(p->equal);
    assert_int_equal(strncmp(p->baseline_sig, "g4 h1 n1 NV2x6 ", 15), 0);
    assert_int_equal(p->nalts, 1);
    assert_int_equal(strncmp(p->alts[0].signature, "g4 h1 n1 NV4x5 NV1x1 ", 21), 0);
    free(p);
    bk_topo_free(t);
}

/* The host count leads the score: hosts 0-3 hold 2 GPUs on two NUMA nodes (2-host lanes
 * over 4 NUMA nodes), hosts 4-9 2, 1, 1, 2, 1, 1 GPUs on one node (3-host lanes over 3
 * nodes). Fewest hosts wins over fewest NUMA nodes. */
static void test_fewest_hosts_first(void **state)
{
    (void)state;
    const int ngpus[] = { 2, 2, 2, 2, 2, 1, 1, 2, 1, 1 };
    bk_topo *t = synth(10, ngpus);
    for (int h = 0; h < 4; h++) {
        t->hosts[h].gpus[1].numa = 1;
        set_link(t, h, 0, 1, BK_LINK_SYS, 0);
    }
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    if (pick(t, 4, BK_LANES_DISJOINT, p, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    static const int b[] = { 0, 1, 2, 3 }, c[] = { 4, 5, 6, 7 };
    expect_lanes(p, b, c);
    assert_int_equal(strncmp(p->baseline_sig, "g4 h2 n4 ", 9), 0);
    assert_non_null(strstr(p->why, "(2 hosts per lane)"));
    free(p);
    bk_topo_free(t);
}

/* CPU slots on `nhosts` hosts (t names the hosts; CPU lanes read only places). */
static bk_status pick_cpus(int nhosts, int n, const int *host, const int *numa, int lane,
                           bk_lane_pick *p, bk_err *err)
{
    bk_rank_place pl[64];
    bk_topo *t = NULL;
    assert_true(n <= 64);
    assert_int_equal(bk_topo_new(nhosts, &t, err), BK_OK);
    for (int r = 0; r < n; r++)
        pl[r] = (bk_rank_place){ .host = host[r], .gpu = -1, .numa = numa[r] };
    bk_status st = bk_lanes_choose(t, lane, n, pl, BK_LANES_DISJOINT, p, err);
    bk_topo_free(t);
    return st;
}

/* The last aligned window in locality order is a natural lane too. Four hosts of 3 slots,
 * lanes of 4, ranks numbered across the hosts (so rank-order windows span 4 hosts): in
 * locality order the windows are {h0 x3, h1}, {h1 x2, h2 x2}, {h2, h3 x3}; the first and
 * the last are equal (3 slots on one node + 1), and no other window starting at a host
 * gives that shape. */
static void test_last_locality_window(void **state)
{
    (void)state;
    static const int host[12] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 };
    static const int numa[12] = { 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0 };
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    if (pick_cpus(4, 12, host, numa, 4, p, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    static const int b[] = { 0, 1, 4, 8 }, c[] = { 3, 7, 10, 11 };
    expect_lanes(p, b, c);
    assert_true(p->equal);
    /* 3 windows in locality order, 3 in rank order, 2 starting at hosts 1 and 2 */
    assert_int_equal(p->nlanes, 8);
    assert_non_null(strstr(p->why, "the best of 8 natural lanes"));
    assert_non_null(strstr(p->why, "(2 hosts per lane)"));
    free(p);
}

/* No two equal lanes: the closest pair weighs a difference in host count above one in
 * NUMA spread. Lanes of 2: {0,4} on one node of host 0, {2,3} on two nodes of host 1,
 * {0,1} over hosts 0 and 2. {2,3} and {0,1} differ in hosts; {0,4} and {2,3} only in NUMA
 * spread and link class, and are the closest. */
static void test_closest_pair_weighs_hosts(void **state)
{
    (void)state;
    static const int host[5] = { 0, 2, 1, 1, 0 }, numa[5] = { 0, 0, 0, 1, 0 };
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    assert_int_equal(pick_cpus(3, 5, host, numa, 2, p, &err), BK_ERR_INPUT);
    assert_false(p->equal);
    assert_int_equal(p->nlanes, 3);
    static const int b[] = { 0, 4 }, c[] = { 2, 3 };
    expect_lanes(p, b, c);
    assert_non_null(strstr(err.msg, "closest pair: [0,4] {c2 h1 n1 NODEx1 "));
    assert_non_null(strstr(err.msg, " vs [2,3] {c2 h1 n2 SYSx1 "));
    free(p);
}

/* A rank bound to GPU index ngpus (one past the host's last) is refused, not read. */
static void test_gpu_past_the_host(void **state)
{
    (void)state;
    const int ngpus[] = { 4 };
    bk_topo *t = synth(1, ngpus);
    bk_rank_place pl[2] = { { 0, 0, 0 }, { 0, 4, 0 } };
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    assert_int_equal(bk_lanes_choose(t, 1, 2, pl, BK_LANES_DISJOINT, p, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "rank 1 sits on host 0 GPU 4, which the topology does not "
                                    "have"));
    bk_err e2 = { 0 };
    pl[1].gpu = 3;
    assert_int_equal(bk_lanes_choose(t, 1, 2, pl, BK_LANES_DISJOINT, p, &e2), BK_OK);
    free(p);
    bk_topo_free(t);
}

/* The memo of canonical forms within one search answers only for the very matrix it saw:
 * on boxes of 64 GPUs with random links, each lane the finder reports (the pair and the
 * best of the other signatures) has the signature it has alone. Hundreds of distinct lane
 * matrices share the memo's 4096 slots, so slots collide: a memo that answered from any
 * occupied slot reports a wrong hash for a shown lane in 18 of these 200 searches. */
static void test_memo_answers_its_own_matrix(void **state)
{
    (void)state;
    static const bk_link_class cls[] = { BK_LINK_SYS, BK_LINK_NODE, BK_LINK_PHB, BK_LINK_PXB,
                                         BK_LINK_PIX, BK_LINK_NV };
    const int ngpus[] = { 64 };
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_rank_place *pl = NULL;
    uint32_t s = 2024;
    int n = 0, checked = 0, bad = 0;
    assert_non_null(p);
    for (int trial = 0; trial < 200; trial++) {
        bk_topo *t = synth(1, ngpus);
        bk_err err = { 0 };
        for (int a = 0; a < 64; a++) {
            t->hosts[0].gpus[a].numa = a / 32;
            for (int b = a + 1; b < 64; b++) {
                s = s * 1103515245u + 12345u;
                int k = (int)((s >> 16) % 6u);
                set_link(t, 0, a, b, cls[k], cls[k] == BK_LINK_NV ? 1 + (int)((s >> 8) % 4u) : 0);
            }
        }
        assert_int_equal(bk_places_one_per_gpu(t, &pl, &n, &err), BK_OK);
        (void)bk_lanes_choose(t, 8, n, pl, BK_LANES_DISJOINT, p, &err);
        const int *lanes[2 + BK_LANE_ALTS];
        const char *sigs[2 + BK_LANE_ALTS];
        int nl = 0;
        if (p->baseline_sig[0]) {
            lanes[nl] = p->baseline;
            sigs[nl++] = p->baseline_sig;
            lanes[nl] = p->candidate;
            sigs[nl++] = p->candidate_sig;
        }
        for (int i = 0; i < p->nalts; i++) {
            lanes[nl] = p->alts[i].ranks;
            sigs[nl++] = p->alts[i].signature;
        }
        for (int i = 0; i < nl; i++) {
            char alone[BK_SIG_LEN];
            bk_err e2 = { 0 };
            assert_int_equal(bk_lane_signature(t, pl, lanes[i], 8, alone, sizeof alone, &e2),
                             BK_OK);
            if (strcmp(alone, sigs[i])) {
                print_message("trial %d: lane %d..: \"%s\" in the search, \"%s\" alone\n", trial,
                              lanes[i][0], sigs[i], alone);
                bad++;
            }
            checked++;
        }
        free(pl);
        pl = NULL;
        bk_topo_free(t);
    }
    assert_true(checked >= 200 * BK_LANE_ALTS);
    assert_int_equal(bad, 0);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weakest_nvlink_ranks),
        cmocka_unit_test(test_fewest_hosts_first),
        cmocka_unit_test(test_last_locality_window),
        cmocka_unit_test(test_closest_pair_weighs_hosts),
        cmocka_unit_test(test_gpu_past_the_host),
        cmocka_unit_test(test_memo_answers_its_own_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
