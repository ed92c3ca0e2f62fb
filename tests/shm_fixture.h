/* shm_fixture.h - what the cpu variant tests share (test_kernels_cpu.c, test_moe_cpu.c): one
 * lane rank's shared-memory segment, created and connected to its peers' as an engine's is. */
#ifndef BK_TEST_SHM_FIXTURE_H
#define BK_TEST_SHM_FIXTURE_H

#include "collectives/collectives.h"

#define SHM_FIXTURE_MAXW 4 /* lane ranks these tests run */

/* Rank `rank`'s segment of `bytes` in lane `rid` (arm "C") of `world` ranks, connected to its
 * peers' within timeout_s; NULL with *err set when either fails. */
static inline bk_shm *shm_lane_seg(const char *rid, int rank, int world, size_t bytes,
                                   double timeout_s, bk_err *err)
{
    char names[SHM_FIXTURE_MAXW][BK_SHM_NAME_LEN], mine[BK_SHM_NAME_LEN];
    const char *ptrs[SHM_FIXTURE_MAXW];
    bk_shm *shm = NULL;
    if (world < 1 || world > SHM_FIXTURE_MAXW) {
        BK_FAIL(err, BK_ERR_INPUT, "shm_lane_seg: world %d (1..%d)", world, SHM_FIXTURE_MAXW);
        return NULL;
    }
    for (int r = 0; r < world; r++) {
        bk_shm_name(rid, "C", r, names[r]);
        ptrs[r] = names[r];
    }
    if (bk_shm_create(rid, "C", rank, world, bytes, &shm, mine, err) != BK_OK)
        return NULL;
    if (bk_shm_connect(shm, ptrs, timeout_s, err) != BK_OK) {
        bk_shm_destroy(shm);
        return NULL;
    }
    return shm;
}

#endif
