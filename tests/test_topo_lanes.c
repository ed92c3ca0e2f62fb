/* test_topo_lanes.c - lane choice on every fixture for TP 1..16, refusals and
 * their messages, signature invariance under relabelling, cpu and shared lanes,
 * and golden answers (canonical hashes, whole picks up to TP 256) that any change
 * of the canonical form or of the lane finder's choices would break. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/topo_fixture.h"

static int disjoint(const bk_lane_pick *p)
{
    for (int i = 0; i < p->size; i++)
        for (int j = 0; j < p->size; j++)
            if (p->baseline[i] == p->candidate[j])
                return 0;
    return 1;
}

static void expect_pair(const char *fixture, int tp, const int *base, const int *cand,
                        const char *sig_prefix)
{
    bk_topo *t = load(fixture);
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    if (pick(t, tp, BK_LANES_DISJOINT, p, &err) != BK_OK)
        fail_msg("%s TP %d: %s", fixture, tp, err.msg);
    assert_int_equal(p->size, tp);
    assert_true(p->equal);
    assert_true(disjoint(p));
    assert_string_equal(p->baseline_sig, p->candidate_sig);
    assert_memory_equal(p->baseline, base, (size_t)tp * sizeof(int));
    assert_memory_equal(p->candidate, cand, (size_t)tp * sizeof(int));
    if (strncmp(p->baseline_sig, sig_prefix, strlen(sig_prefix)))
        fail_msg("%s TP %d: signature \"%s\" does not start with \"%s\"", fixture, tp,
                 p->baseline_sig, sig_prefix);
    free(p);
    bk_topo_free(t);
}

static void expect_refusal(const char *fixture, int tp, const char *needle, int closest)
{
    bk_topo *t = load(fixture);
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    assert_int_equal(pick(t, tp, BK_LANES_DISJOINT, p, &err), BK_ERR_INPUT);
    assert_false(p->equal);
    if (!strstr(err.msg, needle) || !strstr(p->why, needle))
        fail_msg("%s TP %d: \"%s\" lacks \"%s\"", fixture, tp, err.msg, needle);
    assert_int_equal(p->baseline_sig[0] != '\0', closest);
    free(p);
    bk_topo_free(t);
}

static const int R0[] = { 0 }, R1[] = { 1 }, R01[] = { 0, 1 }, R23[] = { 2, 3 },
                 R0_3[] = { 0, 1, 2, 3 }, R4_7[] = { 4, 5, 6, 7 },
                 R0_7[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, R8_15[] = { 8, 9, 10, 11, 12, 13, 14, 15 },
                 R0_15[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
                 R16_31[] = { 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31 };

static void test_hgx(void **state)
{
    (void)state;
    const char *f = "hgx8_nvswitch.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 NV18x1 ");
    expect_pair(f, 4, R0_3, R4_7, "g4 h1 n1 NV18x6 ");
    expect_refusal(f, 8, "two disjoint lanes of 8 need 16 GPUs; only 8 are available (a "
                         "rehearsal on one lane: lanes.policy \"shared\" in a plan, --policy "
                         "shared to bracket lanes)", 0);
    expect_refusal(f, 16, "a lane of 16 needs 16 GPUs; only 8", 0);
}

static void test_pcie_box(void **state)
{
    (void)state;
    const char *f = "pcie8_2s.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 PIXx1 ");
    expect_pair(f, 4, R0_3, R4_7, "g4 h1 n1 PIXx2 NODEx4 ");
    expect_refusal(f, 8, "need 16 GPUs", 0);
    expect_refusal(f, 16, "needs 16 GPUs", 0);
}

static void test_pcie_halves_differ(void **state)
{
    (void)state;
    const char *f = "pcie8_asym.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 PIXx1 ");
    /* socket 1 holds one switch of 4, socket 0 two switches of 2 */
    expect_refusal(f, 4, "no two disjoint lanes of 4 GPUs with equal signatures among the ", 1);
    bk_topo *t = load(f);
    bk_lane_pick p;
    bk_err err = { 0 };
    assert_int_equal(pick(t, 4, BK_LANES_DISJOINT, &p, &err), BK_ERR_INPUT);
    assert_non_null(strstr(p.why, "closest pair"));
    assert_non_null(strstr(p.why, "PIXx6"));
    assert_non_null(strstr(p.why, "PIXx2 NODEx4"));
    assert_string_not_equal(p.baseline_sig, p.candidate_sig);
    bk_topo_free(t);
    expect_refusal(f, 8, "need 16 GPUs", 0);
    expect_refusal(f, 16, "needs 16 GPUs", 0);
}

