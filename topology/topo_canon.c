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
 * lane of 8 at one refinement and four hosts of 8 at a few hundred leaves.
 * Colours are cell start positions in an ordered partition, derived only from
 * structure, never from the input order, hence the result is invariant to
 * relabelling.
 *
 * Speed, with the answers of visiting every node: a refinement round builds
 * each member's sorted neighbour list by counting, not qsort, and hashes each
 * distinct list once; a child that a verified automorphism (one that keeps the
 * node's colouring) maps onto an earlier child has a subtree of the same size
 * and the same leaf matrices, so it is counted, not visited; and a lower bound
 * on the leaf count, built the same way, finds a search that would pass the
 * budget (its answer is the fallback) before running it. */
#include "topology/topology.h"

#include <stdlib.h>
#include <string.h>

#define CANON_BUDGET 4096 /* leaves */

typedef struct {
    int n;
    const uint16_t *codes;
    const uint16_t *labels;
    long leaves;
    uint16_t *best, *cur; /* n + n(n-1)/2 entries */
    int have_best;
    int *ord;
    uint64_t *key;
    uint32_t *row;
    /* refinement scratch, filled once by canon_prepare */
    uint8_t *rank;     /* n x n: rank of codes[i][j] among the distinct codes of row i (j != i) */
    int *start;        /* n x n: where the entries of rank k start in row i's sorted list */
    uint32_t *lists;   /* n x (n - 1): each member's sorted neighbour list of the round */
    int *slot;         /* 2n: de-duplication table of the round (member index, -1 empty) */
    uint64_t *fp;      /* n: fingerprint of each row (a quick test before twins()) */
    uint16_t *seen;    /* n x n: scratch of first_mixed_cell */
    unsigned char *mixed; /* n */
    long refinements;  /* refine() calls of the leaf bound (its own budget) */
} canon;

static const canon *sort_ctx; /* qsort has no user pointer in C11 */
static const int *sort_col;

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

/* The key of each member: the hash of its sorted list of (code << 16 | colour)
 * towards every other member. The list is built by counting (c->ord is in
 * colour order after repartition) and hashed once per distinct list; the keys
 * are the ones a qsort of each list and bk_fnv1a64 give. */
static void round_keys(canon *c, const int *col)
{
    int n = c->n, m = n - 1, ts = 2 * n;
    int at[BK_LANE_MAX];
    for (int k = 0; k < ts; k++)
        c->slot[k] = -1;
    for (int i = 0; i < n; i++) {
        uint32_t *list = c->lists + (size_t)i * (size_t)m;
        const uint8_t *rk = c->rank + (size_t)i * (size_t)n;
        const uint16_t *row = c->codes + (size_t)i * (size_t)n;
        memcpy(at, c->start + (size_t)i * (size_t)n, (size_t)n * sizeof(int));
        for (int p = 0; p < n; p++) {
            int j = c->ord[p];
            if (j != i)
                list[at[rk[j]]++] = ((uint32_t)row[j] << 16) | (uint32_t)col[j];
        }
        uint64_t s1 = 0, s2 = 0;
        for (int k = 0; k < m; k++) {
            s1 += list[k];
            s2 += (uint64_t)list[k] * (uint64_t)(2 * k + 1);
        }
        uint64_t q = (s1 * 0x9e3779b97f4a7c15ull) ^ s2;
        int h = (int)((q ^ (q >> 29)) % (uint64_t)ts), found = -1;
        for (; c->slot[h] >= 0; h = (h + 1) % ts) {
            int u = c->slot[h];
            if (!memcmp(c->lists + (size_t)u * (size_t)m, list, (size_t)m * sizeof(uint32_t))) {
                found = u;
                break;
            }
        }
        if (found >= 0) {
            c->key[i] = c->key[found];
        } else {
            c->key[i] = bk_fnv1a64(list, (size_t)m * sizeof(uint32_t));
            c->slot[h] = i;
        }
    }
}

static void refine(canon *c, int *col)
{
    int n = c->n;
    memset(c->key, 0, (size_t)n * sizeof(uint64_t));
    int cells = repartition(c, col);
    while (cells < n) {
        round_keys(c, col);
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
    uint16_t *seen = c->seen;
    unsigned char *mixed = c->mixed;
    memset(seen, 0, (size_t)n * (size_t)n * sizeof(uint16_t));
    memset(mixed, 0, (size_t)n);
    for (int i = 0; i < n; i++) {
        if (mixed[col[i]])
            continue; /* already known: more codes change nothing */
        const uint16_t *row = c->codes + (size_t)i * (size_t)n;
        uint16_t *s = seen + (size_t)col[i] * (size_t)n;
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            uint16_t code = (uint16_t)(row[j] + 1);
            if (s[col[j]] == 0)
                s[col[j]] = code;
            else if (s[col[j]] != code) {
                mixed[col[i]] = 1;
                break;
            }
        }
    }
    for (int k = 0; k < n && bad < 0; k++)
        if (mixed[k])
            bad = k;
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

/* f(x, code): one term of a row fingerprint (a sum over the row's entries). */
static uint64_t fp_term(int x, uint16_t code)
{
    uint64_t v = ((uint64_t)(unsigned)x << 16 | code) * 0x9e3779b97f4a7c15ull;
    return v ^ (v >> 31);
}

/* 1 when swapping u and w is an automorphism (same label, same code towards
 * every other member): their subtrees give the same leaves, so one is enough.
 * Twins' fingerprints agree once the entries at u and w are taken out. */
static int twins(const canon *c, int u, int w)
{
    int n = c->n;
    if (c->labels[u] != c->labels[w])
        return 0;
    const uint16_t *ru = c->codes + (size_t)u * (size_t)n, *rw = c->codes + (size_t)w * (size_t)n;
    if (c->fp[u] - fp_term(u, ru[u]) - fp_term(w, ru[w]) !=
        c->fp[w] - fp_term(w, rw[w]) - fp_term(u, rw[u]))
        return 0;
    for (int x = 0; x < n; x++)
        if (x != u && x != w && ru[x] != rw[x])
            return 0;
    return 1;
}

/* The children of a node whose refined colouring is col and whose first mixed
 * cell starts at `cell`: one member of each class of twins, lowest first. */
static int children(const canon *c, const int *col, int cell, int *kids)
{
    int n = c->n, k = 0;
    for (int v = 0; v < n; v++) {
        if (col[v] != cell)
            continue;
        int seen = 0;
        for (int u = 0; u < v && !seen; u++)
            seen = col[u] == cell && twins(c, u, v);
        if (!seen)
            kids[k++] = v;
    }
    return k;
}

/* ------------------------------------------------ the bound on the search */

#define BOUND_REFINEMENTS 256 /* refinements the bound may spend before it gives up */
#define BOUND_ORBITS 8        /* kinds of children told apart per node */
#define BOUND_FANOUT 8        /* siblings a first child's bound counts on */

/* Individualise v in the refined colouring col (as search does) and refine. */
static void child_colouring(canon *c, const int *col, int cell, int v, int *out)
{
    for (int i = 0; i < c->n; i++)
        out[i] = (col[i] == cell && i != v) ? cell + 1 : col[i];
    refine(c, out);
    c->refinements++;
}

/* 1 when the map sending the p-th member of colouring a to the p-th of colouring b
 * (members ordered by colour, then index) is an automorphism of codes and labels
 * that keeps the colouring col and sends u to v. Refinement, the choice of the
 * first mixed cell and the twins are all equivariant under such a map, so the
 * search below child u and below child v visit equally many leaves. */
static int maps_onto(canon *c, const int *col, const int *a, const int *b, int u, int v,
                     int *g, int *oa, int *ob)
{
    int n = c->n;
    for (int i = 0; i < n; i++)
        oa[i] = ob[i] = i;
    sort_ctx = c;
    memset(c->key, 0, (size_t)n * sizeof(uint64_t));
    sort_col = a;
    qsort(oa, (size_t)n, sizeof(int), cmp_vertex);
    sort_col = b;
    qsort(ob, (size_t)n, sizeof(int), cmp_vertex);
    for (int p = 0; p < n; p++) {
        if (a[oa[p]] != b[ob[p]])
            return 0;
        g[oa[p]] = ob[p];
    }
    if (g[u] != v)
        return 0;
    for (int i = 0; i < n; i++)
        if (col[g[i]] != col[i] || c->labels[g[i]] != c->labels[i])
            return 0;
    for (int i = 0; i < n; i++) {
        const uint16_t *ri = c->codes + (size_t)i * (size_t)n;
        const uint16_t *rg = c->codes + (size_t)g[i] * (size_t)n;
        for (int j = 0; j < n; j++)
            if (j != i && rg[g[j]] != ri[j])
                return 0;
    }
    return 1;
}

/* A lower bound on the leaves that search(c, col) would visit, trying to reach
 * `need` (it stops once it has). Each child counts one leaf at least; a child
 * that a verified automorphism maps onto an earlier, bounded child counts as
 * that one does. The first child of each kind is asked for enough leaves that
 * BOUND_FANOUT siblings like it would reach `need`. -1 on memory exhaustion.
 * col is not changed. */
static long leaf_bound(canon *c, const int *in, long need)
{
    int n = c->n, no = 0;
    long total = -1;
    int *buf = malloc((size_t)n * sizeof(int) * (size_t)(6 + BOUND_ORBITS));
    if (!buf)
        return -1;
    int *col = buf, *kids = buf + n, *g = buf + 2 * n, *oa = buf + 3 * n, *ob = buf + 4 * n;
    int *mine = buf + 5 * n, *orbcol = buf + 6 * n; /* BOUND_ORBITS colourings */
    int rep[BOUND_ORBITS];
    long lb[BOUND_ORBITS];
    memcpy(col, in, (size_t)n * sizeof(int));
    refine(c, col);
    c->refinements++;
    int cell = first_mixed_cell(c, col);
    if (cell < 0) {
        total = 1;
        goto out;
    }
    int nk = children(c, col, cell, kids);
    total = nk; /* one leaf each at least */
    for (int k = 0; k < nk && total < need && c->refinements < BOUND_REFINEMENTS; k++) {
        child_colouring(c, col, cell, kids[k], mine);
        int o = 0;
        while (o < no && !maps_onto(c, col, orbcol + (size_t)o * (size_t)n, mine, rep[o],
                                    kids[k], g, oa, ob))
            o++;
        if (o == no && no < BOUND_ORBITS) { /* a new kind of child: bound its subtree */
            int fan = nk - k < BOUND_FANOUT ? nk - k : BOUND_FANOUT;
            long want = (need - total + fan - 1) / fan + 1;
            memcpy(orbcol + (size_t)no * (size_t)n, mine, (size_t)n * sizeof(int));
            for (int i = 0; i < n; i++)
                mine[i] = (col[i] == cell && i != kids[k]) ? cell + 1 : col[i];
            rep[no] = kids[k];
            lb[no] = leaf_bound(c, mine, want);
            if (lb[no] < 0) {
                total = -1;
                goto out;
            }
            no++;
        }
        if (o < no) /* else a child of a kind not kept: counted once */
            total += lb[o] - 1;
    }
out:
    free(buf);
    return total;
}

/* The search: visits the tree below the node whose colouring col is refined,
 * keeps the smallest leaf in c->best and counts the leaves in c->leaves. A child
 * that a verified automorphism maps onto an earlier child of the node has as many
 * leaves, with the same matrices (the cells of a leaf are uniform, so the order
 * inside them does not matter), so it is counted, not visited: the count and the
 * smallest leaf are those of visiting every child. Returns 0, -1 once the count
 * passes the budget (the caller then uses the fallback), -2 on memory exhaustion. */
static int search(canon *c, const int *col)
{
    int n = c->n, no = 0, rc = 0;
    int cell = first_mixed_cell(c, col);
    if (cell < 0) {
        leaf(c, col);
        return c->leaves > CANON_BUDGET ? -1 : 0;
    }
    int *buf = malloc((size_t)n * sizeof(int) * (size_t)(5 + BOUND_ORBITS));
    if (!buf)
        return -2;
    int *kids = buf, *g = buf + n, *oa = buf + 2 * n, *ob = buf + 3 * n, *mine = buf + 4 * n;
    int *orbcol = buf + 5 * n, rep[BOUND_ORBITS];
    long count[BOUND_ORBITS];
    int nk = children(c, col, cell, kids);
    for (int k = 0; k < nk && rc == 0; k++) {
        child_colouring(c, col, cell, kids[k], mine);
        int o = 0;
        while (o < no && !maps_onto(c, col, orbcol + (size_t)o * (size_t)n, mine, rep[o],
                                    kids[k], g, oa, ob))
            o++;
        if (o < no) {
            c->leaves += count[o];
            rc = c->leaves > CANON_BUDGET ? -1 : 0;
            continue;
        }
        long before = c->leaves;
        rc = search(c, mine);
        if (rc == 0 && no < BOUND_ORBITS) {
            memcpy(orbcol + (size_t)no * (size_t)n, mine, (size_t)n * sizeof(int));
            rep[no] = kids[k];
            count[no++] = c->leaves - before;
        }
    }
    free(buf);
    return rc;
}

/* Per-call tables of the refinement (see canon). */
static int canon_prepare(canon *c)
{
    int n = c->n;
    size_t nn = (size_t)n * (size_t)n;
    c->rank = malloc(nn);
    c->start = malloc(nn * sizeof(int));
    c->lists = malloc((size_t)n * (size_t)(n > 1 ? n - 1 : 1) * sizeof(uint32_t));
    c->slot = malloc((size_t)2 * (size_t)n * sizeof(int));
    c->fp = malloc((size_t)n * sizeof(uint64_t));
    c->seen = malloc(nn * sizeof(uint16_t));
    c->mixed = malloc((size_t)n);
    uint16_t *d = malloc((size_t)n * sizeof(uint16_t));
    int *cnt = malloc((size_t)n * sizeof(int));
    if (!c->rank || !c->start || !c->lists || !c->slot || !c->fp || !c->seen || !c->mixed ||
        !d || !cnt) {
        free(d);
        free(cnt);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const uint16_t *row = c->codes + (size_t)i * (size_t)n;
        int nd = 0;
        c->fp[i] = 0;
        for (int j = 0; j < n; j++) {
            c->fp[i] += fp_term(j, row[j]);
            if (j == i)
                continue;
            int k = 0;
            while (k < nd && d[k] < row[j])
                k++;
            if (k == nd || d[k] != row[j]) { /* insert, keeping d ascending */
                memmove(d + k + 1, d + k, (size_t)(nd - k) * sizeof(uint16_t));
                d[k] = row[j];
                nd++;
            }
        }
        memset(cnt, 0, (size_t)n * sizeof(int));
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            int k = 0;
            while (d[k] != row[j])
                k++;
            c->rank[(size_t)i * (size_t)n + (size_t)j] = (uint8_t)k;
            cnt[k]++;
        }
        for (int k = 0, at = 0; k < n; k++) {
            c->start[(size_t)i * (size_t)n + (size_t)k] = at;
            at += cnt[k];
        }
    }
    free(d);
    free(cnt);
    return 0;
}

bk_status bk__canon_hash(int n, const uint16_t *codes, const uint16_t *labels, uint64_t *hash,
                         int *exact, bk_err *err)
{
    bk_status st = BK_OK;
    size_t len = (size_t)n + (size_t)n * (size_t)(n - 1) / 2;
    canon c = { .n = n, .codes = codes, .labels = labels };
    int *col = NULL, *root = NULL;
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
    root = malloc((size_t)n * sizeof(int));
    if (!c.best || !c.cur || !c.ord || !c.key || !c.row || !col || !root ||
        canon_prepare(&c) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "canonical form: out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        col[i] = 0;
    for (int i = 0; i < n; i++)
        c.key[i] = labels[i];
    repartition(&c, col); /* cells by label first */
    memcpy(root, col, (size_t)n * sizeof(int));
    /* a search with more leaves than the budget ends in the fallback: skip it */
    long bound = leaf_bound(&c, col, CANON_BUDGET + 1);
    int rc = -2;
    if (bound > CANON_BUDGET) {
        rc = -1;
    } else if (bound >= 0) {
        refine(&c, col);
        rc = search(&c, col);
    }
    if (rc == -2) {
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
out:
    free(c.best);
    free(c.cur);
    free(c.ord);
    free(c.key);
    free(c.row);
    free(c.rank);
    free(c.start);
    free(c.lists);
    free(c.slot);
    free(c.fp);
    free(c.seen);
    free(c.mixed);
    free(col);
    free(root);
    return st;
}
