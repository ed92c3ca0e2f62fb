/* test_topo_canon.c - the canonical form's search (topology/topo_canon.c) on matrices
 * built to reach its corners: children that look alike to colour refinement but are not
 * automorphic, a search of a few hundred leaves all visited, one past the 4096-leaf budget
 * that only skipped (automorphic) children push past it, and pinned hashes of matrices
 * whose leaves differ. Random relabellings and the golden hashes of host blocks are in
 * test_topo_lanes.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

/* Members off..off+k-1 of an n x n matrix: the round-robin 1-factorisation of K_k (k even),
 * code 1 + the round an edge is played in. Every member sees each code 1..k-1 exactly once,
 * so colour refinement cannot split them, and individualising any member splits them all;
 * no permutation but the identity keeps every code, so each of the k children is a leaf
 * that the search visits (none is skipped as automorphic). */
static void round_robin(uint16_t *m, int n, int off, int k)
{
    int q = k - 1;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            int r = i == q ? 2 * j % q : j == q ? 2 * i % q : (i + j) % q;
            m[(off + i) * n + off + j] = (uint16_t)(i == j ? 0 : r + 1);
        }
}

/* Two circulant blocks of 7 and code 4 between them. In block 0 the code of two members
 * is their circular distance (1, 2, 3); in block 1 distances 2 and 3 swap codes. Every
 * member sees 1, 1, 2, 2, 3, 3 in its block, so refinement leaves one cell of 14, but the
 * blocks are not isomorphic: a child in block 0 and one in block 1 must both be searched. */
static void two_circulants(uint16_t m[196])
{
    static const uint16_t code[2][4] = { { 0, 1, 2, 3 }, { 0, 1, 3, 2 } };
    for (int i = 0; i < 14; i++)
        for (int j = 0; j < 14; j++) {
            int d = (j % 7 - i % 7 + 7) % 7;
            m[i * 14 + j] = i == j ? 0 : i / 7 != j / 7 ? 4 : code[i / 7][d < 7 - d ? d : 7 - d];
        }
}

/* `hosts` blocks of `per` members from member off on: 3 within a half of a block, 2 across
 * the halves, 1 between blocks (test_topo_lanes.c's blocks), each code + base. */
static void host_blocks(uint16_t *m, int n, int off, int hosts, int per, int base)
{
    int k = hosts * per;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            m[(off + i) * n + off + j] =
                (uint16_t)(i == j                                          ? 0
                           : i / per != j / per                             ? base + 1
                           : (i % per) / (per / 2) == (j % per) / (per / 2) ? base + 3
                                                                            : base + 2);
}

/* A round robin of `k` (label 0) and host blocks of `hosts` x 8 (label 1, codes 101-103),
 * code 500 between them: the search individualises the round robin first (its label sorts
 * first), and below each of its k rigid children lies the whole block search. */
static uint16_t *rr_and_blocks(int k, int hosts, uint16_t *lab)
{
    int n = k + hosts * 8;
    uint16_t *m = malloc((size_t)n * (size_t)n * sizeof *m);
    assert_non_null(m);
    for (int i = 0; i < n * n; i++)
        m[i] = 500;
    round_robin(m, n, 0, k);
    host_blocks(m, n, k, hosts, 8, 100);
    for (int i = 0; i < n; i++) {
        m[i * n + i] = 0;
        lab[i] = (uint16_t)(i >= k);
    }
    return m;
}

/* The matrix with its members relabelled by perm (new i = old perm[i]). */
static void permute(int n, const uint16_t *m, const uint16_t *lab, const int *perm, uint16_t *p,
                    uint16_t *plab)
{
    for (int i = 0; i < n; i++) {
        plab[i] = lab[perm[i]];
        for (int j = 0; j < n; j++)
            p[i * n + j] = m[perm[i] * n + perm[j]];
    }
}

/* A child is skipped as automorphic to an earlier one only when the map between their
 * colourings keeps every code: else the smallest leaf may lie below the skipped child and
 * the hash depends on which block the input lists first. 64 fixed relabellings of the two
 * circulants all hash alike (a map accepted without the code check breaks about half). */