static void test_nvlink_bridges(void **state)
{
    (void)state;
    const char *f = "nvbridge4.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 NV4x1 ");
    expect_refusal(f, 4, "two disjoint lanes of 4 need 8 GPUs; only 4", 0);
    expect_refusal(f, 8, "a lane of 8 needs 8 GPUs; only 4", 0);
    expect_refusal(f, 16, "a lane of 16 needs 16 GPUs", 0);
}

static void test_six_gpus_tp4(void **state)
{
    (void)state;
    expect_pair("box6_nvlink.json", 2, R01, R23, "g2 h1 n1 NV12x1 ");
    /* one Ethernet port on socket 0 and no other NIC: within one host a lane's collective
     * never touches it, so the two sockets' lanes of 4 are equal (they were refused) */
    expect_pair("box8_one_eth.json", 4, R0_3, R4_7, "g4 h1 n1 NV18x6 ");
    expect_refusal("box6_nvlink.json", 4, "two disjoint lanes of 4 need 8 GPUs; only 6", 0);
}

static void test_two_nodes(void **state)
{
    (void)state;
    const char *f = "cluster2x8_ib.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 NV18x1 ");
    expect_pair(f, 4, R0_3, R4_7, "g4 h1 n1 NV18x6 ");
    expect_pair(f, 8, R0_7, R8_15, "g8 h1 n2 NV18x28 ");
    expect_refusal(f, 16, "two disjoint lanes of 16 need 32 GPUs; only 16", 0);
}

/* A lane's GPUs' model is part of its signature: two lanes of different GPUs (H100s and
 * A100s in one box, or on two nodes) are never a pair, however alike their links; lanes of
 * one model still pair, and a topology of one model keeps its signatures as they were. */
static void rename_gpus(bk_topo *t, int host, int from, int to, const char *name)
{
    for (int g = from; g < to; g++)
        snprintf(t->hosts[host].gpus[g].name, sizeof t->hosts[host].gpus[g].name, "%s", name);
}

static void test_mixed_models(void **state)
{
    (void)state;
    bk_topo *t = load("hgx8_nvswitch.json");
    bk_lane_pick *p = calloc(1, sizeof *p);
    bk_err err = { 0 };
    assert_non_null(p);
    if (pick(t, 4, BK_LANES_DISJOINT, p, &err) != BK_OK)
        fail_msg("one model: %s", err.msg);
    assert_null(strchr(p->baseline_sig, '[')); /* as before: no model named */
    rename_gpus(t, 0, 4, 8, "NVIDIA A100-SXM4-80GB");
    memset(p, 0, sizeof *p);
    assert_int_equal(pick(t, 4, BK_LANES_DISJOINT, p, &err), BK_ERR_INPUT);
    if (!strstr(err.msg, "equal signatures") || !strstr(err.msg, "[NVIDIA A100-SXM4-80GB]") ||
        !strstr(err.msg, "[NVIDIA H100 80GB HBM3]"))
        fail_msg("H100s against A100s: %s", err.msg);
    memset(p, 0, sizeof *p);
    if (pick(t, 2, BK_LANES_DISJOINT, p, &err) != BK_OK)
        fail_msg("lanes of 2 of one model: %s", err.msg);
    const int hi = p->baseline[0] >= 4;
    for (int i = 0; i < 2; i++)
        if ((p->baseline[i] >= 4) != hi || (p->candidate[i] >= 4) != hi)
            fail_msg("a pair over two models: [%d,%d] vs [%d,%d]", p->baseline[0],
                     p->baseline[1], p->candidate[0], p->candidate[1]);
    assert_string_equal(p->baseline_sig, p->candidate_sig);
    assert_non_null(strstr(p->baseline_sig, hi ? "[NVIDIA A100" : "[NVIDIA H100"));
    /* a lane over both models is named so */
    char sig[BK_SIG_LEN];
    bk_rank_place *pl = NULL;
    int n = 0;
    assert_int_equal(bk_places_one_per_gpu(t, &pl, &n, &err), BK_OK);
    const int across[] = { 3, 4 };
    assert_int_equal(bk_lane_signature(t, pl, across, 2, sig, sizeof sig, &err), BK_OK);
    assert_non_null(strstr(sig, "[mixed GPU models]"));
    free(pl);
    bk_topo_free(t);
    /* two nodes alike but for their GPUs: no lane of 8 a node pairs */
    t = load("cluster2x8_ib.json");
    rename_gpus(t, 1, 0, t->hosts[1].ngpus, "NVIDIA A100-SXM4-80GB");
    memset(p, 0, sizeof *p);
    assert_int_equal(pick(t, 8, BK_LANES_DISJOINT, p, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "equal signatures"));
    free(p);
    bk_topo_free(t);
}

