/* topo_lane_sig.c - a lane's signature (the canonical form of its pair matrix and member
 * labels, topo_canon.c), its score and its summary; the finder is topo_lanes.c. */
#include "topology/topo_lanes_priv.h"

/* Messages and names live in fixed buffers; a cut-off message is acceptable. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bk__lane_numa_of(const lctx *c, int r)
{
    const bk_rank_place *p = &c->pl[r];
    if (c->gpu && c->t && p->gpu >= 0) {
        int n = c->t->hosts[p->host].gpus[p->gpu].numa;
        if (n >= 0)
            return n;
    }
    return p->numa;
}

/* Pair code: (class << 9) | (nvlinks << 1) | same NUMA. Larger is nearer. */
uint16_t bk__lane_pair_code(const lctx *c, int a, int b)
{
    const bk_rank_place *pa = &c->pl[a], *pb = &c->pl[b];
    if (pa->host != pb->host)
        return (uint16_t)(BK_LINK_NET << 9);
    int same = bk__lane_numa_of(c, a) == bk__lane_numa_of(c, b);
    if (!c->gpu)
        return (uint16_t)(((same ? BK_LINK_NODE : BK_LINK_SYS) << 9) | same);
    if (pa->gpu == pb->gpu)
        return (uint16_t)((BK_LINK_SELF << 9) | 1);
    bk_link l = c->t->hosts[pa->host].links[pa->gpu][pb->gpu];
    return (uint16_t)((l.cls << 9) | (l.nvlinks << 1) | same);
}

bk_status bk__lane_models(lctx *c, bk_err *err)
{
    c->model = NULL;
    c->nmodels = 1;
    if (!c->gpu || !c->t)
        return BK_OK;
    const bk_topo *t = c->t;
    const char *names[256], *first = NULL;
    int n = 0, one = 1;
    /* most topologies have one model: no table then */
    for (int h = 0; h < t->nhosts && one; h++)
        for (int g = 0; g < t->hosts[h].ngpus && one; g++) {
            if (!first)
                first = t->hosts[h].gpus[g].name;
            one = !strcmp(t->hosts[h].gpus[g].name, first);
        }
    if (one)
        return BK_OK;
    c->model = calloc((size_t)t->nhosts, sizeof *c->model);
    if (!c->model)
        return BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
    for (int h = 0; h < t->nhosts; h++)
        for (int g = 0; g < t->hosts[h].ngpus; g++) {
            const char *name = t->hosts[h].gpus[g].name;
            int k = 0;
            while (k < n && strcmp(names[k], name))
                k++;
            if (k == n && n < 255) /* past 255 names the last index is shared */
                names[n++] = name;
            c->model[h][g] = (uint8_t)(k < n ? k : n - 1);
        }
    c->nmodels = n;
    return BK_OK;
}

/* Member label: the GPU's model (bits 8-15), the class of the path to the nearest NIC and
 * its kind (bits 0-7). */
static uint16_t label_of(const lctx *c, int r)
{
    const bk_rank_place *p = &c->pl[r];
    if (!c->gpu)
        return 0;
    const bk_topo_host *h = &c->t->hosts[p->host];
    const uint16_t model = c->model ? (uint16_t)(c->model[p->host][p->gpu] << 8) : 0;
    int k = h->gpus[p->gpu].nic;
    if (k < 0)
        return model;
    return (uint16_t)(model | (h->gpu_nic[p->gpu][k] << 1) | !strcmp(h->nics[k].kind, "ib"));
}

static const char *hist_name(int code_class, char *buf, size_t n, int nvl)
{
    bk_link l = { (uint8_t)code_class, (uint8_t)nvl };
    return bk_link_str(l, buf, n);
}

