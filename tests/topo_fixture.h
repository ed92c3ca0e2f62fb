/* topo_fixture.h - what the lane tests share (test_topo_lanes.c, test_topo_lane_reach.c,
 * test_topo_lane_rules.c): a fixture topology from tests/fixtures/topo, and lanes chosen
 * with one rank per GPU. Include after cmocka.h. */
#ifndef BK_TEST_TOPO_FIXTURE_H
#define BK_TEST_TOPO_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "topology/topology.h"

/* tests/fixtures/topo/NAME, loaded or the test failed naming why. */
static inline bk_topo *load(const char *name)
{
    char path[1024];
    bk_err err = { 0 };
    bk_topo *t = NULL;
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/%s", BK_SOURCE_DIR, name);
    if (bk_topo_load(path, &t, &err) != BK_OK)
        fail_msg("%s: %s", path, err.msg);
    return t;
}

/* Choose lanes of `tp` with one rank per GPU; returns the status. */
static inline bk_status pick(const bk_topo *t, int tp, bk_lane_policy pol,
                               bk_lane_pick *out, bk_err *err)
{
    bk_rank_place *pl = NULL;
    int n = 0;
    assert_int_equal(bk_places_one_per_gpu(t, &pl, &n, err), BK_OK);
    bk_status st = bk_lanes_choose(t, tp, n, pl, pol, out, err);
    free(pl);
    return st;
}

#endif