static void test_canon_not_fooled_by_lookalike_children(void **state)
{
    (void)state;
    uint16_t m[196], p[196], lab[14] = { 0 }, plab[14];
    int perm[14];
    uint32_t s = 12345;
    bk_err err = { 0 };
    uint64_t h0 = 0;
    int e0 = -1, bad = 0;
    two_circulants(m);
    assert_int_equal(bk__canon_hash(14, m, lab, &h0, &e0, &err), BK_OK);
    assert_int_equal(e0, 1);
    for (int trial = 0; trial < 64; trial++) {
        for (int i = 0; i < 14; i++)
            perm[i] = i;
        for (int i = 13; i > 0; i--) {
            s = s * 1103515245u + 12345u;
            int j = (int)((s >> 16) % (uint32_t)(i + 1)), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        permute(14, m, lab, perm, p, plab);
        uint64_t h = 0;
        int e = -1;
        assert_int_equal(bk__canon_hash(14, p, plab, &h, &e, &err), BK_OK);
        bad += h != h0 || e != e0;
    }
    assert_int_equal(bad, 0);
    /* the blocks in the other order: the same matrix up to relabelling */
    for (int i = 0; i < 14; i++)
        perm[i] = (i + 7) % 14;
    permute(14, m, lab, perm, p, plab);
    uint64_t h = 0;
    int e = -1;
    assert_int_equal(bk__canon_hash(14, p, plab, &h, &e, &err), BK_OK);
    assert_true(h == h0);
}

/* The budget counts leaves, visited or counted: a round robin of 100 has 100 leaves, all
 * visited, and is exact; 10 x (4 blocks of 8) has 3840 and is exact; 12 x 384 = 4608 passes
 * 4096 only through the block children that are counted, not visited, and falls back. */
static void test_canon_budget(void **state)
{
    (void)state;
    static const struct {
        int rr, hosts, exact;
    } want[] = { { 100, 0, 1 }, { 10, 4, 1 }, { 12, 4, 0 } };
    uint16_t lab[BK_LANE_MAX] = { 0 };
    bk_err err = { 0 };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int n = want[k].rr + 8 * want[k].hosts, exact = -1;
        uint16_t *m = rr_and_blocks(want[k].rr, want[k].hosts, lab);
        uint64_t h = 0;
        assert_int_equal(bk__canon_hash(n, m, lab, &h, &exact, &err), BK_OK);
        if (exact != want[k].exact)
            fail_msg("round robin %d + %d blocks of 8: exact %d, expected %d", want[k].rr,
                     want[k].hosts, exact, want[k].exact);
        free(m);
    }
}

/* The canonical leaf is the smallest: matrices whose search meets different leaves (the
 * round robins, the circulants, the round robin over blocks), pinned. Any change of which
 * leaf is canonical changes every lane signature, so it must show here. */
static void test_canon_golden_distinct_leaves(void **state)
{
    (void)state;
    uint16_t m[256], lab[BK_LANE_MAX] = { 0 }, c[196];
    bk_err err = { 0 };
    uint64_t h[4] = { 0 };
    int e[4] = { 0 };
    memset(m, 0, sizeof m);
    round_robin(m, 8, 0, 8);
    assert_int_equal(bk__canon_hash(8, m, lab, &h[0], &e[0], &err), BK_OK);
    round_robin(m, 16, 0, 16);
    assert_int_equal(bk__canon_hash(16, m, lab, &h[1], &e[1], &err), BK_OK);
    two_circulants(c);
    assert_int_equal(bk__canon_hash(14, c, lab, &h[2], &e[2], &err), BK_OK);
    uint16_t *rb = rr_and_blocks(10, 4, lab);
    assert_int_equal(bk__canon_hash(42, rb, lab, &h[3], &e[3], &err), BK_OK);
    free(rb);
    static const uint64_t want[4] = { 0x32fedee6c5aeb370ull, 0xa69c817929a311a0ull,
                                      0xfcdb558940c1c342ull, 0x2f60edad58598093ull };
    int bad = 0;
    for (int k = 0; k < 4; k++)
        if (h[k] != want[k] || e[k] != 1) {
            print_message("case %d: 0x%016llx exact %d, expected 0x%016llx exact 1\n", k,
                          (unsigned long long)h[k], e[k], (unsigned long long)want[k]);
            bad++;
        }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canon_not_fooled_by_lookalike_children),
        cmocka_unit_test(test_canon_budget),
        cmocka_unit_test(test_canon_golden_distinct_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
