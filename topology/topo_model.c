/* topo_model.c - the in-memory topology: allocation, notes, link names, small helpers. */
#include "topology/topology.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bk_status bk_topo_new(int nhosts, bk_topo **out, bk_err *err)
{
    *out = NULL;
    if (nhosts < 0 || nhosts > 100000)
        return BK_FAIL(err, BK_ERR_INPUT, "topology: %d hosts is out of range", nhosts);
    bk_topo *t = calloc(1, sizeof *t);
    if (!t)
        return BK_FAIL(err, BK_ERR_SYSTEM, "topology: out of memory");
    if (nhosts > 0) {
        t->hosts = calloc((size_t)nhosts, sizeof *t->hosts);
        if (!t->hosts) {
            free(t);
            return BK_FAIL(err, BK_ERR_SYSTEM, "topology: out of memory for %d hosts", nhosts);
        }
    }
    t->nhosts = nhosts;
    for (int i = 0; i < nhosts; i++)
        for (int g = 0; g < BK_TOPO_MAX_GPUS; g++) {
            t->hosts[i].gpus[g].numa = -1;
            t->hosts[i].gpus[g].nic = -1;
            t->hosts[i].gpus[g].cuda_index = -1;
        }
    *out = t;
    return BK_OK;
}

void bk_topo_free(bk_topo *t)
{
    if (!t)
        return;
    free(t->hosts);
    free(t);
}

void bk_topo_note(bk_topo_host *h, const char *fmt, ...)
{
    if (h->nnotes >= BK_TOPO_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->notes[h->nnotes], BK_TOPO_NOTE_LEN, fmt, ap);
    va_end(ap);
    h->nnotes++;
}

static const char *const class_names[] = {
    [BK_LINK_NONE] = "?",   [BK_LINK_NET] = "NET", [BK_LINK_SYS] = "SYS",
    [BK_LINK_NODE] = "NODE", [BK_LINK_PHB] = "PHB", [BK_LINK_PXB] = "PXB",
    [BK_LINK_PIX] = "PIX",  [BK_LINK_NV] = "NV",   [BK_LINK_SELF] = "X",
};

const char *bk_link_class_name(bk_link_class c)
{
    if ((unsigned)c > BK_LINK_SELF)
        return "?";
    return class_names[c];
}

const char *bk_link_str(bk_link l, char *buf, size_t n)
{
    if (l.cls == BK_LINK_NV)
        snprintf(buf, n, "NV%u", (unsigned)l.nvlinks);
    else
        snprintf(buf, n, "%s", bk_link_class_name((bk_link_class)l.cls));
    return buf;
}

int bk_link_parse(const char *s, bk_link *out)
{
    out->cls = BK_LINK_NONE;
    out->nvlinks = 0;
    if (!s)
        return -1;
    if (!strncmp(s, "NV", 2) && s[2] >= '0' && s[2] <= '9') {
        char *end = NULL;
        long v = strtol(s + 2, &end, 10);
        if (*end || v < 1 || v > 255)
            return -1;
        out->cls = BK_LINK_NV;
        out->nvlinks = (uint8_t)v;
        return 0;
    }
    for (int c = BK_LINK_NET; c <= BK_LINK_SELF; c++)
        if (c != BK_LINK_NV && !strcmp(s, class_names[c])) {
            out->cls = (uint8_t)c;
            return 0;
        }
    return -1;
}

int bk_topo_ngpus(const bk_topo *t)
{
    int n = 0;
    for (int i = 0; t && i < t->nhosts; i++)
        n += t->hosts[i].ngpus;
    return n;
}

void bk_topo_host_nearest_nics(bk_topo_host *h)
{
    for (int g = 0; g < h->ngpus; g++) {
        int best = -1;
        for (int k = 0; k < h->nnics; k++)
            if (h->gpu_nic[g][k] != BK_LINK_NONE &&
                (best < 0 || h->gpu_nic[g][k] > h->gpu_nic[g][best]))
                best = k;
        h->gpus[g].nic = best;
    }
}

