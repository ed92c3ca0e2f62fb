/* test_topo_snapshot.c - bracket.topology/1 round trips, and malformed snapshots
 * rejected with the file name and the JSON path of what is wrong (unknown keys, CPU
 * lists, one GPU listed twice); the usage lines of the commands that read them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"
#include "topology/topology.h"

static char *fixture_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/%s", BK_SOURCE_DIR, name);
    return path;
}

static void test_round_trip(void **state)
{
    (void)state;
    static const char *const files[] = { "hgx8_nvswitch.json", "pcie8_2s.json", "nvbridge4.json",
                                         "cluster2x8_ib.json" };
    for (size_t i = 0; i < 4; i++) {
        bk_topo *t = NULL, *u = NULL;
        bk_err err = { 0 };
        assert_int_equal(bk_topo_load(fixture_path(files[i]), &t, &err), BK_OK);
        assert_non_null(strstr(t->digest, "fnv1a64:"));
        char tmp[] = "/tmp/bk_topo_XXXXXX";
        int fd = mkstemp(tmp);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(bk_topo_save(t, tmp, &err), BK_OK);
        assert_int_equal(bk_topo_load(tmp, &u, &err), BK_OK);
        assert_string_equal(t->digest, u->digest);
        assert_int_equal(u->nhosts, t->nhosts);
        assert_memory_equal(u->hosts[0].links, t->hosts[0].links, sizeof t->hosts[0].links);
        assert_string_equal(u->hosts[0].gpus[3].bus_id, t->hosts[0].gpus[3].bus_id);
        remove(tmp);
        bk_topo_free(t);
        bk_topo_free(u);
    }
}

static void test_digest_tracks_content(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_load(fixture_path("hgx8_nvswitch.json"), &t, &err), BK_OK);
    char before[40];
    memcpy(before, t->digest, sizeof before);
    t->hosts[0].links[0][1].nvlinks = 12;
    t->hosts[0].links[1][0].nvlinks = 12;
    free(bk_topo_dump(t));
    assert_string_not_equal(before, t->digest);
    bk_topo_free(t);
}

/* The digest is the standard 64-bit FNV-1a (docs/topology.md), so anyone can recompute
 * it: the published test vectors. Until 2026-12-03 the offset basis had lost a digit. */
static void test_fnv1a64_vectors(void **state)
{
    (void)state;
    assert_true(bk_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(bk_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(bk_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
}

/* Load the HGX fixture as JSON, let `edit` spoil it, parse as "bad.json";
 * the error must contain `needle`. */
static void expect_bad(void (*edit)(json_t *host, json_t *root), const char *needle)
{
    json_error_t je;
    json_t *root = json_load_file(fixture_path("hgx8_nvswitch.json"), 0, &je);
    assert_non_null(root);
    edit(json_array_get(json_object_get(root, "hosts"), 0), root);
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_parse(text, "bad.json", &t, &err), BK_ERR_INPUT);
    assert_null(t);
    if (!strstr(err.msg, needle) || strncmp(err.msg, "bad.json: ", 10))
        fail_msg("message \"%s\" lacks \"%s\" or the file name", err.msg, needle);
    free(text);
    json_decref(root);
}

static void e_packages_type(json_t *h, json_t *r)
{
    (void)r;
    json_object_set_new(h, "packages", json_string("two"));
}
static void e_asymmetric(json_t *h, json_t *r)
{
    (void)r;
    json_array_set_new(json_array_get(json_object_get(h, "links"), 1), 0, json_string("PIX"));
}
static void e_rows(json_t *h, json_t *r)
{
    (void)r;
    json_array_remove(json_object_get(h, "links"), 7);
}
static void e_cols(json_t *h, json_t *r)
{
    (void)r;
    json_array_remove(json_array_get(json_object_get(h, "links"), 2), 5);
}
static void e_diagonal(json_t *h, json_t *r)
{
    (void)r;
    json_array_set_new(json_array_get(json_object_get(h, "links"), 3), 3, json_string("NV18"));
}
static void e_link_word(json_t *h, json_t *r)
{
    (void)r;
    json_array_set_new(json_array_get(json_object_get(h, "links"), 0), 1, json_string("NVX"));
}
static void e_link_type(json_t *h, json_t *r)
{
    (void)r;
    json_array_set_new(json_array_get(json_object_get(h, "links"), 0), 1, json_integer(18));
}
static void e_gpu_numa(json_t *h, json_t *r)
{
    (void)r;
    json_object_set_new(json_array_get(json_object_get(h, "gpus"), 2), "numa", json_integer(5));
}
static void e_nic_kind(json_t *h, json_t *r)
{
    (void)r;
    json_object_set_new(json_array_get(json_object_get(h, "nics"), 1), "kind", json_string("wifi"));
}
static void e_gpu_nic(json_t *h, json_t *r)
{
    (void)r;
    json_array_set_new(json_array_get(json_object_get(h, "gpu_nic"), 4), 4, json_string("NV2"));
}
static void e_schema(json_t *h, json_t *r)
{
    (void)h;
    json_object_set_new(r, "schema", json_string("bracket.topology/0"));
}
static void e_no_hostname(json_t *h, json_t *r)
{
    (void)r;
    json_object_del(h, "hostname");
}
static void e_gpus_type(json_t *h, json_t *r)
{
    (void)r;
    json_object_set_new(h, "gpus", json_object());
}

static void test_malformed(void **state)
{
    (void)state;
    expect_bad(e_packages_type, "hosts[0].packages: must be an integer");
    expect_bad(e_asymmetric, "hosts[0].links[1][0]: PIX but links[0][1] is NV18 (matrix not symmetric)");
    expect_bad(e_rows, "hosts[0].links: 7 rows but the host has 8 GPUs");
    expect_bad(e_cols, "hosts[0].links[2]: 7 entries but 8 expected");
    expect_bad(e_diagonal, "hosts[0].links[3][3]: the diagonal must be X");
    expect_bad(e_link_word, "hosts[0].links[0][1]: must be one of X, NV<n>");
    expect_bad(e_link_type, "hosts[0].links[0][1]: must be one of");
    expect_bad(e_gpu_numa, "hosts[0].gpus[2].numa: 5 is out of range [-1, 1]");
    expect_bad(e_nic_kind, "hosts[0].nics[1].kind: must be \"ib\" or \"eth\", not \"wifi\"");
    expect_bad(e_gpu_nic, "hosts[0].gpu_nic[4][4]: NV2 is not a GPU-to-NIC path");
    expect_bad(e_schema, "schema: must be \"bracket.topology/1\"");
    expect_bad(e_no_hostname, "hosts[0].hostname: missing");
    expect_bad(e_gpus_type, "hosts[0].gpus: must be an array");
}

static void test_truncated_and_missing(void **state)
{
    (void)state;
    json_error_t je;
    json_t *root = json_load_file(fixture_path("pcie8_2s.json"), 0, &je);
    char *text = json_dumps(root, JSON_INDENT(1));
    text[strlen(text) / 2] = '\0';
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_parse(text, "cut.json", &t, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "cut.json: line "));
    assert_non_null(strstr(err.msg, "column"));
    free(text);
    json_decref(root);
    bk_err e2 = { 0 };
    assert_int_equal(bk_topo_load("/nonexistent/topo.json", &t, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "/nonexistent/topo.json: cannot read: No such file or directory"));
    bk_err e3 = { 0 };
    assert_int_equal(bk_topo_parse("[1,2]", "arr.json", &t, &e3), BK_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "arr.json: the snapshot must be a JSON object"));
}

