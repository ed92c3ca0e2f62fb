/* test_topo_snapshot.c - bracket.topology/1 round trips, and malformed snapshots
 * rejected with the file name and the JSON path of what is wrong. */
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
    assert_non_null(strstr(e2.msg, "/nonexistent/topo.json: cannot open"));
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

/* The committed fixtures are what gen_cluster.py writes (skipped without python3). */
static void test_fixtures_match_generator(void **state)
{
    (void)state;
    char dir[] = "/tmp/bk_topo_gen_XXXXXX", cmd[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "python3 %s/tests/fixtures/topo/gen_cluster.py %s >/dev/null 2>&1",
             BK_SOURCE_DIR, dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
        skip();
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
        cmocka_unit_test(test_link_words),
        cmocka_unit_test(test_unknown_nic_path),
        cmocka_unit_test(test_fixtures_match_generator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