static void test_cluster_1024(void **state)
{
    (void)state;
    const char *f = "cluster128x8.json";
    expect_pair(f, 1, R0, R1, "g1 h1 n1");
    expect_pair(f, 2, R01, R23, "g2 h1 n1 NV18x1 ");
    expect_pair(f, 4, R0_3, R4_7, "g4 h1 n1 NV18x6 ");
    expect_pair(f, 8, R0_7, R8_15, "g8 h1 n2 NV18x28 ");
    expect_pair(f, 16, R0_15, R16_31, "g16 h2 n4 nic:PIX NV18x56 NETx64 ");
}

/* A copy of host 0 with its GPUs relabelled by perm (new i = old perm[i]). */
static bk_topo *relabel(const bk_topo *t, const int *perm)
{
    bk_topo *u = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_new(1, &u, &err), BK_OK);
    const bk_topo_host *h = &t->hosts[0];
    bk_topo_host *g = &u->hosts[0];
    *g = *h;
    for (int i = 0; i < h->ngpus; i++) {
        g->gpus[i] = h->gpus[perm[i]];
        for (int j = 0; j < h->ngpus; j++)
            g->links[i][j] = h->links[perm[i]][perm[j]];
        for (int k = 0; k < h->nnics; k++)
            g->gpu_nic[i][k] = h->gpu_nic[perm[i]][k];
    }
    bk_topo_host_nearest_nics(g);
    return u;
}

static void test_signature_relabel_invariant(void **state)
{
    (void)state;
    static const char *const files[] = { "pcie8_2s.json", "pcie8_asym.json", "hgx8_nvswitch.json" };
    static const int perm[] = { 5, 2, 7, 0, 3, 6, 1, 4 };
    int inv[8];
    for (int i = 0; i < 8; i++)
        inv[perm[i]] = i;
    for (size_t f = 0; f < 3; f++) {
        bk_topo *t = load(files[f]), *u = relabel(t, perm);
        bk_rank_place *pt = NULL, *pu = NULL;
        int n = 0;
        bk_err err = { 0 };
        assert_int_equal(bk_places_one_per_gpu(t, &pt, &n, &err), BK_OK);
        assert_int_equal(bk_places_one_per_gpu(u, &pu, &n, &err), BK_OK);
        /* every 4-subset given by a bit mask: its signature, and the relabelled one's */
        for (unsigned mask = 0; mask < 256; mask++) {
            if (__builtin_popcount(mask) != 4)
                continue;
            int a[4], b[4], k = 0;
            for (int i = 0; i < 8; i++)
                if (mask & (1u << i)) {
                    a[k] = i;
                    b[k++] = inv[i]; /* old GPU i is new GPU inv[i] */
                }
            for (int x = 0; x < 4; x++) /* lane order differs too: ascending new labels */
                for (int y = x + 1; y < 4; y++)
                    if (b[y] < b[x]) {
                        int z = b[x];
                        b[x] = b[y];
                        b[y] = z;
                    }
            char sa[BK_SIG_LEN], sb[BK_SIG_LEN];
            assert_int_equal(bk_lane_signature(t, pt, a, 4, sa, sizeof sa, &err), BK_OK);
            assert_int_equal(bk_lane_signature(u, pu, b, 4, sb, sizeof sb, &err), BK_OK);
            assert_string_equal(sa, sb);
        }
        free(pt);
        free(pu);
        bk_topo_free(t);
        bk_topo_free(u);
    }
}