static void test_duplicate_host(void **state)
{
    (void)state;
    json_error_t je;
    json_t *root = json_load_file(fixture_path("cluster2x8_ib.json"), 0, &je);
    json_t *h1 = json_array_get(json_object_get(root, "hosts"), 1);
    json_object_set_new(h1, "hostname", json_string("node000"));
    json_object_set_new(h1, "boot_id", json_string("boot-node000"));
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_parse(text, "dup.json", &t, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "dup.json: hosts[1].hostname: \"node000\" with the same boot_id as hosts[0]"));
    free(text);
    json_decref(root);
    /* found by sorting (the pairwise check took 74 s on 100000 hosts), the same pair a scan in
     * file order names: the first host that repeats an earlier one, and the first it repeats;
     * a hostname again with another boot_id is another boot, not a duplicate */
    bk_topo *u = NULL;
    assert_int_equal(bk_topo_new(7, &u, &err), BK_OK);
    static const char *const names[7] = { "c", "a", "b", "a", "c", "b", "a" };
    static const char *const boots[7] = { "1", "1", "1", "2", "1", "1", "1" };
    for (int k = 0; k < 7; k++) {
        snprintf(u->hosts[k].hostname, sizeof u->hosts[k].hostname, "%s", names[k]);
        snprintf(u->hosts[k].boot_id, sizeof u->hosts[k].boot_id, "%s", boots[k]);
    }
    int i = 0, j = 0;
    assert_int_equal(bk_topo_duplicate_host(u, &i, &j), 1);
    assert_int_equal(i, 4); /* c again (a at 3 is another boot) */
    assert_int_equal(j, 0);
    snprintf(u->hosts[4].hostname, sizeof u->hosts[4].hostname, "d");
    assert_int_equal(bk_topo_duplicate_host(u, &i, &j), 1);
    assert_int_equal(i, 5); /* b again, of 2 */
    assert_int_equal(j, 2);
    snprintf(u->hosts[5].hostname, sizeof u->hosts[5].hostname, "e");
    snprintf(u->hosts[6].boot_id, sizeof u->hosts[6].boot_id, "3");
    assert_int_equal(bk_topo_duplicate_host(u, &i, &j), 0);
    bk_topo_free(u);
}

/* A key given twice, at the top or in a host, is refused naming the file (jansson kept the
 * last one, so a snapshot could say two things and be read as one); so from a file. */
