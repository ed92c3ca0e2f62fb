/* topo_lane_reach.c - what a lane's members can reach of each other: one host (peer memory
 * is one host's) and CUDA peer access between its GPUs, from the topology alone, so that a
 * run refuses a lane its variants cannot use before any engine starts. */
#include "topology/topology.h"

#include <stdio.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

int bk_lane_one_host(const bk_rank_place *places, const int *ranks, int n, int *a, int *b)
{
    for (int i = 1; i < n; i++)
        if (places[ranks[i]].host != places[ranks[0]].host) {
            *a = ranks[0];
            *b = ranks[i];
            return 0;
        }
    return 1;
}

/* Peer access between GPUs gi and gj of host h: 1 yes, 0 known not, -1 unknown. */
static int access_of(const bk_topo_host *h, int gi, int gj)
{
    if (gi == gj)
        return 1; /* one GPU (a shared-lane rehearsal): its own memory */
    if (!h->p2p_known || gi < 0 || gj < 0 || gi >= h->ngpus || gj >= h->ngpus)
        return -1;
    /* a GPU the probing process's CUDA did not see has access 0 written for it: unknown */
    if (h->gpus[gi].cuda_index < 0 || h->gpus[gj].cuda_index < 0)
        return -1;
    return h->p2p_access[gi][gj] && h->p2p_access[gj][gi];
}

int bk_lane_p2p_ok(const bk_topo *t, const bk_rank_place *places, const int *ranks, int n,
                   int *a, int *b, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    if (!bk_lane_one_host(places, ranks, n, a, b)) {
        if (why && why_len)
            snprintf(why, why_len, "MPI ranks %d and %d are on different hosts", *a, *b);
        return 0;
    }
    if (!t || n < 2)
        return 1;
    const int host = places[ranks[0]].host;
    if (host < 0 || host >= t->nhosts)
        return 1;
    const bk_topo_host *h = &t->hosts[host];
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const int gi = places[ranks[i]].gpu, gj = places[ranks[j]].gpu;
            if (access_of(h, gi, gj) != 0)
                continue;
            *a = ranks[i];
            *b = ranks[j];
            if (why && why_len)
                snprintf(why, why_len, "MPI ranks %d and %d: GPU %d (%s) and GPU %d (%s) of "
                         "host %s have no CUDA peer access (cudaDeviceCanAccessPeer 0 at probe "
                         "time)", *a, *b, gi, h->gpus[gi].bus_id, gj, h->gpus[gj].bus_id,
                         h->hostname);
            return 0;
        }
    return 1;
}