/* Signature, score and summary of one lane. */
bk_status bk__lane_sig(const lctx *c, lane *ln, bk_err *err)
{
    bk_status st = BK_OK;
    int L = c->size;
    uint16_t *codes = c->scratch ? c->scratch : malloc((size_t)L * (size_t)L * sizeof(uint16_t));
    uint16_t labels[BK_LANE_MAX];
    if (!codes)
        return BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
    int hostseen[BK_LANE_MAX], nh = 0, numaseen[BK_LANE_MAX][2], nn = 0;
    int hof[BK_LANE_MAX], head[BK_LANE_MAX], next[BK_LANE_MAX], last[BK_LANE_MAX]; /* by host */
    int minclass = BK_LINK_SELF, minnv = 255, nvhist[256] = { 0 };
    long nnet = 0; /* pairs on two hosts: all NET, counted at the end */
    unsigned nicmask = 0;
    memset(ln->hist, 0, sizeof ln->hist);
    for (int i = 0; i < L; i++) {
        int r = ln->ranks[i], h = c->pl[r].host, nu = bk__lane_numa_of(c, r), k;
        labels[i] = label_of(c, r);
        nicmask |= labels[i] & 0xff ? 1u << ((labels[i] & 0xff) >> 1) : 0;
        for (k = 0; k < nh && hostseen[k] != h; k++) {
        }
        if (k == nh) {
            head[k] = i;
            hostseen[nh++] = h;
        } else {
            next[last[k]] = i;
        }
        hof[i] = k;
        last[k] = i;
        next[i] = -1;
        for (k = 0; k < nn && !(numaseen[k][0] == h && numaseen[k][1] == nu); k++) {
        }
        if (k == nn) {
            numaseen[nn][0] = h;
            numaseen[nn++][1] = nu;
        }
    }
    for (int i = 0; i < L; i++) {
        int r = ln->ranks[i];
        uint16_t *row = codes + (size_t)i * (size_t)L;
        long same_after = 0;
        for (int j = 0; j < L; j++)
            row[j] = (uint16_t)(BK_LINK_NET << 9);
        for (int j = head[hof[i]]; j >= 0; j = next[j]) { /* the members on i's host */
            uint16_t code = i == j ? 0 : bk__lane_pair_code(c, r, ln->ranks[j]);
            row[j] = code;
            if (j > i) {
                int cls = code >> 9, nv = (code >> 1) & 0xff;
                same_after++;
                ln->hist[cls]++;
                if (cls == BK_LINK_NV)
                    nvhist[nv]++;
                if (cls < minclass || (cls == minclass && nv < minnv)) {
                    minclass = cls;
                    minnv = nv;
                }
            }
        }
        nnet += L - 1 - i - same_after;
    }
    if (nnet > 0) { /* as if each NET pair had been counted in the loop */
        ln->hist[BK_LINK_NET] += (int)nnet;
        if (BK_LINK_NET < minclass || (BK_LINK_NET == minclass && 0 < minnv)) {
            minclass = BK_LINK_NET;
            minnv = 0;
        }
    }
    /* within one host a lane's collectives never touch a NIC: its members' NIC affinity
     * counts only for a lane over several hosts (a lone management port on one socket
     * would otherwise split an 8-GPU box's lanes of 4) */
    if (nh == 1) {
        for (int i = 0; i < L; i++)
            labels[i] &= 0xff00; /* the model stays */
        nicmask = 0;
    }
    uint64_t hash = 0, raw = 0;
    int exact = 0;
    memo_slot *slot = NULL;
    if (c->memo) {
        raw = bk__hash_u16(codes, (size_t)L * (size_t)L) * 31u ^ bk__hash_u16(labels, (size_t)L);
        raw |= 1; /* never 0 */
        slot = &c->memo[raw % MEMO_SLOTS];
    }
    if (slot && slot->raw == raw) {
        hash = slot->canon;
        exact = slot->exact;
    } else {
        BK_TRY(bk__canon_hash(L, codes, labels, &hash, &exact, err));
        if (slot) {
            slot->raw = raw;
            slot->canon = hash;
            slot->exact = exact;
        }
    }
    ln->hosts = nh;
    ln->numa = nn;
    int total = 0;
    for (int k = BK_LINK_NET; k <= BK_LINK_SELF; k++)
        total += ln->hist[k] * k;
    ln->score = ((uint64_t)nh << 48) | ((uint64_t)(BK_LINK_SELF - minclass) << 40) |
                ((uint64_t)(255 - minnv) << 32) | ((uint64_t)nn << 20) |
                (uint64_t)(0xfffff - (total & 0xfffff));
    /* summary: g|c<size> h<hosts> n<numa spread> [nic:... over hosts] <class>x<count>... #hash */
    char *s = ln->sig, buf[16];
    size_t n = BK_SIG_LEN, off = 0;
    off += (size_t)snprintf(s + off, n - off, "%c%d h%d n%d", c->gpu ? 'g' : 'c', L, nh, nn);
    if (c->gpu && nh > 1) {
        off += (size_t)snprintf(s + off, n - off, " nic:");
        int any = 0;
        for (int k = BK_LINK_SELF; k >= BK_LINK_NONE && off < n; k--)
            if (nicmask & (1u << k)) {
                off += (size_t)snprintf(s + off, n - off, "%s%s", any ? "," : "",
                                        bk_link_class_name((bk_link_class)k));
                any = 1;
            }
        if (!any && off < n)
            off += (size_t)snprintf(s + off, n - off, "none");
    }
    for (int k = BK_LINK_SELF; k >= BK_LINK_NET && off < n; k--) {
        if (k == BK_LINK_NV) {
            for (int v = 255; v >= 0 && off < n; v--)
                if (nvhist[v])
                    off += (size_t)snprintf(s + off, n - off, " %sx%d",
                                            hist_name(k, buf, sizeof buf, v), nvhist[v]);
        } else if (ln->hist[k]) {
            off += (size_t)snprintf(s + off, n - off, " %sx%d", hist_name(k, buf, sizeof buf, 0),
                                    ln->hist[k]);
        }
    }
    if (c->model && off < n) { /* a topology of several GPU models: the lane's */
        const bk_rank_place *p0 = &c->pl[ln->ranks[0]];
        int mixed = 0;
        for (int i = 1; i < L; i++) {
            const bk_rank_place *p = &c->pl[ln->ranks[i]];
            mixed |= c->model[p->host][p->gpu] != c->model[p0->host][p0->gpu];
        }
        const char *name = mixed ? "mixed GPU models"
                                 : c->t->hosts[p0->host].gpus[p0->gpu].name[0]
                                 ? c->t->hosts[p0->host].gpus[p0->gpu].name
                                 : "unnamed GPU";
        /* 40 bytes, cut between UTF-8 characters: the signature is recorded as JSON text */
        off += (size_t)snprintf(s + off, n - off, " [%.*s]", bk_utf8_cut(name, 40), name);
    }
    if (off < n)
        snprintf(s + off, n - off, " #%016" PRIx64 "%s", hash, exact ? "" : "~");
out:
    if (codes != c->scratch)
        free(codes);
    return st;
}

bk_status bk_lane_signature(const bk_topo *t, const bk_rank_place *places, const int *ranks,
                            int size, char *sig, size_t n, bk_err *err)
{
    bk_status st = BK_OK;
    if (size < 1 || size > BK_LANE_MAX)
        return BK_FAIL(err, BK_ERR_INPUT, "lane size %d: must be in [1, %d]", size, BK_LANE_MAX);
    lctx c = { .t = t, .pl = places, .size = size, .gpu = t && places[ranks[0]].gpu >= 0 };
    lane ln = { .ranks = (int *)ranks };
    BK_TRY(bk__lane_models(&c, err));
    BK_TRY(bk__lane_sig(&c, &ln, err));
    bk_strlcpy(sig, ln.sig, n);
out:
    free(c.model);
    return st;
}