static void test_duplicate_keys(void **state)
{
    (void)state;
    json_error_t je;
    json_t *root = json_load_file(fixture_path("hgx8_nvswitch.json"), 0, &je);
    assert_non_null(root);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    static const char *const after[] = { "{", "\"hosts\":[{" };
    static const char *const dup[] = { "\"schema\":\"bracket.topology/1\",", "\"cores\":1," };
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(text, after[i]);
        assert_non_null(at);
        size_t head = (size_t)(at - text) + strlen(after[i]);
        char *two = malloc(strlen(text) + strlen(dup[i]) + 1);
        assert_non_null(two);
        memcpy(two, text, head);
        strcpy(two + head, dup[i]);
        strcat(two, text + head);
        bk_topo *t = NULL;
        bk_err err = { 0 };
        assert_int_equal(bk_topo_parse(two, "dup.json", &t, &err), BK_ERR_INPUT);
        assert_null(t);
        if (!strstr(err.msg, "dup.json: line 1 column") ||
            !strstr(err.msg, "duplicate object key"))
            fail_msg("case %d: \"%s\"", i, err.msg);
        char path[] = "/tmp/bk-topo-dup-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, two, strlen(two)), (ssize_t)strlen(two));
        close(fd);
        bk_err e2 = { 0 };
        assert_int_equal(bk_topo_load(path, &t, &e2), BK_ERR_INPUT);
        assert_non_null(strstr(e2.msg, path));
        assert_non_null(strstr(e2.msg, "duplicate object key"));
        unlink(path);
        free(two);
    }
    free(text);
    json_decref(root);
}

/* Parse `root` as "bad.json"; BK_OK or the error, with err filled. */
static bk_status parse_json(json_t *root, bk_err *err)
{
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    assert_non_null(text);
    bk_status st = bk_topo_parse(text, "bad.json", &t, err);
    if (st == BK_OK)
        assert_non_null(t);
    else
        assert_null(t);
    bk_topo_free(t);
    free(text);
    return st;
}

static json_t *hgx_host0(json_t **root)
{
    json_error_t je;
    *root = json_load_file(fixture_path("hgx8_nvswitch.json"), 0, &je);
    assert_non_null(*root);
    return json_array_get(json_object_get(*root, "hosts"), 0);
}

/* parse_json must refuse with exactly `want` */
static void expect_msg(json_t *root, const char *want)
{
    bk_err err = { 0 };
    assert_int_equal(parse_json(root, &err), BK_ERR_INPUT);
    if (strcmp(err.msg, want))
        fail_msg("message \"%s\", expected \"%s\"", err.msg, want);
}

/* A GPU's bus_id is a PCI address, kept in the probe's form: NVML's 8-digit domain and upper
 * case are read as 0000:1a:00.0 (a rank's GPU is matched by that text), and the same GPU in
 * two forms is one GPU listed twice; anything else (a name, a space, a device past 1f, a
 * function past 7) is refused, naming it. */
