/* topo_canon.c - canonical form of a small symmetric code matrix (lane signatures).
 *
 * Colour refinement (1-dimensional Weisfeiler-Lehman) splits the members of a
 * lane by what they see; individualisation then tries each member of the first
 * unsplit cell, like nauty, and the lexicographically smallest relabelled
 * (labels, upper triangle) wins. Topologies are very symmetric, so a partition
 * whose cells are "uniform" (one code inside each cell and one code between
 * each pair of cells) is already canonical: any order inside the cells gives
 * the same matrix, and the search stops there; and of two "twins" (members
 * whose swap is an automorphism) only one is tried. That keeps an NVSwitch
 * lane of 8 at one refinement and four hosts of 8 at a few hundred leaves. Colours are cell start
 * positions in an ordered partition, derived only from structure, never from
 * the input order, hence the result is invariant to relabelling. */
#include "topology/topology.h"

#include <stdlib.h>
#include <string.h>

#define CANON_BUDGET 4096 /* leaves */

typedef struct {
    int n;
    const uint16_t *codes;
    const uint16_t *labels;
    int leaves;
    uint16_t *best, *cur; /* n + n(n-1)/2 entries */
    int have_best;
    int *ord;
    uint64_t *key;
    uint32_t *row;
} canon;

static const canon *sort_ctx; /* qsort has no user pointer in C11 */
static const int *sort_col;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_vertex(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_col[i] != sort_col[j])
        return sort_col[i] < sort_col[j] ? -1 : 1;
    uint64_t x = sort_ctx->key[i], y = sort_ctx->key[j];
    if (x != y)
        return x < y ? -1 : 1;
    return (i > j) - (i < j);
}

/* Sort vertices by (col, key) and rewrite col as cell start positions; returns the cell count. */
static int repartition(canon *c, int *col)
{
    int n = c->n, cells = 0;
    for (int i = 0; i < n; i++)
        c->ord[i] = i;
    sort_ctx = c;
    sort_col = col;
    qsort(c->ord, (size_t)n, sizeof(int), cmp_vertex);
    int *newcol = (int *)c->row; /* scratch of n entries */
    int start = 0;
    for (int p = 0; p < n; p++) {
        int v = c->ord[p], u = p ? c->ord[p - 1] : -1;
        if (p == 0 || col[v] != col[u] || c->key[v] != c->key[u]) {
            start = p;
            cells++;
        }
        newcol[v] = start;
    }
    memcpy(col, newcol, (size_t)n * sizeof(int));
    return cells;
}

static void refine(canon *c, int *col)
{
    int n = c->n;
    memset(c->key, 0, (size_t)n * sizeof(uint64_t));
    int cells = repartition(c, col);
    while (cells < n) {
        uint32_t *list = malloc((size_t)n * sizeof(uint32_t));
        if (!list)
            return; /* stays a coarser (still invariant) partition */
        for (int i = 0; i < n; i++) {
            int m = 0;
            for (int j = 0; j < n; j++)
                if (j != i)
                    list[m++] = ((uint32_t)c->codes[i * n + j] << 16) | (uint32_t)col[j];
            qsort(list, (size_t)m, sizeof(uint32_t), cmp_u32);
            c->key[i] = bk_fnv1a64(list, (size_t)m * sizeof(uint32_t));
        }
        free(list);
        int again = repartition(c, col);
        if (again == cells)
            break;
        cells = again;
    }
}

/* The start of the first cell that is not a module (more than one code inside
 * it, or towards some other cell), or -1 when every cell is one: then the
 * members of each cell are interchangeable and any order inside the cells
 * gives the same matrix. */
static int first_mixed_cell(canon *c, const int *col)
{
    int n = c->n, bad = -1;
    uint16_t *seen = calloc((size_t)n * (size_t)n, sizeof(uint16_t));
    unsigned char *mixed = calloc((size_t)n, 1);
    if (!seen || !mixed) {
        free(seen);
        free(mixed);
        return -2;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            uint16_t code = (uint16_t)(c->codes[i * n + j] + 1);
            uint16_t *s = &seen[col[i] * n + col[j]];
            if (*s == 0)
                *s = code;
            else if (*s != code)
                mixed[col[i]] = 1;
        }
    for (int k = 0; k < n && bad < 0; k++)
        if (mixed[k])
            bad = k;
    free(seen);
    free(mixed);
    return bad;
}