static void test_signature_tells_structures_apart(void **state)
{
    (void)state;
    bk_topo *t = load("pcie8_2s.json");
    bk_rank_place *pl = NULL;
    int n = 0;
    bk_err err = { 0 };
    char s1[BK_SIG_LEN], s2[BK_SIG_LEN], s3[BK_SIG_LEN];
    assert_int_equal(bk_places_one_per_gpu(t, &pl, &n, &err), BK_OK);
    const int same_switch[] = { 0, 1 }, other_switch[] = { 0, 2 }, other_socket[] = { 0, 4 };
    assert_int_equal(bk_lane_signature(t, pl, same_switch, 2, s1, sizeof s1, &err), BK_OK);
    assert_int_equal(bk_lane_signature(t, pl, other_switch, 2, s2, sizeof s2, &err), BK_OK);
    assert_int_equal(bk_lane_signature(t, pl, other_socket, 2, s3, sizeof s3, &err), BK_OK);
    assert_string_not_equal(s1, s2);
    assert_string_not_equal(s2, s3);
    assert_non_null(strstr(s3, "n2")); /* two NUMA nodes */
    free(pl);
    bk_topo_free(t);
}

/* Canonical form: random symmetric matrices hash alike under any relabelling,
 * and two graphs with the same degree sequence but different shapes differ. */
static void test_canon_random_permutations(void **state)
{
    (void)state;
    uint16_t m[64], p[64], lab[8] = { 0 }, plab[8];
    int perm[8];
    bk_err err = { 0 };
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        int n = 3 + trial % 6;
        for (int i = 0; i < n; i++)
            for (int j = i; j < n; j++)
                m[i * n + j] = m[j * n + i] = i == j ? 0 : (uint16_t)(1 + rand() % 3);
        for (int i = 0; i < n; i++) {
            lab[i] = (uint16_t)(rand() % 2);
            perm[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = rand() % (i + 1), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (int i = 0; i < n; i++) {
            plab[i] = lab[perm[i]];
            for (int j = 0; j < n; j++)
                p[i * n + j] = m[perm[i] * n + perm[j]];
        }
        uint64_t h1, h2;
        int e1, e2;
        assert_int_equal(bk__canon_hash(n, m, lab, &h1, &e1, &err), BK_OK);
        assert_int_equal(bk__canon_hash(n, p, plab, &h2, &e2, &err), BK_OK);
        assert_true(e1 && e2);
        assert_true(h1 == h2);
    }
    /* 6-cycle vs two triangles: both 2-regular on 6 vertices, colour refinement
     * alone cannot tell them apart; the search must */
    uint16_t c6[36] = { 0 }, t2[36] = { 0 }, l6[6] = { 0 };
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            c6[i * 6 + j] = i == j ? 0 : ((i - j + 6) % 6 == 1 || (j - i + 6) % 6 == 1) ? 2 : 1;
            t2[i * 6 + j] = i == j ? 0 : (i / 3 == j / 3) ? 2 : 1;
        }
    uint64_t a, b;
    int ea, eb;
    assert_int_equal(bk__canon_hash(6, c6, l6, &a, &ea, &err), BK_OK);
    assert_int_equal(bk__canon_hash(6, t2, l6, &b, &eb, &err), BK_OK);
    assert_true(a != b);
}

static void test_cpu_lanes(void **state)
{
    (void)state;
    bk_rank_place pl[8];
    bk_lane_pick p;
    bk_err err = { 0 };
    for (int r = 0; r < 8; r++)
        pl[r] = (bk_rank_place){ .host = 0, .gpu = -1, .numa = 0 };
    assert_int_equal(bk_lanes_choose(NULL, 4, 8, pl, BK_LANES_DISJOINT, &p, &err), BK_OK);
    assert_false(p.gpu);
    const int a[] = { 0, 1, 2, 3 }, b[] = { 4, 5, 6, 7 };
    assert_memory_equal(p.baseline, a, sizeof a);
    assert_memory_equal(p.candidate, b, sizeof b);
    assert_non_null(strstr(p.baseline_sig, "c4 h1 n1"));
    /* ranks 0-5 on NUMA 0, 6-7 on NUMA 1: lanes of 4 must be {0..3} and {4..7}? no:
     * {4,5,6,7} spans two nodes; the finder must not call it equal to {0,1,2,3} */
    for (int r = 6; r < 8; r++)
        pl[r].numa = 1;
    bk_err e2 = { 0 };
    assert_int_equal(bk_lanes_choose(NULL, 4, 8, pl, BK_LANES_DISJOINT, &p, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "CPU slots with equal signatures among the "));
    /* 2 ranks: TP 2 disjoint needs 4 */
    bk_err e3 = { 0 };
    assert_int_equal(bk_lanes_choose(NULL, 2, 2, pl, BK_LANES_DISJOINT, &p, &e3), BK_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "need 4 CPU slots; only 2"));
}