static void test_bus_id_forms(void **state)
{
    (void)state;
    json_t *root, *h = hgx_host0(&root);
    json_t *g5 = json_array_get(json_object_get(h, "gpus"), 5);
    json_object_set_new(g5, "bus_id", json_string("00000000:FE:1F.7"));
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_parse(text, "bad.json", &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(t->hosts[0].gpus[5].bus_id, "0000:fe:1f.7");
    bk_topo_free(t);
    free(text);
    const char *g1 = json_string_value(
        json_object_get(json_array_get(json_object_get(h, "gpus"), 1), "bus_id"));
    char nvml[32];
    snprintf(nvml, sizeof nvml, "0000%s", g1); /* 0000:2a:00.0 as NVML writes it */
    json_object_set_new(g5, "bus_id", json_string(nvml));
    char want[256];
    snprintf(want, sizeof want, "bad.json: hosts[0].gpus[5].bus_id: \"%s\" is also the bus_id "
             "of hosts[0].gpus[1] (one GPU listed twice)", nvml);
    expect_msg(root, want);
    static const char *const bad[] = { "hello", "", "0000:01:00.0 ", " 0000:01:00.0",
                                       "0000:01:20.0", "0000:01:00.8", "000000000:01:00.0",
                                       "0000:001:00.0", "0000:-1:00.0", "0x00:01:00.0",
                                       "0000:01:00", "0000:01:00.0.1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object_set_new(g5, "bus_id", json_string(bad[i]));
        snprintf(want, sizeof want, "bad.json: hosts[0].gpus[5].bus_id: \"%s\" is not a PCI bus "
                 "id (DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 0000:18:00.0)", bad[i]);
        expect_msg(root, want);
    }
    json_decref(root);
}

/* Names and notes are printed as they are: a control character (an escape sequence, a newline
 * that fakes a line) is refused, naming where; an empty hostname matches no rank's host. */
static void test_names_printable(void **state)
{
    (void)state;
    json_t *root, *h = hgx_host0(&root);
    json_object_set_new(h, "hostname", json_string("node\x1b[31m0"));
    expect_msg(root, "bad.json: hosts[0].hostname: a control character (byte 0x1b at offset 4)");
    json_object_set_new(h, "hostname", json_string(""));
    expect_msg(root, "bad.json: hosts[0].hostname: empty (ranks are matched to hosts by it)");
    json_object_set_new(h, "hostname", json_string("hgx0"));
    json_object_set_new(json_array_get(json_object_get(h, "gpus"), 2), "name",
                        json_string("H100\nGPU9: fake"));
    expect_msg(root, "bad.json: hosts[0].gpus[2].name: a control character (byte 0x0a at offset "
                     "4)");
    json_object_set_new(json_array_get(json_object_get(h, "gpus"), 2), "name",
                        json_string("NVIDIA H100 80GB HBM3"));
    json_object_set_new(h, "notes", json_pack("[s, s]", "fine", "tab\there"));
    expect_msg(root, "bad.json: hosts[0].notes[1]: a control character (byte 0x09 at offset 3)");
    /* a C1 control (U+009B, CSI to some terminals) as well */
    json_object_set_new(h, "notes", json_pack("[s]", "csi \xc2\x9b" "31m"));
    expect_msg(root, "bad.json: hosts[0].notes[0]: a control character (byte 0xc2 at offset 4)");
    json_object_set_new(h, "notes", json_pack("[s]", "fine: caf\xc3\xa9 is UTF-8, \xc2\xa0 too"));
    bk_err err = { 0 };
    if (parse_json(root, &err) != BK_OK)
        fail_msg("%s", err.msg);
    json_decref(root);
}

/* One NIC twice (by name, or by a known bus id) is refused, naming both; a host with fewer
 * PUs than cores cannot be. */
static void test_nics_and_pus(void **state)
{
    (void)state;
    json_t *root, *h = hgx_host0(&root);
    json_t *nics = json_object_get(h, "nics");
    assert_true(json_array_size(nics) >= 3);
    const char *n0 = json_string_value(json_object_get(json_array_get(nics, 0), "name"));
    const char *b0 = json_string_value(json_object_get(json_array_get(nics, 0), "bus_id"));
    char want[256];
    json_t *keep = json_copy(json_object_get(json_array_get(nics, 2), "name"));
    json_object_set_new(json_array_get(nics, 2), "name", json_string(n0));
    snprintf(want, sizeof want, "bad.json: hosts[0].nics[2].name: \"%s\" is also the name of "
             "hosts[0].nics[0] (one NIC listed twice)", n0);
    expect_msg(root, want);
    json_object_set_new(json_array_get(nics, 2), "name", keep);
    json_object_set_new(json_array_get(nics, 2), "bus_id", json_string(b0));
    snprintf(want, sizeof want, "bad.json: hosts[0].nics[2].bus_id: \"%s\" is also the bus_id "
             "of hosts[0].nics[0] (one NIC listed twice)", b0);
    expect_msg(root, want);
    json_object_set_new(json_array_get(nics, 2), "bus_id", json_string(""));
    json_object_set_new(json_array_get(nics, 1), "bus_id", json_string(""));
    bk_err err = { 0 };
    if (parse_json(root, &err) != BK_OK) /* two unknown bus ids are not one NIC */
        fail_msg("%s", err.msg);
    json_object_set_new(h, "cores", json_integer(112));
    json_object_set_new(h, "pus", json_integer(56));
    expect_msg(root, "bad.json: hosts[0].pus: 56, fewer than the 112 cores (a core has one PU or "
                     "more)");
    json_object_set_new(h, "pus", json_integer(0)); /* not seen */
    if (parse_json(root, &err) != BK_OK)
        fail_msg("%s", err.msg);
    json_decref(root);
}

/* p2p.access is cudaDeviceCanAccessPeer's 0 or 1, which the lane finder reads as a truth
 * value: 7 or -1 are refused, not read as "yes". */
static void test_p2p_access_values(void **state)
{
    (void)state;
    json_t *root, *h = hgx_host0(&root);
    json_t *acc = json_array(), *rank = json_array();
    for (int i = 0; i < 8; i++) {
        json_t *ra = json_array(), *rr = json_array();
        for (int j = 0; j < 8; j++) {
            json_array_append_new(ra, json_integer(1));
            json_array_append_new(rr, json_integer(i == j ? -1 : 0));
        }
        json_array_append_new(acc, ra);
        json_array_append_new(rank, rr);
    }
    json_object_set_new(h, "p2p", json_pack("{s:o, s:o}", "access", acc, "rank", rank));
    bk_err err = { 0 };
    if (parse_json(root, &err) != BK_OK)
        fail_msg("%s", err.msg);
    static const int bad[] = { 7, -1, 2 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_array_set_new(json_array_get(acc, 2), 3, json_integer(bad[i]));
        expect_msg(root, "bad.json: hosts[0].p2p.access[2][3]: must be an integer in [0, 1]");
    }
    json_array_set_new(json_array_get(acc, 2), 3, json_integer(0));
    json_array_set_new(json_array_get(rank, 2), 3, json_integer(-2));
    expect_msg(root, "bad.json: hosts[0].p2p.rank[2][3]: must be an integer in [-1, 127]");
    json_decref(root);
}

/* An unknown key anywhere is refused with its path, as plans refuse theirs; before, it was
 * dropped, and left out of the digest (hosts[0].extra gave the digest of the file without). */
static void test_unknown_keys(void **state)
{
    (void)state;
    static const struct {
        const char *where, *want;
    } cases[] = {
        { "", "bad.json: extra: unknown key" },
        { "host", "bad.json: hosts[0].extra: unknown key" },
        { "numa", "bad.json: hosts[0].numa[1].extra: unknown key" },
        { "gpu", "bad.json: hosts[0].gpus[2].extra: unknown key" },
        { "nic", "bad.json: hosts[0].nics[7].extra: unknown key" },
        { "p2p", "bad.json: hosts[0].p2p.extra: unknown key" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *root, *h = hgx_host0(&root), *o = root;
        const char *w = cases[i].where;
        if (!strcmp(w, "host"))
            o = h;
        else if (!strcmp(w, "numa"))
            o = json_array_get(json_object_get(h, "numa"), 1);
        else if (!strcmp(w, "gpu"))
            o = json_array_get(json_object_get(h, "gpus"), 2);
        else if (!strcmp(w, "nic"))
            o = json_array_get(json_object_get(h, "nics"), 7);
        else if (!strcmp(w, "p2p")) {
            json_t *m = json_array();
            for (int r = 0; r < 8; r++)
                json_array_append_new(m, json_pack("[iiiiiiii]", 1, 1, 1, 1, 1, 1, 1, 1));
            o = json_pack("{s:O, s:o}", "access", m, "rank", m);
            json_object_set_new(h, "p2p", o);
            bk_err err = { 0 };
            if (parse_json(root, &err) != BK_OK) /* a p2p block without extras loads */
                fail_msg("%s", err.msg);
        }
        assert_non_null(o);
        json_object_set_new(o, "extra", json_integer(1));
        expect_msg(root, cases[i].want);
        json_decref(root);
    }
}

/* Notes are kept whole or refused naming the limit: 13 notes once kept 8, a 400-byte note
 * 159 bytes, and the snapshot loaded as if that were all it said. */
static void test_notes_whole(void **state)
{
    (void)state;
    char note[BK_TOPO_NOTE_LEN + 300];
    memset(note, 'n', sizeof note);
    note[BK_TOPO_NOTE_LEN - 1] = '\0'; /* the longest that fits */
    json_t *root, *h = hgx_host0(&root), *notes = json_array();
    for (int i = 0; i < BK_TOPO_MAX_NOTES; i++)
        json_array_append_new(notes, json_string(note));
    json_object_set_new(h, "notes", notes);
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_parse(text, "bad.json", &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(t->hosts[0].nnotes, BK_TOPO_MAX_NOTES);
    assert_string_equal(t->hosts[0].notes[BK_TOPO_MAX_NOTES - 1], note);
    bk_topo_free(t);
    free(text);
    for (int i = BK_TOPO_MAX_NOTES; i < 13; i++)
        json_array_append_new(notes, json_string("one more"));
    expect_msg(root, "bad.json: hosts[0].notes: 13 notes; a host holds at most 8");
    json_array_clear(notes);
    note[400] = '\0';
    memset(note, 'n', 400);
    json_array_append_new(notes, json_string("short"));
    json_array_append_new(notes, json_string(note));
    expect_msg(root, "bad.json: hosts[0].notes[1]: 400 bytes; a note holds at most 159");
    json_decref(root);
}

/* numa[].cpus is hwloc's list syntax as the probe writes it, CPU numbers bounded. */
static void test_cpu_lists(void **state)
{
    (void)state;
    static const char *const good[] = { "0-55", "", "7", "0-3,8-11", "0,2,4-5", "65535",
                                         "0-65535", "0-0" };
    static const char *const bad[] = { "garbage", "0-3,", ",0-3", "3-1", "0-3,2-5", "4-7,0-3",
                                       "0,0", "1-", "-1", "0-3 ", " 0-3", "01", "0-03", "0--3",
                                       "0,,1", "+1", "0x10", "1.5" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *root, *h = hgx_host0(&root);
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 0), "cpus",
                            json_string(good[i]));
        /* node 1 without CPUs, so that node 0's list shares none with it */
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 1), "cpus",
                            json_string(""));
        bk_err err = { 0 };
        if (parse_json(root, &err) != BK_OK)
            fail_msg("cpus \"%s\": %s", good[i], err.msg);
        json_decref(root);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *root, *h = hgx_host0(&root);
        char want[256];
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 1), "cpus",
                            json_string(bad[i]));
        snprintf(want, sizeof want, "bad.json: hosts[0].numa[1].cpus: \"%s\" is not a CPU list "
                 "(numbers and ranges in increasing order, as hwloc writes them: "
                 "\"0-31,64-95\")", bad[i]);
        expect_msg(root, want);
        json_decref(root);
    }
    static const struct {
        const char *cpus, *want;
    } big[] = {
        { "0-99999999", "bad.json: hosts[0].numa[0].cpus: \"0-99999999\": CPU 99999999 is past "
                        "65535, the largest CPU number a snapshot may hold" },
        { "65536", "bad.json: hosts[0].numa[0].cpus: \"65536\": CPU 65536 is past 65535, the "
                   "largest CPU number a snapshot may hold" },
        { "0-3,99999999999999999999999-1", "bad.json: hosts[0].numa[0].cpus: "
          "\"0-3,99999999999999999999999-1\": CPU 99999999999999999999999 is past 65535" },
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        json_t *root, *h = hgx_host0(&root);
        bk_err err = { 0 };
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 0), "cpus",
                            json_string(big[i].cpus));
        assert_int_equal(parse_json(root, &err), BK_ERR_INPUT);
        if (!strstr(err.msg, big[i].want))
            fail_msg("message \"%s\" lacks \"%s\"", err.msg, big[i].want);
        json_decref(root);
    }
    /* two nodes may share CPUs: hwloc gives a memory-only node (HBM, CXL) the CPUs of the
     * package it hangs off, as it gives the package's own node */
    {
        json_t *root, *h = hgx_host0(&root);
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 1), "cpus",
                            json_string("0-55"));
        bk_err err = { 0 };
        if (parse_json(root, &err) != BK_OK)
            fail_msg("%s", err.msg);
        json_decref(root);
    }
    /* a list of any length reads whole, up to what a host's lists share together: node 0
     * the even CPUs 0..16382 (about 37000 characters) is past it, 0..2998 (about 6400) not */
    static char list[65536];
    for (int top = 2998; top <= 16382; top += 16382 - 2998) {
        size_t l = 0;
        for (int c = 0; c <= top; c += 2)
            l += (size_t)snprintf(list + l, sizeof list - l, "%s%d", c ? "," : "", c);
        json_t *root, *h = hgx_host0(&root);
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 0), "cpus",
                            json_string(list));
        json_object_set_new(json_array_get(json_object_get(h, "numa"), 1), "cpus",
                            json_string(""));
        char *text = json_dumps(root, 0);
        bk_topo *t = NULL;
        bk_err err = { 0 };
        const bk_status st = bk_topo_parse(text, "bad.json", &t, &err);
        if (top == 2998) {
            if (st != BK_OK)
                fail_msg("%s", err.msg);
            assert_string_equal(bk_topo_numa_cpus(&t->hosts[0], 0), list);
        } else {
            assert_int_equal(st, BK_ERR_INPUT);
            assert_string_equal(err.msg, "bad.json: hosts[0].numa[0].cpus: the host's NUMA CPU "
                                         "lists together pass 16382 characters");
        }
        bk_topo_free(t);
        free(text);
        json_decref(root);
    }
}

