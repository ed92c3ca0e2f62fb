/* topo_lanes.c - the lane finder (baseline + disjoint candidate); a lane's signature is
 * topo_lane_sig.c.
 *
 * Heuristic (docs/topology.md): never enumerate all subsets. Candidate lanes are
 * "natural" ones: consecutive groups of ranks in locality order (host, NUMA
 * node, GPU index), aligned at multiples of the lane size, globally and inside
 * each host; windows starting at each host boundary for lanes larger than a
 * host; and per host one greedy lane per seed rank (the seed plus its nearest
 * peers). Lanes are grouped by signature; the best group (fewest hosts,
 * strongest weakest link, fewest NUMA nodes) holding two disjoint lanes gives
 * the pair, preferring two lanes on one host. */
#include "topology/topo_lanes_priv.h"

/* Messages and names live in fixed buffers; a cut-off message is acceptable. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LANES 50000

/* ---------------------------------------------------------------- the finder */

typedef struct {
    lctx c;
    int *order;      /* ranks in locality order */
    lane *lanes;
    int nlanes;
    int *pool;       /* rank storage of the lanes */
    int cap;         /* lanes that fit */
} finder;

static const lctx *ord_ctx;
static int cmp_locality(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    const bk_rank_place *p = &ord_ctx->pl[x], *q = &ord_ctx->pl[y];
    if (p->host != q->host)
        return p->host < q->host ? -1 : 1;
    int nx = bk__lane_numa_of(ord_ctx, x), ny = bk__lane_numa_of(ord_ctx, y);
    if (nx != ny)
        return nx < ny ? -1 : 1;
    if (p->gpu != q->gpu)
        return p->gpu < q->gpu ? -1 : 1;
    return (x > y) - (x < y);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Add a lane (copied, sorted, de-duplicated). */
static bk_status add_lane(finder *f, const int *ranks, bk_err *err)
{
    int L = f->c.size;
    if (f->nlanes >= f->cap)
        return BK_OK;
    int *dst = f->pool + (size_t)f->nlanes * (size_t)L;
    memcpy(dst, ranks, (size_t)L * sizeof(int));
    qsort(dst, (size_t)L, sizeof(int), cmp_int);
    uint64_t set = bk_fnv1a64(dst, (size_t)L * sizeof(int));
    for (int i = f->nlanes - 1; i >= 0 && i >= f->nlanes - 256; i--)
        if (f->lanes[i].set == set && !memcmp(f->lanes[i].ranks, dst, (size_t)L * sizeof(int)))
            return BK_OK;
    lane *ln = &f->lanes[f->nlanes];
    memset(ln, 0, sizeof *ln);
    ln->ranks = dst;
    ln->set = set;
    bk_status st = bk__lane_sig(&f->c, ln, err);
    if (st == BK_OK)
        f->nlanes++;
    return st;
}

/* The natural lanes (see the file comment). */
static bk_status enumerate(finder *f, bk_err *err)
{
    bk_status st = BK_OK;
    int L = f->c.size, n = f->c.nranks;
    int *tmp = malloc((size_t)L * sizeof(int));
    unsigned char *taken = calloc((size_t)n, 1); /* a greedy lane's ranks so far */
    if (!tmp || !taken) {
        free(tmp);
        free(taken);
        return BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
    }
    for (int s = 0; s + L <= n; s += L) /* aligned windows, global locality order */
        BK_TRY(add_lane(f, f->order + s, err));
    for (int s = 0; s + L <= n; s += L) /* aligned windows in rank order */ {
        for (int i = 0; i < L; i++)
            tmp[i] = s + i;
        BK_TRY(add_lane(f, tmp, err));
    }
    for (int a = 0; a < n;) { /* per host: aligned windows, host-start windows, greedy seeds */
        int b = a;
        while (b < n && f->c.pl[f->order[b]].host == f->c.pl[f->order[a]].host)
            b++;
        if (b - a >= L) {
            for (int s = a; s + L <= b; s += L)
                BK_TRY(add_lane(f, f->order + s, err));
            for (int seed = a; seed < b && seed < a + 64; seed++) {
                int used = 1;
                tmp[0] = f->order[seed];
                taken[tmp[0]] = 1;
                while (used < L) {
                    int best = -1;
                    uint16_t bc = 0;
                    for (int k = a; k < b; k++) {
                        int r = f->order[k];
                        if (taken[r])
                            continue;
                        uint16_t code = bk__lane_pair_code(&f->c, tmp[0], r);
                        if (best < 0 || code > bc) {
                            best = r;
                            bc = code;
                        }
                    }
                    tmp[used++] = best;
                    taken[best] = 1;
                }
                for (int u = 0; u < used; u++)
                    taken[tmp[u]] = 0;
                BK_TRY(add_lane(f, tmp, err));
            }
        } else if (a + L <= n) {
            BK_TRY(add_lane(f, f->order + a, err)); /* a lane larger than what is left here */
        }
        a = b;
    }
out:
    free(tmp);
    free(taken);
    return st;
}

static int disjoint(const lane *a, const lane *b, int L)
{
    int i = 0, j = 0; /* both sorted */
    while (i < L && j < L) {
        if (a->ranks[i] == b->ranks[j])
            return 0;
        if (a->ranks[i] < b->ranks[j])
            i++;
        else
            j++;
    }
    return 1;
}

static const finder *grp_f;
static int cmp_lane(const void *a, const void *b)
{
    const lane *x = &grp_f->lanes[*(const int *)a], *y = &grp_f->lanes[*(const int *)b];
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    int c = strcmp(x->sig, y->sig);
    if (c)
        return c;
    return (x->ranks[0] > y->ranks[0]) - (x->ranks[0] < y->ranks[0]);
}

static void put_lane(int *dst, const lane *ln, int L)
{
    memcpy(dst, ln->ranks, (size_t)L * sizeof(int));
}

static int lane_host(const finder *f, const lane *ln)
{
    return ln->hosts == 1 ? f->c.pl[ln->ranks[0]].host : -1;
}

static int hist_distance(const lane *a, const lane *b)
{
    int d = 100 * abs(a->hosts - b->hosts) + 10 * abs(a->numa - b->numa);
    for (int k = 0; k < 16; k++)
        d += abs(a->hist[k] - b->hist[k]);
    return d + (strcmp(a->sig, b->sig) != 0);
}

static void list_ranks(char *buf, size_t n, const int *r, int L)
{
    size_t off = 0;
    off += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < L && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%d", i ? "," : "", r[i]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
}

/* Choose among the sorted lanes; fills out (see topology.h). */
static bk_status choose(finder *f, const int *idx, bk_lane_policy policy, bk_lane_pick *out,
                        bk_err *err)
{
    int L = f->c.size, n = f->nlanes, ba = -1, bb = -1;
    const char *unit = f->c.gpu ? (L == 1 ? "GPU" : "GPUs") : (L == 1 ? "CPU slot" : "CPU slots");
    char ra[512], rb[512];
    if (policy == BK_LANES_SHARED) {
        ba = bb = idx[0];
    } else {
        /* groups of equal signature, best score first: first group with a disjoint pair */
        for (int g = 0; g < n && ba < 0;) {
            int e = g;
            while (e < n && !strcmp(f->lanes[idx[e]].sig, f->lanes[idx[g]].sig))
                e++;
            for (int i = g; i < e && ba < 0 && i < g + 512; i++) {
                const lane *a = &f->lanes[idx[i]];
                int any = -1;
                for (int j = g; j < e; j++) {
                    const lane *b = &f->lanes[idx[j]];
                    if (j == i || !disjoint(a, b, L))
                        continue;
                    if (any < 0)
                        any = j;
                    if (lane_host(f, a) >= 0 && lane_host(f, a) == lane_host(f, b)) {
                        any = j;
                        break;
                    }
                }
                if (any >= 0) {
                    ba = idx[i];
                    bb = idx[any];
                }
            }
            g = e;
        }
    }
    /* other signatures, best first */
    for (int i = 0; i < n && out->nalts < BK_LANE_ALTS; i++) {
        const lane *ln = &f->lanes[idx[i]];
        if (ba >= 0 && !strcmp(ln->sig, f->lanes[ba].sig))
            continue;
        if (i > 0 && !strcmp(ln->sig, f->lanes[idx[i - 1]].sig)) {
            out->alts[out->nalts - 1].count++;
            continue;
        }
        bk_lane_alt *a = &out->alts[out->nalts++];
        a->size = L;
        put_lane(a->ranks, ln, L);
        bk_strlcpy(a->signature, ln->sig, sizeof a->signature);
        a->count = 1;
    }
    if (ba >= 0) {
        const lane *a = &f->lanes[ba], *b = &f->lanes[bb];
        put_lane(out->baseline, a, L);
        put_lane(out->candidate, b, L);
        bk_strlcpy(out->baseline_sig, a->sig, sizeof out->baseline_sig);
        bk_strlcpy(out->candidate_sig, b->sig, sizeof out->candidate_sig);
        out->equal = 1;
        list_ranks(ra, sizeof ra, out->baseline, L);
        list_ranks(rb, sizeof rb, out->candidate, L);
        if (policy == BK_LANES_SHARED)
            snprintf(out->why, sizeof out->why,
                     "policy shared: baseline and candidate both run on ranks %s (a rehearsal, "
                     "not a fair bracket)", ra);
        else
            snprintf(out->why, sizeof out->why,
                     "ranks %s and %s: the best of %d natural lanes of %d %s with an equal "
                     "signature (%d host%s per lane%s)",
                     ra, rb, n, L, unit, a->hosts, a->hosts > 1 ? "s" : "",
                     lane_host(f, a) >= 0 && lane_host(f, a) == lane_host(f, b)
                         ? ", both on one host"
                         : "");
        return BK_OK;
    }
    /* no equal pair: the closest disjoint pair among the best lanes */
    int best = -1, ci = -1, cj = -1, lim = n < 256 ? n : 256;
    for (int i = 0; i < lim; i++)
        for (int j = i + 1; j < lim; j++) {
            const lane *a = &f->lanes[idx[i]], *b = &f->lanes[idx[j]];
            if (!disjoint(a, b, L))
                continue;
            int d = hist_distance(a, b);
            if (best < 0 || d < best) {
                best = d;
                ci = idx[i];
                cj = idx[j];
            }
        }
    int nsig = 0;
    for (int i = 0; i < n; i++)
        nsig += i == 0 || strcmp(f->lanes[idx[i]].sig, f->lanes[idx[i - 1]].sig);
    if (ci < 0) {
        snprintf(out->why, sizeof out->why,
                 "no two disjoint lanes of %d %s exist among %d natural lanes", L, unit, n);
        return BK_FAIL(err, BK_ERR_INPUT, "%s", out->why);
    }
    const lane *a = &f->lanes[ci], *b = &f->lanes[cj];
    put_lane(out->baseline, a, L);
    put_lane(out->candidate, b, L);
    bk_strlcpy(out->baseline_sig, a->sig, sizeof out->baseline_sig);
    bk_strlcpy(out->candidate_sig, b->sig, sizeof out->candidate_sig);
    list_ranks(ra, sizeof ra, out->baseline, L);
    list_ranks(rb, sizeof rb, out->candidate, L);
    snprintf(out->why, sizeof out->why,
             "no two disjoint lanes of %d %s with equal signatures among the %d natural lanes "
             "tried (%d distinct signatures; a heuristic, not every subset: docs/topology.md); "
             "closest pair: %s {%s} vs %s {%s}",
             L, unit, n, nsig, ra, a->sig, rb, b->sig);
    return BK_FAIL(err, BK_ERR_INPUT, "%s", out->why);
}

bk_status bk_lanes_choose(const bk_topo *t, int lane_size, int nranks,
                          const bk_rank_place *places, bk_lane_policy policy,
                          bk_lane_pick *out, bk_err *err)
{
    bk_status st = BK_OK;
    finder f = { .c = { .t = t, .pl = places, .nranks = nranks, .size = lane_size } };
    int *idx = NULL;
    memset(out, 0, sizeof *out);
    out->size = lane_size;
    out->shared = policy == BK_LANES_SHARED;
    if (lane_size < 1 || lane_size > BK_LANE_MAX)
        return BK_FAIL(err, BK_ERR_INPUT, "lane size %d: must be in [1, %d]", lane_size,
                       BK_LANE_MAX);
    if (nranks < 1 || !places)
        return BK_FAIL(err, BK_ERR_INPUT, "lanes: no ranks to place");
    f.c.gpu = places[0].gpu >= 0;
    out->gpu = f.c.gpu;
    const char *unit = f.c.gpu ? (lane_size == 1 ? "GPU" : "GPUs")
                               : (lane_size == 1 ? "CPU slot" : "CPU slots");
    for (int r = 0; r < nranks; r++) {
        const bk_rank_place *p = &places[r];
        if ((p->gpu >= 0) != f.c.gpu)
            return BK_FAIL(err, BK_ERR_INPUT,
                           "lanes: rank %d has %s but rank 0 has %s: mixed GPU and CPU ranks", r,
                           p->gpu >= 0 ? "a GPU" : "no GPU", f.c.gpu ? "one" : "none");
        if (f.c.gpu && (!t || p->host < 0 || p->host >= t->nhosts || p->gpu >= t->hosts[p->host].ngpus))
            return BK_FAIL(err, BK_ERR_INPUT, "lanes: rank %d sits on host %d GPU %d, which the "
                           "topology does not have", r, p->host, p->gpu);
        if (!f.c.gpu && p->host < 0)
            return BK_FAIL(err, BK_ERR_INPUT, "lanes: rank %d has no host", r);
    }
    if (f.c.gpu && policy != BK_LANES_SHARED) /* two ranks on one GPU */
        for (int h = 0; h < t->nhosts; h++) {
            int owner[BK_TOPO_MAX_GPUS];
            for (int g = 0; g < BK_TOPO_MAX_GPUS; g++)
                owner[g] = -1;
            for (int r = 0; r < nranks; r++) {
                if (places[r].host != h)
                    continue;
                int g = places[r].gpu;
                if (owner[g] >= 0)
                    return BK_FAIL(err, BK_ERR_INPUT,
                                   "ranks %d and %d are both bound to GPU %d (%s) of host %s: "
                                   "refused unless lanes.policy is \"shared\"",
                                   owner[g], r, g, t->hosts[h].gpus[g].bus_id,
                                   t->hosts[h].hostname);
                owner[g] = r;
            }
        }
    if (nranks < lane_size) {
        snprintf(out->why, sizeof out->why, "a lane of %d needs %d %s; only %d %s available",
                 lane_size, lane_size, unit, nranks, nranks == 1 ? "is" : "are");
        return BK_FAIL(err, BK_ERR_INPUT, "%s", out->why);
    }
    if (policy != BK_LANES_SHARED && nranks < 2 * lane_size) {
        snprintf(out->why, sizeof out->why,
                 "two disjoint lanes of %d need %d %s; only %d %s available (a rehearsal on "
                 "one lane: lanes.policy \"shared\" in a plan, --policy shared to bracket "
                 "lanes)",
                 lane_size, 2 * lane_size, f.c.gpu ? "GPUs" : "CPU slots", nranks,
                 nranks == 1 ? "is" : "are");
        return BK_FAIL(err, BK_ERR_INPUT, "%s", out->why);
    }
    /* enumerate() adds at most 2(n/L + 1) windows plus, per host of s ranks,
     * s/L + min(s, 64) + 1 lanes: 5n + 3 bounds it */
    f.cap = 5 * nranks + 3 < MAX_LANES ? 5 * nranks + 3 : MAX_LANES;
    BK_TRY(bk__lane_models(&f.c, err));
    f.c.memo = calloc(MEMO_SLOTS, sizeof(memo_slot));
    f.c.scratch = malloc((size_t)lane_size * (size_t)lane_size * sizeof(uint16_t));
    f.order = malloc((size_t)nranks * sizeof(int));
    f.lanes = calloc((size_t)f.cap, sizeof(lane));
    f.pool = malloc((size_t)f.cap * (size_t)lane_size * sizeof(int));
    if (!f.order || !f.lanes || !f.pool || !f.c.memo || !f.c.scratch) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
        goto out;
    }
    for (int r = 0; r < nranks; r++)
        f.order[r] = r;
    ord_ctx = &f.c;
    qsort(f.order, (size_t)nranks, sizeof(int), cmp_locality);
    BK_TRY(enumerate(&f, err));
    out->nlanes = f.nlanes;
    idx = malloc((size_t)f.nlanes * sizeof(int));
    if (!idx) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
        goto out;
    }
    for (int i = 0; i < f.nlanes; i++)
        idx[i] = i;
    grp_f = &f;
    qsort(idx, (size_t)f.nlanes, sizeof(int), cmp_lane);
    BK_TRY(choose(&f, idx, policy, out, err));
out:
    free(idx);
    free(f.order);
    free(f.lanes);
    free(f.pool);
    free(f.c.memo);
    free(f.c.scratch);
    free(f.c.model);
    return st;
}
