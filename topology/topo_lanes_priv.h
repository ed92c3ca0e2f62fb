/* topo_lanes_priv.h - what the lane files share (topo_lane_sig.c: a lane's signature,
 * score and summary; topo_lanes.c: the finder). Not a public header. */
#ifndef BK_TOPO_LANES_PRIV_H
#define BK_TOPO_LANES_PRIV_H

#include "topology/topology.h"

#define MEMO_SLOTS 4096 /* canonical forms remembered per lane search */

typedef struct {
    uint64_t raw;   /* hash of the lane's matrix and labels in lane order (0: empty) */
    uint64_t canon; /* its canonical hash */
    int exact;
} memo_slot;

typedef struct {
    const bk_topo *t;
    const bk_rank_place *pl;
    int nranks;
    int gpu;  /* 1: GPU lanes */
    int size; /* lane size */
    memo_slot *memo; /* NULL: no memo. The canonical form is a pure function of
                      * the ordered matrix, so lanes of a regular cluster that
                      * look alike in lane order share one search. */
    uint16_t *scratch; /* NULL or size x size codes, reused by every lane */
    uint8_t (*model)[BK_TOPO_MAX_GPUS]; /* NULL, or host x GPU: the GPU's model (its name)
                                         * as an index into the topology's distinct names */
    int nmodels;       /* distinct GPU names of the topology (1 or more with model) */
} lctx;

/* The GPU models of topology t into c->model and c->nmodels (GPU lanes only; nothing to do
 * for CPU lanes or a topology of one model, c->model then NULL); free with free(c->model).
 * A lane's members are labelled with their model, so two lanes of different GPUs never
 * have equal signatures. */
bk_status bk__lane_models(lctx *c, bk_err *err);

typedef struct {
    int *ranks;     /* size entries, ascending */
    uint64_t set;   /* hash of the rank set (dedup) */
    uint64_t score; /* smaller is better; a function of the signature */
    int hosts;
    char sig[BK_SIG_LEN];
    int hist[16];   /* pairs per class (summary and "closest" distance) */
    int numa;       /* NUMA spread */
} lane;

/* The NUMA node of rank r (its GPU's where it has one). */
int bk__lane_numa_of(const lctx *c, int r);
/* Pair code: (class << 9) | (nvlinks << 1) | same NUMA. Larger is nearer. */
uint16_t bk__lane_pair_code(const lctx *c, int a, int b);
/* Signature, score and summary of one lane. */
bk_status bk__lane_sig(const lctx *c, lane *ln, bk_err *err);

#endif