/* One GPU listed twice (same PCI bus id, or the same CUDA ordinal) is refused, naming both:
 * before, `lanes --tp 1` chose two "different" lanes on the one GPU. */
static void test_duplicate_gpu(void **state)
{
    (void)state;
    json_t *root, *h = hgx_host0(&root);
    json_t *gpus = json_object_get(h, "gpus");
    json_object_set_new(json_array_get(gpus, 5), "bus_id", json_string("0000:2a:00.0"));
    expect_msg(root, "bad.json: hosts[0].gpus[5].bus_id: \"0000:2a:00.0\" is also the bus_id of "
                     "hosts[0].gpus[1] (one GPU listed twice)");
    /* a bus id is one address whatever its case */
    json_object_set_new(json_array_get(gpus, 5), "bus_id", json_string("0000:2A:00.0"));
    expect_msg(root, "bad.json: hosts[0].gpus[5].bus_id: \"0000:2A:00.0\" is also the bus_id of "
                     "hosts[0].gpus[1] (one GPU listed twice)");
    json_object_set_new(json_array_get(gpus, 5), "bus_id", json_string("0000:ff:00.0"));
    /* one UUID on two bus ids is one GPU too (an empty uuid, NVML not seen, is no identity) */
    json_object_set_new(json_array_get(gpus, 4), "uuid", json_string("GPU-same"));
    json_object_set_new(json_array_get(gpus, 5), "uuid", json_string("GPU-same"));
    expect_msg(root, "bad.json: hosts[0].gpus[5].uuid: \"GPU-same\" is also the uuid of "
                     "hosts[0].gpus[4] (one GPU listed twice)");
    json_object_set_new(json_array_get(gpus, 4), "uuid", json_string(""));
    json_object_set_new(json_array_get(gpus, 5), "uuid", json_string(""));
    bk_err e0 = { 0 };
    if (parse_json(root, &e0) != BK_OK)
        fail_msg("%s", e0.msg);
    /* a NUMA node twice */
    json_t *numa = json_object_get(h, "numa");
    json_t *os1 = json_object_get(json_array_get(numa, 1), "os_index");
    const json_int_t keep = json_integer_value(os1);
    json_object_set_new(json_array_get(numa, 1), "os_index",
                        json_integer(json_integer_value(json_object_get(json_array_get(numa, 0),
                                                                        "os_index"))));
    expect_msg(root, "bad.json: hosts[0].numa[1].os_index: 0 is also the os_index of "
                     "hosts[0].numa[0] (one NUMA node listed twice)");
    json_object_set_new(json_array_get(numa, 1), "os_index", json_integer(keep));
    json_object_set_new(json_array_get(gpus, 6), "cuda_index", json_integer(3));
    expect_msg(root, "bad.json: hosts[0].gpus[6].cuda_index: 3 is also the cuda_index of "
                     "hosts[0].gpus[3] (one CUDA ordinal for two GPUs)");
    /* an ordinal past the host's GPUs (8 here): CUDA numbers those it sees from 0 */
    json_object_set_new(json_array_get(gpus, 6), "cuda_index", json_integer(8));
    expect_msg(root, "bad.json: hosts[0].gpus[6].cuda_index: 8, but the host lists 8 GPU(s) "
                     "(a CUDA ordinal is below the number of GPUs; -1: not visible to CUDA)");
    json_object_set_new(json_array_get(gpus, 6), "cuda_index", json_integer(7));
    expect_msg(root, "bad.json: hosts[0].gpus[7].cuda_index: 7 is also the cuda_index of "
                     "hosts[0].gpus[6] (one CUDA ordinal for two GPUs)"); /* in range */
    /* unknown ordinals (-1) are not duplicates; the same bus id on two hosts is fine */
    for (size_t g = 0; g < json_array_size(gpus); g++)
        json_object_set_new(json_array_get(gpus, g), "cuda_index", json_integer(-1));
    bk_err err = { 0 };
    if (parse_json(root, &err) != BK_OK)
        fail_msg("%s", err.msg);
    json_decref(root);
    json_error_t je;
    root = json_load_file(fixture_path("cluster2x8_ib.json"), 0, &je);
    json_t *h0 = json_array_get(json_object_get(root, "hosts"), 0);
    json_t *h1 = json_array_get(json_object_get(root, "hosts"), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(h0,
                            "gpus"), 0), "bus_id")),
                        json_string_value(json_object_get(json_array_get(json_object_get(h1,
                            "gpus"), 0), "bus_id")));
    if (parse_json(root, &err) != BK_OK)
        fail_msg("%s", err.msg);
    /* a gathered host (bk_topo_host_parse) is held to the same rules, without a path */
    json_object_set_new(json_array_get(json_object_get(h1, "gpus"), 4), "bus_id",
                        json_string(json_string_value(json_object_get(
                            json_array_get(json_object_get(h1, "gpus"), 2), "bus_id"))));
    char *text = json_dumps(h1, 0);
    bk_topo_host *one = calloc(1, sizeof *one);
    assert_non_null(one);
    assert_int_equal(bk_topo_host_parse(text, "node1", one, &err), BK_ERR_INPUT);
    if (!strstr(err.msg, "node1: gpus[4].bus_id: ") || !strstr(err.msg, "bus_id of gpus[2] "))
        fail_msg("%s", err.msg);
    free(one);
    free(text);
    json_decref(root);
}