bk_status bk_places_one_per_gpu(const bk_topo *t, bk_rank_place **places, int *nranks,
                                bk_err *err)
{
    int n = bk_topo_ngpus(t), r = 0;
    *places = NULL;
    *nranks = 0;
    if (n == 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: the topology has no GPU", t->source);
    bk_rank_place *p = calloc((size_t)n, sizeof *p);
    if (!p)
        return BK_FAIL(err, BK_ERR_SYSTEM, "lanes: out of memory");
    for (int h = 0; h < t->nhosts; h++)
        for (int g = 0; g < t->hosts[h].ngpus; g++, r++) {
            p[r].host = h;
            p[r].gpu = g;
            p[r].numa = t->hosts[h].gpus[g].numa;
        }
    *places = p;
    *nranks = n;
    return BK_OK;
}

uint64_t bk_fnv1a64_from(uint64_t basis, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = basis;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t bk_fnv1a64(const void *data, size_t n)
{
    return bk_fnv1a64_from(0xcbf29ce484222325ull, data, n); /* FNV-1a's offset basis */
}

uint64_t bk__hash_u16(const uint16_t *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n, w;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(&w, v + i, sizeof w);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = ((h ^ v[i]) * 0x9e3779b97f4a7c15ull) ^ (h >> 29);
    return h;
}

int bk_topo_numa_set_cpus(bk_topo_host *h, int i, const char *cpus)
{
    const size_t n = strlen(cpus) + 1;
    if (h->cpu_text_used == 0) { /* offset 0 is the empty list */
        h->cpu_text[0] = '\0';
        h->cpu_text_used = 1;
    }
    if (n > sizeof h->cpu_text - h->cpu_text_used)
        return -1;
    memcpy(h->cpu_text + h->cpu_text_used, cpus, n);
    h->numa[i].cpus_at = h->cpu_text_used;
    h->cpu_text_used += (uint32_t)n;
    return 0;
}

int bk_topo_same_host(const bk_topo_host *a, const bk_topo_host *b)
{
    return !strcmp(a->hostname, b->hostname) && !strcmp(a->boot_id, b->boot_id);
}

/* qsort_r's order of host indices: hostname, boot_id, index. */
static int by_identity(const void *a, const void *b, void *topo)
{
    const bk_topo *t = topo;
    const bk_topo_host *x = &t->hosts[*(const int *)a], *y = &t->hosts[*(const int *)b];
    int c = strcmp(x->hostname, y->hostname);
    if (!c)
        c = strcmp(x->boot_id, y->boot_id);
    return c ? c : (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int bk_topo_duplicate_host(const bk_topo *t, int *i, int *j)
{
    int *order = malloc((size_t)(t->nhosts > 0 ? t->nhosts : 1) * sizeof *order);
    int found = 0;
    *i = *j = -1;
    if (!order) { /* the pairwise way, without memory */
        for (int b = 1; b < t->nhosts && !found; b++)
            for (int a = 0; a < b && !found; a++)
                if (bk_topo_same_host(&t->hosts[a], &t->hosts[b]))
                    *i = b, *j = a, found = 1;
        return found;
    }
    for (int k = 0; k < t->nhosts; k++)
        order[k] = k;
    qsort_r(order, (size_t)t->nhosts, sizeof *order, by_identity, (void *)t);
    /* in equal runs the lowest index comes first: the pair is (second, first) of the run
     * whose second is lowest, as a scan in file order finds it */
    for (int k = 1; k < t->nhosts; k++) {
        if (bk_topo_same_host(&t->hosts[order[k - 1]], &t->hosts[order[k]]) &&
            (!found || order[k] < *i)) {
            found = 1;
            *i = order[k];
            *j = order[k - 1];
        }
    }
    free(order);
    return found;
}
