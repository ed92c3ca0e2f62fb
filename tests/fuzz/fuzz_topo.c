/* fuzz_topo.c - libFuzzer: any text as a bracket.topology/1 snapshot (bk_topo_parse) and as
 * one host of a gathered topology (bk_topo_host_parse). Neither may crash, read out of
 * bounds or leak (ASan, UBSan); a refusal names what is wrong; an accepted snapshot's
 * canonical text (bk_topo_dump) parses again to the same canonical text and digest, and on
 * it (one rank per GPU, at most 64) the lane finder answers each lane size 1, 2, 4 and 8
 * either with two disjoint lanes of that size and equal signatures, over ranks that exist,
 * or with a reason. Seeds: tests/fixtures/topo/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "topology/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The lane finder on an accepted snapshot, one rank per GPU. */
static void lanes(const bk_topo *t)
{
    bk_rank_place *places = NULL;
    int n = 0;
    bk_err err = { 0 };
    if (bk_places_one_per_gpu(t, &places, &n, &err) != BK_OK || n > 64) {
        free(places);
        return;
    }
    static bk_lane_pick pick;
    for (int size = 1; size <= 8; size *= 2) {
        bk_err_clear(&err);
        memset(&pick, 0, sizeof pick);
        if (bk_lanes_choose(t, size, n, places, BK_LANES_DISJOINT, &pick, &err) != BK_OK) {
            if (!err.msg[0]) {
                fprintf(stderr, "no lanes of %d, and no reason\n", size);
                abort();
            }
            continue;
        }
        char used[64] = { 0 };
        if (pick.size != size || !pick.equal || pick.shared ||
            strcmp(pick.baseline_sig, pick.candidate_sig) != 0) {
            fprintf(stderr, "lanes of %d: size %d equal %d shared %d, %s vs %s\n", size,
                    pick.size, pick.equal, pick.shared, pick.baseline_sig, pick.candidate_sig);
            abort();
        }
        for (int i = 0; i < 2 * size; i++) {
            const int r = i < size ? pick.baseline[i] : pick.candidate[i - size];
            if (r < 0 || r >= n || used[r]++) {
                fprintf(stderr, "lanes of %d: rank %d out of range or in both lanes\n", size, r);
                abort();
            }
        }
    }
    free(places);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_parse(text, "fuzz.json", &t, &err) == BK_OK) {
        fuzz_canon_stable(t);
        lanes(t);
        bk_topo_free(t);
    } else if (!err.msg[0]) {
        fprintf(stderr, "a snapshot refused without a reason\n");
        abort();
    }
    static bk_topo_host h; /* owns nothing (fixed arrays) */
    bk_err_clear(&err);
    if (bk_topo_host_parse(text, "host.json", &h, &err) != BK_OK && !err.msg[0]) {
        fprintf(stderr, "a host refused without a reason\n");
        abort();
    }
    free(text);
    return 0;
}