/* Every committed snapshot (fixtures and docs/h200) loads under the strict rules. */
static void test_committed_snapshots_load(void **state)
{
    (void)state;
    static const char *const files[] = { "tests/fixtures/topo/hgx8_nvswitch.json",
                                         "tests/fixtures/topo/pcie8_2s.json",
                                         "tests/fixtures/topo/pcie8_asym.json",
                                         "tests/fixtures/topo/nvbridge4.json",
                                         "tests/fixtures/topo/box6_nvlink.json",
                                         "tests/fixtures/topo/cluster2x8_ib.json",
                                         "tests/fixtures/topo/cluster128x8.json",
                                         "docs/h200/topology.json" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        bk_topo *t = NULL;
        bk_err err = { 0 };
        snprintf(path, sizeof path, "%s/%s", BK_SOURCE_DIR, files[i]);
        if (bk_topo_load(path, &t, &err) != BK_OK)
            fail_msg("%s", err.msg);
        bk_topo_free(t);
    }
}

/* The --help text of a command, captured from stdout (malloc'ed). */
static char *help_of(int (*cmd)(int, char **), const char *name)
{
    char tmp[] = "/tmp/bk_help_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 1) >= 0);
    char *argv[] = { (char *)name, (char *)"--help", NULL };
    int rc = cmd(2, argv);
    fflush(stdout);
    assert_true(dup2(saved, 1) >= 0);
    close(saved);
    assert_int_equal(rc, BK_EXIT_PASS);
    off_t n = lseek(fd, 0, SEEK_END);
    assert_true(n > 0);
    char *text = calloc((size_t)n + 1, 1);
    assert_non_null(text);
    assert_int_equal(pread(fd, text, (size_t)n, 0), n);
    close(fd);
    remove(tmp);
    return text;
}

