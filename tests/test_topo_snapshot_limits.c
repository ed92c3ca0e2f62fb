/* test_topo_snapshot_limits.c - the edges of a bracket.topology/1 snapshot's limits (see
 * docs/topology.md), on hgx8_nvswitch.json edited one field at a time: a value at its limit
 * loads, one past it is refused naming the file and the JSON path; CUDA ordinal 0 is an
 * ordinal like any other (two GPUs cannot share it); a snapshot holds at least
 * one host, and a host is its hostname and boot_id together. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

static json_t *hgx(json_t **host0)
{
    char path[1024];
    json_error_t je;
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/hgx8_nvswitch.json", BK_SOURCE_DIR);
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    *host0 = json_array_get(json_object_get(root, "hosts"), 0);
    return root;
}

/* Parse root: BK_OK, or BK_ERR_INPUT with exactly `want` (want NULL: must load). */
static void expect(json_t *root, const char *want)
{
    char *text = json_dumps(root, 0);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_non_null(text);
    bk_status st = bk_topo_parse(text, "bad.json", &t, &err);
    free(text);
    bk_topo_free(t);
    if (!want) {
        if (st != BK_OK)
            fail_msg("expected it to load: %s", err.msg);
        return;
    }
    assert_int_equal(st, BK_ERR_INPUT);
    if (strcmp(err.msg, want) != 0)
        fail_msg("message \"%s\", expected \"%s\"", err.msg, want);
}

static json_t *gpu(json_t *h, int i) { return json_array_get(json_object_get(h, "gpus"), i); }

static void test_gpu_numa_and_ordinal(void **state)
{
    (void)state;
    json_t *h, *root = hgx(&h);
    int nnuma = (int)json_array_size(json_object_get(h, "numa"));
    assert_true(nnuma >= 1);
    /* a GPU's NUMA node is one of the host's: the last one is, one more is not */
    json_object_set_new(gpu(h, 0), "numa", json_integer(nnuma - 1));
    expect(root, NULL);
    json_object_set_new(gpu(h, 0), "numa", json_integer(nnuma));
    char want[256];
    snprintf(want, sizeof want, "bad.json: hosts[0].gpus[0].numa: %d is out of range [-1, %d]",
             nnuma, nnuma - 1);
    expect(root, want);
    json_object_set_new(gpu(h, 0), "numa", json_integer(-2));
    snprintf(want, sizeof want, "bad.json: hosts[0].gpus[0].numa: -2 is out of range [-1, %d]",
             nnuma - 1);
    expect(root, want);
    json_object_set_new(gpu(h, 0), "numa", json_integer(0));
    /* CUDA ordinal 0 given to two GPUs */
    json_object_set_new(gpu(h, 4), "cuda_index", json_integer(0));
    expect(root, "bad.json: hosts[0].gpus[4].cuda_index: 0 is also the cuda_index of "
                 "hosts[0].gpus[0] (one CUDA ordinal for two GPUs)");
    json_decref(root);
}

static void test_numa_memory_and_notes(void **state)
{
    (void)state;
    json_t *h, *root = hgx(&h);
    json_t *numa0 = json_array_get(json_object_get(h, "numa"), 0);
    json_object_set_new(numa0, "memory_bytes", json_integer(0));
    expect(root, NULL);
    json_object_set_new(numa0, "memory_bytes", json_integer(-1));
    expect(root, "bad.json: hosts[0].numa[0].memory_bytes: must be an integer >= 0");
    json_object_set_new(numa0, "memory_bytes", json_integer(1));
    /* a note of BK_TOPO_NOTE_LEN - 1 bytes is kept; one byte more is refused */
    char note[BK_TOPO_NOTE_LEN + 1];
    memset(note, 'n', sizeof note - 1);
    note[BK_TOPO_NOTE_LEN - 1] = '\0';
    json_t *notes = json_array();
    json_array_append_new(notes, json_string(note));
    json_object_set_new(h, "notes", notes);
    expect(root, NULL);
    note[BK_TOPO_NOTE_LEN - 1] = 'n';
    note[BK_TOPO_NOTE_LEN] = '\0';
    json_array_set_new(notes, 0, json_string(note));
    char want[160];
    snprintf(want, sizeof want, "bad.json: hosts[0].notes[0]: %d bytes; a note holds at most %d",
             BK_TOPO_NOTE_LEN, BK_TOPO_NOTE_LEN - 1);
    expect(root, want);
    /* a snapshot of no host is no snapshot */
    json_array_clear(json_object_get(root, "hosts"));
    expect(root, "bad.json: hosts: at least one host is needed");
    json_decref(root);
}

/* p2p.access and p2p.rank hold integers in [-1, 127]: 127 is one, 128 is not */
static void test_p2p_range(void **state)
{
    (void)state;
    json_t *h, *root = hgx(&h);
    int n = (int)json_array_size(json_object_get(h, "gpus"));
    json_t *p2p = json_object(), *acc = json_array(), *rank = json_array();
    for (int i = 0; i < n; i++) {
        json_t *a = json_array(), *r = json_array();
        for (int j = 0; j < n; j++) {
            json_array_append_new(a, json_integer(i == j ? 0 : 1));
            json_array_append_new(r, json_integer(i == j ? 0 : 127));
        }
        json_array_append_new(acc, a);
        json_array_append_new(rank, r);
    }
    json_object_set_new(p2p, "access", acc);
    json_object_set_new(p2p, "rank", rank);
    json_object_set_new(h, "p2p", p2p);
    expect(root, NULL);
    json_array_set_new(json_array_get(rank, 0), 1, json_integer(128));
    expect(root, "bad.json: hosts[0].p2p.rank[0][1]: must be an integer in [-1, 127]");
    json_array_set_new(json_array_get(rank, 0), 1, json_integer(-2));
    expect(root, "bad.json: hosts[0].p2p.rank[0][1]: must be an integer in [-1, 127]");
    json_decref(root);
}

/* a host is its hostname and boot_id together: one hostname with two boot ids is two hosts
 * (containers sharing a name, a node rebooted), both kept */
static void test_host_identity(void **state)
{
    (void)state;
    char path[1024];
    json_error_t je;
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/cluster2x8_ib.json", BK_SOURCE_DIR);
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    json_t *hosts = json_object_get(root, "hosts");
    json_t *h0 = json_array_get(hosts, 0), *h1 = json_array_get(hosts, 1);
    json_object_set(h1, "hostname", json_object_get(h0, "hostname"));
    json_object_set_new(h1, "boot_id", json_string("boot-other"));
    expect(root, NULL);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_numa_and_ordinal),
        cmocka_unit_test(test_numa_memory_and_notes),
        cmocka_unit_test(test_p2p_range),
        cmocka_unit_test(test_host_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