static void leaf(canon *c, const int *col)
{
    int n = c->n, m = 0;
    for (int i = 0; i < n; i++)
        c->ord[i] = i;
    sort_col = col;
    memset(c->key, 0, (size_t)n * sizeof(uint64_t));
    sort_ctx = c;
    qsort(c->ord, (size_t)n, sizeof(int), cmp_vertex);
    for (int p = 0; p < n; p++)
        c->cur[m++] = c->labels[c->ord[p]];
    for (int p = 0; p < n; p++)
        for (int q = p + 1; q < n; q++)
            c->cur[m++] = c->codes[c->ord[p] * n + c->ord[q]];
    int better = !c->have_best;
    for (int k = 0; !better && k < m; k++) {
        if (c->cur[k] != c->best[k]) {
            better = c->cur[k] < c->best[k];
            break;
        }
    }
    if (better) {
        memcpy(c->best, c->cur, (size_t)m * sizeof(uint16_t));
        c->have_best = 1;
    }
    c->leaves++;
}

/* 1 when swapping u and w is an automorphism (same label, same code towards
 * every other member): their subtrees give the same leaves, so one is enough. */
static int twins(const canon *c, int u, int w)
{
    int n = c->n;
    if (c->labels[u] != c->labels[w])
        return 0;
    for (int x = 0; x < n; x++)
        if (x != u && x != w && c->codes[u * n + x] != c->codes[w * n + x])
            return 0;
    return 1;
}

/* Returns -1 when the budget ran out, -2 on memory exhaustion. */
static int search(canon *c, int *col)
{
    int n = c->n;
    refine(c, col);
    if (c->leaves >= CANON_BUDGET)
        return -1;
    int cell = first_mixed_cell(c, col);
    if (cell == -2)
        return -2;
    if (cell < 0) {
        leaf(c, col);
        return 0;
    }
    int *sub = malloc((size_t)n * sizeof(int));
    if (!sub)
        return -2;
    int rc = 0;
    for (int v = 0; v < n && rc == 0; v++) {
        if (col[v] != cell)
            continue;
        int seen = 0;
        for (int u = 0; u < v && !seen; u++)
            seen = col[u] == cell && twins(c, u, v);
        if (seen)
            continue;
        for (int i = 0; i < n; i++)
            sub[i] = (col[i] == cell && i != v) ? cell + 1 : col[i];
        rc = search(c, sub);
    }
    free(sub);
    return rc;
}

bk_status bk__canon_hash(int n, const uint16_t *codes, const uint16_t *labels, uint64_t *hash,
                         int *exact, bk_err *err)
{
    bk_status st = BK_OK;
    size_t len = (size_t)n + (size_t)n * (size_t)(n - 1) / 2;
    canon c = { .n = n, .codes = codes, .labels = labels };
    int *col = NULL;
    *hash = 0;
    *exact = 0;
    if (n < 1 || n > BK_LANE_MAX)
        return BK_FAIL(err, BK_ERR_INTERNAL, "canonical form: %d members is out of range", n);
    c.best = malloc(len * sizeof(uint16_t));
    c.cur = malloc(len * sizeof(uint16_t));
    c.ord = malloc((size_t)n * sizeof(int));
    c.key = malloc((size_t)n * sizeof(uint64_t));
    c.row = malloc((size_t)n * sizeof(uint32_t) + (size_t)n * sizeof(int));
    col = malloc((size_t)n * sizeof(int));
    if (!c.best || !c.cur || !c.ord || !c.key || !c.row || !col) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "canonical form: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        col[i] = 0;
    for (int i = 0; i < n; i++)
        c.key[i] = labels[i];
    repartition(&c, col); /* cells by label first */
    int *root = malloc((size_t)n * sizeof(int));
    if (!root) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "canonical form: out of memory");
        goto out;
    }
    memcpy(root, col, (size_t)n * sizeof(int));
    int rc = search(&c, col);
    if (rc == -2) {
        free(root);
        st = BK_FAIL(err, BK_ERR_SYSTEM, "canonical form: out of memory");
        goto out;
    }
    if (rc == 0) {
        uint64_t h = bk_fnv1a64(&n, sizeof n);
        *hash = h ^ bk_fnv1a64(c.best, len * sizeof(uint16_t));
        *exact = 1;
    } else {
        /* fallback: the refined colour classes with their neighbourhoods */
        refine(&c, root);
        uint64_t h = 0;
        for (int i = 0; i < n; i++) {
            uint64_t v[3] = { c.key[i], (uint64_t)root[i], labels[i] };
            h += bk_fnv1a64(v, sizeof v); /* a sum: independent of the order */
        }
        *hash = h ^ 0x5bd1e995u;
    }
    free(root);
out:
    free(c.best);
    free(c.cur);
    free(c.ord);
    free(c.key);
    free(c.row);
    free(col);
    return st;
}