/* The usage lines (the synopsis: "usage:" and the indented lines after it) name every
 * option the option list below them explains, --help aside. */
static void expect_usage_complete(int (*cmd)(int, char **), const char *name)
{
    char *text = help_of(cmd, name);
    char *end = strchr(text, '\n');
    assert_non_null(end);
    while (end[1] == ' ')
        end = strchr(end + 1, '\n');
    size_t synopsis = (size_t)(end - text);
    int options = 0;
    for (char *line = end + 1; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1
                                                                        : NULL) {
        char opt[64];
        if (sscanf(line, " -%*c, %63[a-z-]", opt) != 1 || strncmp(opt, "--", 2) ||
            !strcmp(opt, "--help"))
            continue;
        options++;
        int found = 0;
        for (char *at = text; !found && (at = strstr(at, opt)) && (size_t)(at - text) < synopsis;
             at++) {
            char next = at[strlen(opt)];
            found = !(next >= 'a' && next <= 'z') && next != '-';
        }
        if (!found)
            fail_msg("bracket %s: %s is in the option list but not on the usage line:\n%.*s",
                     name, opt, (int)synopsis, text);
    }
    assert_true(options >= 5);
    free(text);
}

static void test_usage_lines(void **state)
{
    (void)state;
    expect_usage_complete(bk_cmd_topo, "topo");
    expect_usage_complete(bk_cmd_lanes, "lanes");
}