static void test_shared_policy_and_double_binding(void **state)
{
    (void)state;
    bk_topo *t = load("nvbridge4.json");
    bk_rank_place pl[2] = { { 0, 0, 0 }, { 0, 0, 0 } }; /* two ranks on GPU 0 */
    bk_lane_pick p;
    bk_err err = { 0 };
    assert_int_equal(bk_lanes_choose(t, 1, 2, pl, BK_LANES_DISJOINT, &p, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "ranks 0 and 1 are both bound to GPU 0 (0000:01:00.0)"));
    assert_non_null(strstr(err.msg, "shared"));
    bk_err e2 = { 0 };
    assert_int_equal(bk_lanes_choose(t, 1, 1, pl, BK_LANES_SHARED, &p, &e2), BK_OK);
    assert_true(p.shared);
    assert_int_equal(p.baseline[0], p.candidate[0]);
    assert_non_null(strstr(p.why, "policy shared"));
    bk_topo_free(t);
}

/* ------------------------------------------------------------ golden answers */

/* Everything a pick says (lanes, signatures, alternatives, reason) and its status,
 * as one hash. */
static uint64_t pick_digest(const bk_lane_pick *p, bk_status st)
{
    uint64_t h = bk_fnv1a64(&st, sizeof st);
    int head[7] = { p->size, p->equal, p->shared, p->gpu, p->nlanes, p->nalts, 0 };
    h = bk_fnv1a64_from(h, head, sizeof head);
    h = bk_fnv1a64_from(h, p->baseline, (size_t)p->size * sizeof(int));
    h = bk_fnv1a64_from(h, p->candidate, (size_t)p->size * sizeof(int));
    h = bk_fnv1a64_from(h, p->baseline_sig, strlen(p->baseline_sig));
    h = bk_fnv1a64_from(h, p->candidate_sig, strlen(p->candidate_sig));
    for (int i = 0; i < p->nalts; i++) {
        const bk_lane_alt *a = &p->alts[i];
        h = bk_fnv1a64_from(h, &a->count, sizeof a->count);
        h = bk_fnv1a64_from(h, a->ranks, (size_t)a->size * sizeof(int));
        h = bk_fnv1a64_from(h, a->signature, strlen(a->signature));
    }
    return bk_fnv1a64_from(h, p->why, strlen(p->why));
}

/* A cluster of `na` copies of fixture a's hosts, then `nb` of fixture b's, each
 * host named anew. */
static bk_topo *tile(const char *a, int na, const char *b, int nb)
{
    bk_topo *ta = load(a), *tb = b ? load(b) : NULL, *u = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_new(na * ta->nhosts + (tb ? nb * tb->nhosts : 0), &u, &err), BK_OK);
    int k = 0;
    for (int part = 0; part < 2; part++) {
        const bk_topo *t = part ? tb : ta;
        for (int c = 0; t && c < (part ? nb : na); c++)
            for (int h = 0; h < t->nhosts; h++, k++) {
                u->hosts[k] = t->hosts[h];
                snprintf(u->hosts[k].hostname, sizeof u->hosts[k].hostname, "h%04d", k);
                snprintf(u->hosts[k].boot_id, sizeof u->hosts[k].boot_id, "boot-%04d", k);
            }
    }
    bk_topo_free(ta);
    bk_topo_free(tb);
    return u;
}

/* What the lane finder answered before its canonical-form search was made fast
 * (helper-h3, 2026-12-04): the same lanes, signatures, alternatives and reasons (the two
 * pcie8_asym refusals' digests taken again on 2026-12-06, when only their reason's words
 * changed: "... with equal signatures among the N natural lanes tried ..."). */
