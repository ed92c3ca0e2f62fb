/* lane_where.c - which ranks of a lane share a host (peer memory needs one) and which share
 * a GPU (NCCL refuses that): from the node and bus id every rank's blob carries. */
#include <stdio.h>
#include <string.h>

#include "collectives/collectives.h"
#include "topology/topology.h"

void bk_node_self(char node[BK_NODE_LEN])
{
    char host[128], boot[64];
    bk_host_identity(host, sizeof host, boot, sizeof boot);
    snprintf(node, BK_NODE_LEN, "%s%s%s", host, boot[0] ? " boot " : "", boot);
}

void bk_lane_where(const char (*nodes)[BK_NODE_LEN], const char (*buses)[BK_BUS_LEN],
                   int world, int rank, bk_lane_where_t *out)
{
    out->other = out->pair_a = out->pair_b = -1;
    for (int r = 0; r < world; r++) {
        if (out->other < 0 && strcmp(nodes[r], nodes[rank]) != 0)
            out->other = r;
        for (int q = 0; buses && out->pair_a < 0 && q < r; q++)
            if (strcmp(nodes[q], nodes[r]) == 0 && strcmp(buses[q], buses[r]) == 0) {
                out->pair_a = q;
                out->pair_b = r;
            }
    }
}