/* A GPU only NVML saw has unknown NIC paths ("?"): they load, and are never nearest. */
static void test_unknown_nic_path(void **state)
{
    (void)state;
    json_error_t je;
    json_t *root = json_load_file(fixture_path("hgx8_nvswitch.json"), 0, &je);
    json_t *h = json_array_get(json_object_get(root, "hosts"), 0);
    json_t *row = json_array_get(json_object_get(h, "gpu_nic"), 3);
    for (size_t k = 0; k < json_array_size(row); k++)
        json_array_set_new(row, k, json_string(k == 6 ? "SYS" : "?"));
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_parse(text, "q.json", &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(t->hosts[0].gpu_nic[3][3], BK_LINK_NONE);
    assert_int_equal(t->hosts[0].gpus[3].nic, 6);
    char *again = bk_topo_dump(t); /* and it round-trips */
    bk_topo *u = NULL;
    assert_int_equal(bk_topo_parse(again, "q2.json", &u, &err), BK_OK);
    assert_string_equal(u->digest, t->digest);
    free(again);
    free(text);
    bk_topo_free(u);
    bk_topo_free(t);
    json_decref(root);
}

static void test_link_words(void **state)
{
    (void)state;
    bk_link l;
    char buf[16];
    assert_int_equal(bk_link_parse("NV18", &l), 0);
    assert_int_equal(l.cls, BK_LINK_NV);
    assert_int_equal(l.nvlinks, 18);
    assert_string_equal(bk_link_str(l, buf, sizeof buf), "NV18");
    static const char *const words[] = { "X", "PIX", "PXB", "PHB", "NODE", "SYS", "NET" };
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(bk_link_parse(words[i], &l), 0);
        assert_string_equal(bk_link_str(l, buf, sizeof buf), words[i]);
    }
    assert_int_not_equal(bk_link_parse("NV0", &l), 0);
    assert_int_not_equal(bk_link_parse("NV", &l), 0);
    assert_int_not_equal(bk_link_parse("pix", &l), 0);
}

/* The committed fixtures are what gen_cluster.py writes (skipped, said, without python3; the
 * generator failing where python3 is fails the test). */
static void test_fixtures_match_generator(void **state)
{
    (void)state;
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        print_message("SKIPPED: no python3 on PATH to run tests/fixtures/topo/gen_cluster.py\n");
        skip();
    }
    char dir[] = "/tmp/bk_topo_gen_XXXXXX", cmd[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "python3 %s/tests/fixtures/topo/gen_cluster.py %s >/dev/null",
             BK_SOURCE_DIR, dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
        fail_msg("gen_cluster.py failed (system() status %d)", rc);
    }
    static const char *const files[] = { "hgx8_nvswitch.json", "pcie8_2s.json", "pcie8_asym.json",
                                         "nvbridge4.json", "box6_nvlink.json",
                                         "cluster2x8_ib.json", "cluster128x8.json" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(cmd, sizeof cmd, "cmp -s %s/%s %s", dir, files[i], fixture_path(files[i]));
        if (system(cmd) != 0)
            fail_msg("%s differs from what gen_cluster.py writes", files[i]);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_digest_tracks_content),
        cmocka_unit_test(test_fnv1a64_vectors),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncated_and_missing),
        cmocka_unit_test(test_duplicate_host),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_notes_whole),
        cmocka_unit_test(test_link_words),
        cmocka_unit_test(test_unknown_nic_path),
        cmocka_unit_test(test_fixtures_match_generator),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_cpu_lists),
        cmocka_unit_test(test_duplicate_gpu),
        cmocka_unit_test(test_bus_id_forms),
        cmocka_unit_test(test_p2p_access_values),
        cmocka_unit_test(test_names_printable),
        cmocka_unit_test(test_nics_and_pus),
        cmocka_unit_test(test_committed_snapshots_load),
        cmocka_unit_test(test_usage_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