static const struct {
    const char *a;
    int na;
    const char *b;
    int nb, lane;
    bk_lane_policy pol;
    uint64_t digest;
} golden[] = {
    { "hgx8_nvswitch.json", 1, NULL, 0, 4, BK_LANES_DISJOINT, 0x6a4ae753de4d373bull },
    { "pcie8_asym.json", 1, NULL, 0, 3, BK_LANES_DISJOINT, 0xe7909c9ab14cf037ull },
    { "pcie8_asym.json", 1, NULL, 0, 4, BK_LANES_DISJOINT, 0x68c2e5fe4e9a98b9ull },
    /* a refusal: its reason's wording changed (2026-12-06: how to ask for shared lanes in a
     * plan and to bracket lanes), its answer did not (was 0x18137e414f14b3fc) */
    { "box6_nvlink.json", 1, NULL, 0, 4, BK_LANES_DISJOINT, 0x76d37457b8e7f72eull },
    { "cluster2x8_ib.json", 1, NULL, 0, 8, BK_LANES_DISJOINT, 0xfc7e00639e34ba09ull },
    { "cluster128x8.json", 1, NULL, 0, 24, BK_LANES_DISJOINT, 0x6e85690eb2fdd2e9ull },
    { "cluster128x8.json", 1, NULL, 0, 32, BK_LANES_DISJOINT, 0x1f4967552572d76bull },
    { "cluster128x8.json", 1, NULL, 0, 48, BK_LANES_DISJOINT, 0xd3b3505b958f1768ull },
    { "cluster128x8.json", 1, NULL, 0, 64, BK_LANES_DISJOINT, 0x9df6fb6db9cc2f9aull },
    { "cluster128x8.json", 1, NULL, 0, 128, BK_LANES_DISJOINT, 0xd0571af67bc95663ull },
    { "cluster128x8.json", 1, NULL, 0, 256, BK_LANES_DISJOINT, 0x71c7851fc25024e8ull },
    { "cluster128x8.json", 1, NULL, 0, 64, BK_LANES_SHARED, 0xade1930a8f507c94ull },
    { "pcie8_2s.json", 64, NULL, 0, 32, BK_LANES_DISJOINT, 0x0ff28bfd18814dbcull },
    { "pcie8_2s.json", 64, NULL, 0, 128, BK_LANES_DISJOINT, 0xea54cbc16100304bull },
    { "box6_nvlink.json", 48, NULL, 0, 24, BK_LANES_DISJOINT, 0x21af17a821e0beb3ull },
    { "box6_nvlink.json", 48, NULL, 0, 64, BK_LANES_DISJOINT, 0x576220a8e32d9ecdull },
    { "hgx8_nvswitch.json", 16, "pcie8_asym.json", 16, 16, BK_LANES_DISJOINT,
      0xe377fe25fae1bb81ull },
    { "hgx8_nvswitch.json", 16, "pcie8_asym.json", 16, 64, BK_LANES_DISJOINT,
      0xd43f4064524f9706ull },
    { "nvbridge4.json", 64, NULL, 0, 96, BK_LANES_DISJOINT, 0xad6e7f2307c31df4ull },
};

static void test_golden_picks(void **state)
{
    (void)state;
    bk_lane_pick *p = calloc(1, sizeof *p);
    assert_non_null(p);
    int bad = 0;
    for (size_t k = 0; k < sizeof golden / sizeof golden[0]; k++) {
        bk_topo *t = tile(golden[k].a, golden[k].na, golden[k].b, golden[k].nb);
        bk_err err = { 0 };
        bk_status st = pick(t, golden[k].lane, golden[k].pol, p, &err);
        uint64_t d = pick_digest(p, st);
        if (d != golden[k].digest) {
            print_message("golden[%zu] %s x%d + %s x%d, lane %d: digest 0x%016llx, expected "
                          "0x%016llx (%s)\n", k, golden[k].a, golden[k].na,
                          golden[k].b ? golden[k].b : "-", golden[k].nb, golden[k].lane,
                          (unsigned long long)d, (unsigned long long)golden[k].digest,
                          p->baseline_sig);
            bad++;
        }
        bk_topo_free(t);
    }
    free(p);
    assert_int_equal(bad, 0);
}

/* n = hosts x per members: code 3 within a NUMA half of a host, 2 across the halves,
 * 1 between hosts (the shape of a lane over whole HGX hosts). */
static uint16_t *blocks(int hosts, int per)
{
    int n = hosts * per;
    uint16_t *m = calloc((size_t)n * (size_t)n, sizeof *m);
    assert_non_null(m);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            m[i * n + j] = i == j                            ? 0
                           : i / per != j / per               ? 1
                           : (i % per) / (per / 2) == (j % per) / (per / 2) ? 3
                                                                            : 2;
    return m;
}

/* The canonical hashes themselves: a change of the canonical form (search, refinement,
 * budget, fallback) changes every lane signature, so it must show here. */
static void test_canon_golden(void **state)
{
    (void)state;
    static const struct {
        int hosts, per, exact;
        uint64_t hash;
    } want[] = {
        { 1, 8, 1, 0x624e14cca0f45301ull }, { 2, 8, 1, 0x944e4301e1d6cdd8ull },
        { 4, 8, 1, 0xf08af5a28ae0b6d0ull }, { 8, 8, 0, 0xcb9aa985cac25dfdull },
        { 16, 8, 0, 0xce7f9a45427a65f5ull }, { 32, 8, 0, 0xcda61ced3b4407b5ull },
        { 6, 4, 1, 0xddad1cebe1562700ull }, { 12, 4, 0, 0x5fd75be4f92250adull },
    };
    uint16_t lab[BK_LANE_MAX] = { 0 };
    bk_err err = { 0 };
    int bad = 0;
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int n = want[k].hosts * want[k].per, exact = -1;
        uint16_t *m = blocks(want[k].hosts, want[k].per);
        uint64_t h = 0;
        for (int i = 0; i < n; i++)
            lab[i] = (uint16_t)(i % want[k].per == 0); /* a NIC on each host's first member */
        assert_int_equal(bk__canon_hash(n, m, lab, &h, &exact, &err), BK_OK);
        if (h != want[k].hash || exact != want[k].exact) {
            print_message("blocks %d x %d: 0x%016llx exact %d, expected 0x%016llx exact %d\n",
                          want[k].hosts, want[k].per, (unsigned long long)h, exact,
                          (unsigned long long)want[k].hash, want[k].exact);
            bad++;
        }
        free(m);
    }
    /* the 6-cycle and the two triangles of test_canon_random_permutations */
    uint16_t c6[36] = { 0 }, t2[36] = { 0 }, l6[6] = { 0 };
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            c6[i * 6 + j] = i == j ? 0 : ((i - j + 6) % 6 == 1 || (j - i + 6) % 6 == 1) ? 2 : 1;
            t2[i * 6 + j] = i == j ? 0 : (i / 3 == j / 3) ? 2 : 1;
        }
    uint64_t a = 0, b = 0;
    int ea = 0, eb = 0;
    assert_int_equal(bk__canon_hash(6, c6, l6, &a, &ea, &err), BK_OK);
    assert_int_equal(bk__canon_hash(6, t2, l6, &b, &eb, &err), BK_OK);
    if (a != 0xcf2af642e2ee09afull || b != 0x85d77956e1f3ab97ull) {
        print_message("c6 0x%016llx, t2 0x%016llx\n", (unsigned long long)a,
                      (unsigned long long)b);
        bad++;
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hgx),
        cmocka_unit_test(test_pcie_box),
        cmocka_unit_test(test_pcie_halves_differ),
        cmocka_unit_test(test_nvlink_bridges),
        cmocka_unit_test(test_six_gpus_tp4),
        cmocka_unit_test(test_two_nodes), cmocka_unit_test(test_mixed_models),
        cmocka_unit_test(test_cluster_1024),
        cmocka_unit_test(test_signature_relabel_invariant),
        cmocka_unit_test(test_signature_tells_structures_apart),
        cmocka_unit_test(test_canon_random_permutations),
        cmocka_unit_test(test_cpu_lanes),
        cmocka_unit_test(test_shared_policy_and_double_binding),
        cmocka_unit_test(test_canon_golden),
        cmocka_unit_test(test_golden_picks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
