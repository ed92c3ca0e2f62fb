/* test_record_read.c - reading a record back (bk_record_read) from the saved record in
 * tests/fixtures/records/pre-repeats, edited one field at a time: each edit that breaks the
 * record's form is BK_ERR_INPUT naming the field, the arm or the sample block; shared lanes
 * are derived from the policy, the lanes, or B and C on the same MPI ranks; the samples'
 * header must match the record's run and plan; `wire` is read back for the report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/record_io.h"
#include "runner/run.h"
#include "runner/wire.h"

#define FIXTURE "tests/fixtures/records/pre-repeats"

static char g_dir[256];

static const char *src(const char *name)
{
    static char buf[1024];
    const char *d = getenv("BK_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/" FIXTURE "/%s", d && d[0] ? d : BK_SOURCE_DIR, name);
    return buf;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bk-test-record-read-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef void (*edit_fn)(json_t *rec);

static const msgpack_sbuffer *g_header; /* a samples header to write instead of the fixture's */
static int g_drop_first;                 /* the fixture's first sample block left out */

/* after a test that set them, also one that failed half-way: the next reads the fixture */
static int plain_samples(void **state)
{
    (void)state;
    g_header = NULL;
    g_drop_first = 0;
    return 0;
}

/* Write the fixture's record (edited by `edit`, may be NULL) and its samples into g_dir, with
 * `extra` (a packed msgpack block, may be NULL) appended to the samples (g_header and
 * g_drop_first change them further); read it back. */
static bk_status read_edited(edit_fn edit, const msgpack_sbuffer *extra, bk_run *run,
                             bk_err *err)
{
    json_error_t je;
    json_t *rec = json_load_file(src("record.json"), 0, &je);
    assert_non_null(rec);
    if (edit)
        edit(rec);
    char path[512], spath[512];
    snprintf(path, sizeof path, "%s/record.json", g_dir);
    snprintf(spath, sizeof spath, "%s/samples.msgpack", g_dir);
    assert_int_equal(json_dump_file(rec, path, JSON_COMPACT), 0);
    json_decref(rec);
    FILE *in = fopen(src("samples.msgpack"), "rb"), *out = fopen(spath, "wb");
    assert_true(in && out);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, in), skip = 0;
    assert_true(n > 0 && n < sizeof buf);
    if (g_header || g_drop_first) {
        const char *why = NULL;
        size_t bad = 0, block = 0;
        assert_int_equal(bk_wire_scan_next(buf, n, &skip, &why, &bad), 0);
        if (g_header) /* the fixture's header replaced by g_header */
            assert_int_equal(fwrite(g_header->data, 1, g_header->size, out), g_header->size);
        else
            assert_int_equal(fwrite(buf, 1, skip, out), skip);
        if (g_drop_first) {
            assert_int_equal(bk_wire_scan_next(buf + skip, n - skip, &block, &why, &bad), 0);
            skip += block;
        }
    }
    assert_int_equal(fwrite(buf + skip, 1, n - skip, out), n - skip);
    if (extra)
        assert_int_equal(fwrite(extra->data, 1, extra->size, out), extra->size);
    fclose(in);
    fclose(out);
    memset(run, 0, sizeof *run);
    return bk_record_read(path, run, err);
}

static void expect_bad(edit_fn edit, const msgpack_sbuffer *extra, const char *want)
{
    bk_run run;
    bk_err err = { 0 };
    assert_int_equal(read_edited(edit, extra, &run, &err), BK_ERR_INPUT);
    if (!strstr(err.msg, want))
        fail_msg("expected \"%s\" in \"%s\"", want, err.msg);
    bk_run_free(&run);
}

static json_t *arm(json_t *rec, int i) { return json_array_get(json_object_get(rec, "arms"), i); }
static json_t *proc(json_t *rec, int i, int p)
{
    return json_array_get(json_object_get(arm(rec, i), "processes"), p);
}

/* ---- edits ---- */

static void short_binary_digest(json_t *r)
{
    json_object_set_new(json_object_get(r, "identity"), "binary_digest",
                        json_string("sha256:f35572d4"));
}
static void version_other(json_t *r)
{
    json_object_set_new(r, "bracket_version", json_string("0.0.9-rc1"));
}
static void plan_iters_zero(json_t *r)
{
    json_object_set_new(json_object_get(json_object_get(r, "plan"), "workload"), "iters",
                        json_integer(0));
}
static void note_not_string(json_t *r)
{
    json_object_set_new(json_object_get(r, "identity"), "source_digest_note", json_true());
}
static void b_as_audit(json_t *r) { json_object_set_new(arm(r, 0), "audit", json_true()); }
static void t_timed(json_t *r) { json_object_set_new(arm(r, 4), "audit", json_false()); }
static void version_missing(json_t *r) { json_object_del(r, "bracket_version"); }
static void version_spaced(json_t *r)
{
    json_object_set_new(r, "bracket_version", json_string("0.1 beta"));
}
static void version_number(json_t *r) { json_object_set_new(r, "bracket_version", json_real(0.1)); }
static void unknown_binary_digest(json_t *r)
{
    json_object_set_new(json_object_get(r, "identity"), "binary_digest", json_string("unknown"));
}
/* the audit A given two rounds, with its processes doubled to match */
static void audit_two_rounds(json_t *r)
{
    json_t *a = arm(r, 3), *procs = json_object_get(a, "processes");
    json_object_set_new(a, "rounds", json_integer(2));
    json_t *copy = json_deep_copy(procs);
    json_array_extend(procs, copy);
    json_decref(copy);
}
static void broke_but_ok(json_t *r)
{
    json_object_set_new(proc(r, 1, 0), "broke_contract", json_true());
}
static void fewer_received(json_t *r)
{
    json_t *p = proc(r, 0, 1);
    json_object_set_new(p, "samples_received",
                        json_integer(json_integer_value(json_object_get(p, "samples_received")) -
                                     1));
}
static void tensor_wrong_shape(json_t *r)
{
    json_t *t = json_array_get(json_object_get(json_object_get(r, "quality"), "tensors"), 1);
    json_object_set_new(t, "shape", json_integer(1));
}
static void tensors_short(json_t *r)
{
    json_array_remove(json_object_get(json_object_get(r, "quality"), "tensors"), 3);
}
static void policy_shared(json_t *r)
{
    json_object_set_new(json_object_get(r, "lanes"), "policy", json_string("shared"));
}
/* C's processes on B's MPI ranks, whatever `lanes` says */
static void c_on_b_ranks(json_t *r) /* its lane and its processes */
{
    for (int p = 0; p < 2; p++) {
        json_object_set_new(proc(r, 1, p), "mpi_rank", json_integer(p));
        json_array_set_new(json_object_get(arm(r, 1), "lane"), (size_t)p, json_integer(p));
    }
}

/* a form a validator relies on, broken in one place each */
static void record_schema_2(json_t *r)
{
    json_object_set_new(r, "schema", json_string("bracket.record/2"));
}
static void schema_number(json_t *r) { json_object_set_new(r, "schema", json_integer(1)); }
static void schema_gone(json_t *r) { json_object_del(r, "schema"); }
static void schema_plan(json_t *r)
{
    json_object_set_new(r, "schema", json_string("bracket.plan/1"));
}
static void long_binary_digest(json_t *r)
{
    char d[80];
    snprintf(d, sizeof d, "sha256:%065d", 0); /* one hex digit too many */
    json_object_set_new(json_object_get(r, "identity"), "binary_digest", json_string(d));
}
static void nonhex_binary_digest(json_t *r)
{
    char d[80] = "sha256:";
    memset(d + 7, 'g', 64);
    d[71] = '\0';
    json_object_set_new(json_object_get(r, "identity"), "binary_digest", json_string(d));
}
static json_t *tensor(json_t *r, int i)
{
    return json_array_get(json_object_get(json_object_get(r, "quality"), "tensors"), i);
}
static void tensor_renamed(json_t *r) /* out and residual_out swapped in shape 0 */
{
    json_object_set_new(tensor(r, 0), "tensor", json_string("residual_out"));
}
static void negative_mismatches(json_t *r)
{
    json_object_set_new(tensor(r, 0), "mismatches", json_integer(-1));
}
static void zero_rounds(json_t *r)
{
    json_object_set_new(arm(r, 0), "rounds", json_integer(0));
    json_object_set_new(arm(r, 0), "processes", json_array());
}
static void extra_process(json_t *r)
{
    json_t *procs = json_object_get(arm(r, 0), "processes");
    json_array_append_new(procs, json_deep_copy(json_array_get(procs, 0)));
}
/* B in 16 rounds (BK_MAX_ROUNDS), its processes repeated to match; its samples are one round's */
static void sixteen_rounds(json_t *r)
{
    json_t *procs = json_object_get(arm(r, 0), "processes"), *one = json_deep_copy(procs);
    json_object_set_new(arm(r, 0), "rounds", json_integer(16));
    for (int k = 1; k < 16; k++)
        json_array_extend(procs, one);
    json_decref(one);
}
static void negative_sent(json_t *r)
{
    json_object_set_new(proc(r, 0, 0), "samples_sent", json_integer(-1));
}
static void bp_not_run(json_t *r) /* its sample blocks stay in the file */
{
    json_array_set_new(json_object_get(r, "arms"), 2, json_pack("{s:s, s:b}", "name", "B'",
                                                                  "ran", 0));
}
static void six_arms(json_t *r)
{
    json_array_append_new(json_object_get(r, "arms"), json_pack("{s:s, s:b}", "name", "B",
                                                                "ran", 0));
}
static void c_runs_incumbent(json_t *r)
{
    json_object_set_new(arm(r, 1), "variant", json_string("shm_twopass"));
}
static void lanes_equal(json_t *r) /* the policy still says disjoint */
{
    json_t *l = json_object_get(r, "lanes");
    json_object_set(l, "candidate", json_object_get(l, "baseline"));
}
/* C on ranks [0,3]: its first rank is B's, its second is not */
static void c_on_0_and_3(json_t *r)
{
    json_object_set_new(proc(r, 1, 0), "mpi_rank", json_integer(0));
    json_array_set_new(json_object_get(arm(r, 1), "lane"), 0, json_integer(0));
}

static json_t *wire(json_t *r) { return json_object_get(r, "wire"); }
/* a run whose tcp connections broke: repeats of all three kinds, one rejection */
static void wire_repeats(json_t *r)
{
    json_object_set_new(wire(r), "repeated", json_integer(12));
    json_object_set_new(wire(r), "repeated_tensors", json_integer(2));
    json_object_set_new(wire(r), "repeated_hellos", json_integer(1));
    json_object_set_new(json_object_get(wire(r), "rejected"), "bad_field", json_integer(3));
}
static void wire_absent(json_t *r) { json_object_del(r, "wire"); }
static void wire_not_object(json_t *r) { json_object_set_new(r, "wire", json_integer(1)); }
static void wire_negative(json_t *r)
{
    json_object_set_new(wire(r), "repeated_tensors", json_integer(-1));
}
static void wire_string_count(json_t *r)
{
    json_object_set_new(wire(r), "accepted", json_string("54"));
}
static void wire_unknown_reason(json_t *r)
{
    json_object_set_new(json_object_get(wire(r), "rejected"), "too_late", json_integer(1));
}
static void wire_rejected_array(json_t *r)
{
    json_object_set_new(wire(r), "rejected", json_array());
}

/* the record of a cuda run of nccl_then_rmsnorm against ipc_oneshot_fused whose quality
 * tolerance is far below one bf16 rounding of the incumbent's sum */
static void cuda_tight_tolerance(json_t *r)
{
    json_t *plan = json_object_get(r, "plan");
    json_object_set_new(r, "backend", json_string("cuda"));
    json_object_set_new(plan, "backend", json_string("cuda"));
    json_object_set_new(json_object_get(plan, "incumbent"), "variant",
                        json_string("nccl_then_rmsnorm"));
    json_object_set_new(json_object_get(plan, "candidate"), "variant",
                        json_string("ipc_oneshot_fused"));
    json_object_set_new(plan, "quality", json_pack("{s:f, s:f}", "rtol", 1e-5, "atol", 1e-5));
    for (int i = 0; i < 5; i++)
        json_object_set_new(arm(r, i), "variant", json_string(i == 1 || i == 3
                                                                  ? "ipc_oneshot_fused"
                                                                  : "nccl_then_rmsnorm"));
}

/* a field of the wrong type or missing, named by its key (jansson's text names only the
 * type it wanted) */
static void ran_string(json_t *r) { json_object_set_new(arm(r, 0), "ran", json_string("yes")); }
static void host_integer(json_t *r) { json_object_set_new(proc(r, 0, 1), "host", json_integer(7)); }
static void variant_missing(json_t *r) { json_object_del(arm(r, 1), "variant"); }
static void max_abs_string(json_t *r)
{
    json_object_set_new(tensor(r, 2), "max_abs_err", json_string("0"));
}
static void lanes_missing(json_t *r) { json_object_del(r, "lanes"); }
static void quality_array(json_t *r) { json_object_set_new(r, "quality", json_array()); }
static void lanes_huge(json_t *r)
{
    json_object_set_new(json_object_get(r, "lanes"), "size", json_integer(5000));
}

/* ---- tests ---- */

static void test_fixture_reads(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.shared_lanes, 0); /* disjoint: ranks [0,1] and [2,3] */
    assert_int_equal(run.arms[0].world, 2);
    assert_int_equal(run.arms[0].r[0].ns_seen[0], 100); /* a block of exactly iters samples */
    /* what the report's header shows: the lanes, the run's ranks (identity.hosts), the
     * routing share (from the record's routing.shapes) */
    assert_int_equal(run.lane_size, 2);
    assert_int_equal(run.baseline[0], 0);
    assert_int_equal(run.baseline[1], 1);
    assert_int_equal(run.candidate[0], 2);
    assert_int_equal(run.candidate[1], 3);
    assert_int_equal(run.world_size, 4);
    assert_true(run.routing_share == 1.0);
    assert_non_null(strstr(run.lane_note, "ranks [0,1] and [2,3]"));
    /* the pids, by which the report picks the round of an arm it shows */
    assert_int_equal(run.arms[0].r[0].pid, 19825);
    assert_int_equal(run.arms[1].r[1].pid, 19830);
    assert_int_equal(run.quality.nshapes * run.quality.noutputs, 4);
    bk_run_free(&run);
    if (read_edited(unknown_binary_digest, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(run.binary_digest, "unknown");
    bk_run_free(&run);
    /* the version that ran it, which the header shows (not this build's) */
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(run.version, "0.1.0");
    bk_run_free(&run);
    if (read_edited(version_other, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(run.version, "0.0.9-rc1");
    bk_run_free(&run);
}

/* `wire` is read back for the report's wire lines (bracket score prints them as the run
 * did): the fixture's counts (from before the repeat counts: 0), the repeats of a run whose
 * connections broke, none at all; each malformed count named by its path. */
static void test_wire(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.wire.accepted, 54);
    assert_int_equal(run.wire.repeated + run.wire.repeated_tensors + run.wire.repeated_hellos, 0);
    for (int i = 0; i < BK_REJ_COUNT; i++)
        assert_int_equal(run.wire.rejected[i], 0);
    bk_run_free(&run);
    if (read_edited(wire_repeats, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.wire.accepted, 54);
    assert_int_equal(run.wire.repeated, 12);
    assert_int_equal(run.wire.repeated_tensors, 2);
    assert_int_equal(run.wire.repeated_hellos, 1);
    assert_int_equal(run.wire.rejected[BK_REJ_BAD_FIELD], 3);
    assert_int_equal(run.wire.rejected[BK_REJ_MALFORMED], 0);
    bk_run_free(&run);
    if (read_edited(wire_absent, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.wire.accepted, 0);
    bk_run_free(&run);
    expect_bad(wire_not_object, NULL, "record.json: wire: must be an object");
    expect_bad(wire_negative, NULL, "record.json: wire.repeated_tensors: must be an integer >= 0");
    expect_bad(wire_string_count, NULL, "record.json: wire.accepted: must be an integer >= 0");
    expect_bad(wire_unknown_reason, NULL, "record.json: wire.rejected: 'too_late' is not a "
                                          "reason this bracket knows");
    expect_bad(wire_rejected_array, NULL, "record.json: wire.rejected: must be an object");
}

/* The set-up's bf16-sum warning is a function of the plan: the reader recomputes it for the
 * report (not recorded); a build without the cuda variants has none to give. */
static void test_bf16_note(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(run.sum_note, ""); /* cpu variants: no bf16 sum */
    bk_run_free(&run);
    if (read_edited(cuda_tight_tolerance, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
#ifdef BK_HAVE_CUDA
    if (!strstr(run.sum_note, "the incumbent nccl_then_rmsnorm sums the ranks' x in bf16"))
        fail_msg("no bf16 note: '%s'", run.sum_note);
#else
    assert_string_equal(run.sum_note, "");
#endif
    bk_run_free(&run);
}

static void test_shared_lanes(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    edit_fn edits[] = { policy_shared, c_on_b_ranks };
    for (int i = 0; i < 2; i++) {
        if (read_edited(edits[i], NULL, &run, &err) != BK_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(run.shared_lanes, 1);
        bk_run_free(&run);
    }
    /* lanes that are one are shared whatever the policy says; C on one of B's two ranks is not */
    if (read_edited(lanes_equal, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.shared_lanes, 1);
    bk_run_free(&run);
    if (read_edited(c_on_0_and_3, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.shared_lanes, 0);
    bk_run_free(&run);
}

/* arms reordered: C's arm at B's place (and B's at C's) */
static void arms_swapped(json_t *r)
{
    json_t *arms = json_object_get(r, "arms"), *b = json_incref(arm(r, 0));
    json_array_set(arms, 0, arm(r, 1));
    json_array_set_new(arms, 1, b);
}
static void name_missing(json_t *r) { json_object_del(arm(r, 4), "name"); }
/* the lane says C sat on MPI rank 5 where its process says 2 */
static void lane_other_rank(json_t *r)
{
    json_array_set_new(json_object_get(arm(r, 1), "lane"), 0, json_integer(5));
}
static void lane_rank_string(json_t *r)
{
    json_array_set_new(json_object_get(arm(r, 2), "lane"), 1, json_string("1"));
}
/* B's two processes swapped: lane rank 1 first */
static void procs_swapped(json_t *r)
{
    json_t *procs = json_object_get(arm(r, 0), "processes"), *p0 = json_incref(proc(r, 0, 0));
    json_array_set(procs, 0, proc(r, 0, 1));
    json_array_set_new(procs, 1, p0);
}
static void round_two_of_one(json_t *r)
{
    json_object_set_new(proc(r, 3, 1), "round", json_integer(2));
}
static void lane_rank_missing(json_t *r) { json_object_del(proc(r, 1, 1), "lane_rank"); }
/* B in two rounds, its processes repeated with their rounds written: read as far as the
 * samples (one round's), so the rounds and lane ranks in place pass the form check */
static void two_rounds_marked(json_t *r)
{
    json_t *procs = json_object_get(arm(r, 0), "processes");
    json_object_set_new(arm(r, 0), "rounds", json_integer(2));
    for (int k = 0; k < 2; k++) {
        json_t *p = json_deep_copy(json_array_get(procs, (size_t)k));
        json_object_set_new(json_array_get(procs, (size_t)k), "round", json_integer(1));
        json_object_set_new(p, "round", json_integer(2));
        json_array_append_new(procs, p);
    }
}

static void routed_set(json_t *r, const char *json)
{
    json_object_set_new(proc(r, 1, 1), "routed_shapes", json_loads(json, 0, NULL));
}
static void routed_string(json_t *r) { json_object_set_new(proc(r, 1, 1), "routed_shapes", json_string("1")); }
static void routed_past(json_t *r) { routed_set(r, "[2]"); }
static void routed_down(json_t *r) { routed_set(r, "[1, 0]"); }
static void routed_twice(json_t *r) { routed_set(r, "[1, 1]"); }
static void routed_negative(json_t *r) { routed_set(r, "[-1]"); }
/* C's rank 1 says it served shape 1 with the incumbent: shm_oneshot_fused serves both of the
 * fixture's shapes, so the arm is judged failed again (the record says ok) */
static void routed_one(json_t *r) { routed_set(r, "[1]"); }
static void routed_none(json_t *r) { routed_set(r, "[]"); }
/* the run's catalog routed shape 1 to the incumbent (its routing.shapes says so) */
static void run_routed_1(json_t *r)
{
    json_t *sh = json_array_get(json_object_get(json_object_get(r, "routing"), "shapes"), 1);
    json_object_set_new(sh, "served_by", json_string("shm_twopass"));
    routed_set(r, "[1]");
}
static void routing_absent(json_t *r) { json_object_del(r, "routing"); }

/* routed_shapes: absent (the fixture: from before it) or the ascending indexes of shapes,
 * each once; read into the process's routing, judged again with the arm */
static void test_routed_shapes(void **state)
{
    (void)state;
    const char *form = "record.json: arms[1].processes[1].routed_shapes";
    expect_bad(routed_string, NULL, "record.json: arms[1].processes[1].routed_shapes: must be an "
                                    "array of shape indexes");
    expect_bad(routed_past, NULL, "record.json: arms[1].processes[1].routed_shapes[0]: must be a "
                                  "shape index in 0..1, ascending, each once");
    expect_bad(routed_down, NULL, form);
    expect_bad(routed_twice, NULL, form);
    expect_bad(routed_negative, NULL, form);
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(routed_one, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_true(run.arms[1].r[1].routed_known && run.arms[1].r[1].routed == 2);
    assert_false(run.arms[1].r[0].routed_known);
    bk_arm_run again = run.arms[1];
    again.ok = 1;
    bk_run_judge_arm(&run, &again);
    assert_int_equal(again.ok, 0);
    assert_non_null(strstr(again.reason, "engine served shape(s) 1 with the incumbent; the "
                                         "variant's domain routes none"));
    bk_run_free(&run);
    if (read_edited(routed_none, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_true(run.arms[1].r[1].routed_known && run.arms[1].r[1].routed == 0);
    assert_true(run.cand_routed_known && run.cand_routed == 0); /* both shapes the candidate's */
    bk_run_free(&run);
    /* the routing a record is judged by is its run's (routing.shapes), not this build's
     * catalog, which has shm_oneshot_fused serve both shapes */
    if (read_edited(run_routed_1, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_true(run.cand_routed_known && run.cand_routed == 2);
    /* and the report's share of the weight is the run's: shape 0's 0.5, not the 1.0 of
     * this build's catalog */
    assert_true(run.routing_share == 0.5);
    again = run.arms[1];
    again.ok = 1;
    bk_run_judge_arm(&run, &again);
    assert_int_equal(again.ok, 1);
    bk_run_free(&run);
    /* no routing recorded: the routing is not judged, the share is this build's catalog's */
    if (read_edited(routing_absent, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.cand_routed_known, 0);
    assert_true(run.routing_share == 1.0);
    bk_run_free(&run);
}

static void hello_string(json_t *r) { json_object_set_new(proc(r, 1, 1), "hello", json_string("yes")); }
/* C's rank 1 never said hello (and was killed after rank 0 failed at the rendezvous) */
static void c_rank1_no_hello(json_t *r)
{
    json_t *p0 = proc(r, 1, 0), *p1 = proc(r, 1, 1);
    json_object_set_new(p0, "hello", json_true());
    json_object_set_new(p0, "exit_code", json_integer(1));
    json_object_set_new(p0, "status_ok", json_false());
    json_object_set_new(p0, "status_message", json_string("rendezvous: no answer"));
    json_object_set_new(p1, "hello", json_false());
    json_object_set_new(p1, "killed", json_true());
    json_object_set_new(p1, "signal", json_integer(15));
    json_object_set_new(p1, "exit_code", json_integer(143));
}

/* hello: absent (the fixture: from before it) reads as said; else true or false, read into
 * the process and judged again with the arm: a rank that never said hello, killed after its
 * peer failed at the rendezvous, is named */
static void test_hello(void **state)
{
    (void)state;
    expect_bad(hello_string, NULL, "record.json: arms[1].processes[1]: hello: must be true or "
                                   "false, got a string");
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    for (int i = 0; i < 2; i++)
        assert_int_equal(run.arms[1].r[i].hello, 1);
    bk_run_free(&run);
    if (read_edited(c_rank1_no_hello, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.arms[1].r[0].hello, 1);
    assert_int_equal(run.arms[1].r[1].hello, 0);
    bk_arm_run again = run.arms[1];
    again.ok = 1;
    bk_run_judge_arm(&run, &again);
    assert_int_equal(again.ok, 0);
    if (!strstr(again.reason, "arm C lane rank 1 (") ||
        !strstr(again.reason, "never said hello to the rendezvous"))
        fail_msg("reason: %s", again.reason);
    bk_run_free(&run);
}

static void status_escape(json_t *r)
{
    json_object_set_new(proc(r, 1, 0), "status_message", json_string("x\x1b[2J\x1b[Hverdict: PASS"));
}
static void reason_newline(json_t *r) { json_object_set_new(arm(r, 2), "reason", json_string("a\nb")); }
static void host_c1(json_t *r) { json_object_set_new(proc(r, 0, 1), "host", json_string("h\xc2\x9b" "2J")); }
static void key_bell(json_t *r) { json_object_set_new(r, "note\x07", json_string("")); }
static void tab_in_reason(json_t *r) { json_object_set_new(arm(r, 2), "reason", json_string("a\tb")); }
static void plan_key_del(json_t *r)
{
    json_object_set_new(json_object_get(json_object_get(r, "plan"), "arena"), "x\x7f",
                        json_integer(1));
}

/* `bracket score` prints a record's text as it is: a control character in it (an escape
 * sequence, a line of its own) is refused, naming where; bracket writes none */
static void test_control_chars(void **state)
{
    (void)state;
    expect_bad(status_escape, NULL, "record.json: arms[1].processes[0].status_message: a "
                                    "control character (byte 0x1b at offset 1): bracket "
                                    "records none (a tab aside)");
    expect_bad(reason_newline, NULL, "record.json: arms[2].reason: a control character (byte "
                                     "0x0a at offset 1)");
    expect_bad(host_c1, NULL, "record.json: arms[0].processes[1].host: a control character "
                              "(byte 0xc2 at offset 1)");
    expect_bad(key_bell, NULL, "record.json: a top-level key: a control character (byte 0x07 "
                               "at offset 4)");
    expect_bad(plan_key_del, NULL, "record.json: plan.arena (a key): a control character (byte "
                                   "0x7f at offset 1)");
    /* a tab is text (records before 2026-12-07 may hold one: a plan's, an MPI's version) */
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(tab_in_reason, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_run_free(&run);
}

/* The record's writer: text from outside that is not printable UTF-8 (an engine's status
 * relayed by an older path, a library's message) is written made printable, byte for byte,
 * never left out (jansson makes no string of bytes that are not UTF-8: the process's entry
 * was then missing and no reader took the record) */
static void test_writer_text(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_arm_run *c = &run.arms[1];
    snprintf(c->r[0].status_msg, sizeof c->r[0].status_msg, "open /tmp/caf\xe9: no\x1b[2J");
    snprintf(c->r[1].settings, sizeof c->r[1].settings, "NCCL_X=a\tb\nc");
    snprintf(c->r[1].host, sizeof c->r[1].host, "h\xc2\x9b");
    snprintf(c->reason, sizeof c->reason, "cut \xe2\x82");
    snprintf(c->r[0].host, sizeof c->r[0].host, "tab\there"); /* a tab alone is text: kept */
    json_t *o = bk_record_arm_json(&run, &sc, 1);
    assert_non_null(o);
    json_t *procs = json_object_get(o, "processes");
    assert_int_equal(json_array_size(procs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(procs, 0),
                                                          "status_message")),
                        "open /tmp/caf?: no?[2J");
    assert_string_equal(json_string_value(json_object_get(json_array_get(procs, 1),
                                                          "engine_settings")), "NCCL_X=a b c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(procs, 1), "host")),
                        "h??");
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "cut ??");
    assert_string_equal(json_string_value(json_object_get(json_array_get(procs, 0), "host")),
                        "tab\there");
    char where[256] = "";
    long at;
    unsigned char byte;
    assert_int_equal(bk_json_control_in(o, where, sizeof where, &at, &byte), 0);
    json_decref(o);
    bk_run_free(&run);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 17];
    *len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(*len > 0 && *len < sizeof buf);
    char *copy = malloc(*len);
    assert_non_null(copy);
    memcpy(copy, buf, *len);
    return copy;
}

/* Write run (with score sc) as a record in a new folder g_dir/name; rpath and spath (1024
 * bytes each) its record.json and samples.msgpack. */
static void write_run(bk_run *run, const bk_score *sc, const char *name, char *rpath,
                      char *spath)
{
    bk_err err = { 0 };
    snprintf(run->run_dir, sizeof run->run_dir, "%s/%s", g_dir, name);
    assert_int_equal(mkdir(run->run_dir, 0700), 0);
    if (bk_record_write(run, sc, &err) != BK_OK)
        fail_msg("%s", err.msg);
    snprintf(rpath, 1024, "%s/record.json", run->run_dir);
    snprintf(spath, 1024, "%s/samples.msgpack", run->run_dir);
}

/* ... and remove it again */
static void remove_run(const bk_run *run, const char *rpath, const char *spath)
{
    unlink(rpath);
    unlink(spath);
    rmdir(run->run_dir);
}

/* record.json and samples.msgpack replace theirs together: a record that cannot be written
 * whole (here: past a file-size limit that the samples fit under) leaves the pair that was
 * there as it was, not new samples beside the old record (which then no longer rescored,
 * though the run said the unfinished record "remains"), and no temporary file */
static void test_pair_replaced_together(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    char rpath[1024], spath[1024];
    write_run(&run, &sc, "pair", rpath, spath);
    size_t rlen, slen;
    char *r0 = slurp(rpath, &rlen), *s0 = slurp(spath, &slen);
    const rlim_t limit = 8192;
    assert_true(slen + 64 < limit && rlen > limit); /* the samples fit, the record does not */
    run.arms[0].r[0].ns[0][0] += 1; /* new samples */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = limit;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    bk_err werr = { 0 };
    const bk_status st = bk_record_write(&run, &sc, &werr);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    assert_int_not_equal(st, BK_OK);
    if (!strstr(werr.msg, "record.json: File too large"))
        fail_msg("%s", werr.msg);
    size_t rlen1, slen1;
    char *r1 = slurp(rpath, &rlen1), *s1 = slurp(spath, &slen1);
    assert_true(rlen1 == rlen && memcmp(r0, r1, rlen) == 0);
    assert_true(slen1 == slen && memcmp(s0, s1, slen) == 0);
    DIR *d = opendir(run.run_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    assert_int_equal(n, 2); /* no temporary file left */
    remove_run(&run, rpath, spath);
    free(r0);
    free(s0);
    free(r1);
    free(s1);
    bk_run_free(&run);
}

/* A failed arm whose batches came out of order (sent again after a broken connection: slots
 * 10-19 of B rank 0 shape 0 never arrived, 20-99 did): its block holds every sample that
 * arrived, in its slot, and reads back so. The writer before 2026-12-08 wrote the first N
 * slots, N the samples of the shape that arrived (90), marks among them, and lost slots
 * 90-99; such a block (the fixture's first, cut so) still reads. */
static void test_failed_arm_gaps(void **state)
{
    (void)state;
    bk_run run, back;
    bk_err err = { 0 };
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_arm_run *b = &run.arms[0];
    bk_rank_data *d = &b->r[0];
    const uint64_t last = d->ns[0][99];
    assert_true(last != UINT64_MAX && d->ns_seen[0] == 100);
    for (int i = 10; i < 20; i++)
        d->ns[0][i] = UINT64_MAX;
    d->ns_seen[0] -= 10;
    d->samples_got -= 10;
    d->proc.exit_code = 1;
    b->ok = 0;
    snprintf(b->reason, sizeof b->reason, "rank 0: samples missing");
    char rpath[1024], spath[1024];
    write_run(&run, &sc, "gaps", rpath, spath);
    memset(&back, 0, sizeof back);
    if (bk_record_read(rpath, &back, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_rank_data *e = &back.arms[0].r[0];
    assert_false(back.arms[0].ok);
    assert_int_equal(e->ns_seen[0], 90);
    assert_int_equal(e->samples_got, d->samples_got);
    for (int i = 0; i < 100; i++)
        if (e->ns[0][i] != d->ns[0][i])
            fail_msg("slot %d: read %llu, written %llu", i, (unsigned long long)e->ns[0][i],
                     (unsigned long long)d->ns[0][i]);
    assert_int_equal(e->ns[0][99], last);
    bk_run_free(&back);
    /* the old writer's block: the first 90 slots, 10 of them marks */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    size_t len;
    char *all = slurp(spath, &len), *at = all;
    size_t skip = 0, blk = 0, bad = 0;
    const char *why = NULL;
    assert_int_equal(bk_wire_scan_next(all, len, &skip, &why, &bad), 0);
    assert_int_equal(bk_wire_scan_next(all + skip, len - skip, &blk, &why, &bad), 0);
    msgpack_sbuffer_write(&sb, at, skip); /* the header */
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "arm", 3);
    msgpack_pack_str_with_body(&pk, "B", 1);
    msgpack_pack_str_with_body(&pk, "round", 5);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_str_with_body(&pk, "rank", 4);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_str_with_body(&pk, "shape", 5);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_str_with_body(&pk, "ns", 2);
    msgpack_pack_array(&pk, 90);
    for (int i = 0; i < 90; i++)
        msgpack_pack_uint64(&pk, d->ns[0][i]);
    msgpack_sbuffer_write(&sb, at + skip + blk, len - skip - blk);
    FILE *f = fopen(spath, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(sb.data, 1, sb.size, f), sb.size);
    fclose(f);
    free(all);
    msgpack_sbuffer_destroy(&sb);
    /* read as before (bk_record_read leaves the samples' digest to `bracket score`) */
    memset(&back, 0, sizeof back);
    if (bk_record_read(rpath, &back, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(back.arms[0].r[0].ns_seen[0], 80);
    assert_int_equal(back.arms[0].r[0].ns[0][89], d->ns[0][89]);
    assert_int_equal(back.arms[0].r[0].ns[0][90], UINT64_MAX);
    bk_run_free(&back);
    remove_run(&run, rpath, spath);
    bk_run_free(&run);
}

/* Each arm is read by its place, each process by its place in the arm, and the lane names
 * the MPI ranks the processes sat on: a record that says otherwise was reordered or edited. */
static void test_places(void **state)
{
    (void)state;
    expect_bad(arms_swapped, NULL, "record.json: arms[0].name: must be \"B\" (the arms are B, "
                                   "C, B', A, T in that order), got \"C\"");
    expect_bad(name_missing, NULL, "record.json: arms[4]: name: missing");
    expect_bad(lane_other_rank, NULL, "record.json: arms[1].lane[0]: must be the MPI rank its "
                                      "process sat on, 2 (arms[1].processes[0].mpi_rank)");
    expect_bad(lane_rank_string, NULL, "record.json: arms[2].lane[1]: must be the MPI rank its "
                                       "process sat on, 1");
    expect_bad(procs_swapped, NULL, "record.json: arms[0].processes[0]: round 1, lane_rank 1; "
                                    "its place says round 1, lane_rank 0");
    expect_bad(round_two_of_one, NULL, "record.json: arms[3].processes[1]: round 2, lane_rank 1; "
                                       "its place says round 1, lane_rank 1");
    expect_bad(lane_rank_missing, NULL, "record.json: arms[1].processes[1]: lane_rank: missing");
    expect_bad(two_rounds_marked, NULL, "samples.msgpack: no sample block for arm B round 2 "
                                        "rank 0 shape 0");
}

static void test_bad_fields(void **state)
{
    (void)state;
    expect_bad(short_binary_digest, NULL, "record.json: identity.binary_digest: "
                                          "'sha256:f35572d4' is neither");
    expect_bad(audit_two_rounds, NULL, "record.json: arms[3] (A): rounds 1..16 (1 for an "
                                       "audit)");
    expect_bad(broke_but_ok, NULL, "record.json: arms[1].processes[0]: sample counts must be "
                                   ">= 0, and an engine that broke its contract cannot have "
                                   "status_ok");
    expect_bad(fewer_received, NULL, "samples.msgpack: arm B round 1 rank 1: its sample blocks "
                                     "hold 200 sample(s), the record's arms[0].processes[1]."
                                     "samples_received says 199");
    expect_bad(tensor_wrong_shape, NULL, "record.json: quality.tensors[1]: shape 0 tensor");
    expect_bad(tensors_short, NULL, "record.json: quality.tensors: 3 entries; the plan's 2 "
                                    "shape(s) x 2 output(s)");
}

/* What a validator relies on a reader to refuse, each named by its field or arm. */
static void test_bad_forms(void **state)
{
    (void)state;
    expect_bad(record_schema_2, NULL, "record.json: schema: 'bracket.record/2' is not "
                                      "bracket.record/1");
    /* the schema first, each way it can be wrong said as it is */
    expect_bad(schema_number, NULL, "record.json: schema: must be a string (bracket.record/1)");
    expect_bad(schema_gone, NULL, "record.json: schema: missing (bracket.record/1)");
    expect_bad(schema_plan, NULL, "record.json: schema: 'bracket.plan/1' is not bracket.record/1 "
                                  "(this is a plan, not a run's record)");
    expect_bad(long_binary_digest, NULL, "record.json: identity.binary_digest: 'sha256:0000");
    expect_bad(nonhex_binary_digest, NULL, "record.json: identity.binary_digest: 'sha256:gggg");
    expect_bad(tensor_renamed, NULL, "record.json: quality.tensors[0]: shape 0 tensor 'out' "
                                     "expected");
    expect_bad(negative_mismatches, NULL, "record.json: quality.tensors[0]: shape 0 tensor 'out' "
                                          "expected (counts >= 0)");
    expect_bad(zero_rounds, NULL, "record.json: arms[0] (B): rounds 1..16");
    expect_bad(extra_process, NULL, "record.json: arms[0] (B): rounds 1..16 (1 for an audit), and "
                                    "processes must hold rounds x lane entries");
    expect_bad(negative_sent, NULL, "record.json: arms[0].processes[0]: sample counts must be "
                                    ">= 0");
    expect_bad(six_arms, NULL, "record.json: arms: must be an array of 5 arms");
    expect_bad(c_runs_incumbent, NULL, "record.json: arms[1] (C): ran 'shm_twopass' on 2 rank(s); "
                                       "the record's plan says 'shm_oneshot_fused'");
    /* 16 rounds is a record's to hold: read, it is the missing second round that is refused */
    expect_bad(sixteen_rounds, NULL, "samples.msgpack: no sample block for arm B round 2 rank 0 "
                                     "shape 0");
    /* the samples of an arm the record says did not run are not the record's */
    expect_bad(bp_not_run, NULL, "(arm 'B'') does not fit the record");
    expect_bad(ran_string, NULL, "record.json: arms[0]: ran: must be true or false, got a "
                                 "string");
    expect_bad(host_integer, NULL, "record.json: arms[0].processes[1]: host: must be a string, "
                                   "got an integer");
    expect_bad(variant_missing, NULL, "record.json: arms[1] (C): variant: missing");
    expect_bad(max_abs_string, NULL, "record.json: quality.tensors[2]: max_abs_err: must be a "
                                     "number, got a string");
    expect_bad(lanes_missing, NULL, "record.json: lanes: missing");
    expect_bad(quality_array, NULL, "record.json: quality: must be an object, got an array");
    expect_bad(lanes_huge, NULL, "record.json: lanes.size: must be an integer in 0..1024");
    const char *ver = "record.json: bracket_version: must be a version string of 1 to 31 "
                      "printable ASCII characters, no space";
    expect_bad(version_missing, NULL, ver);
    /* a timed arm marked an audit escaped its sample-count check (a short B read as whole) */
    expect_bad(b_as_audit, NULL, "record.json: arms[0] (B): audit: must be false (arms B, C and "
                                 "B' are timed, A and T audits)");
    expect_bad(t_timed, NULL, "record.json: arms[4] (T): audit: must be true");
    /* read as absent, a note of another type let --strict pass the record */
    expect_bad(note_not_string, NULL, "record.json: identity.source_digest_note: must be a "
                                      "string (or absent), got true");
    /* the recorded plan's own errors name it as the plan in the record */
    expect_bad(plan_iters_zero, NULL, "the plan in ");
    expect_bad(plan_iters_zero, NULL, "/record.json: workload.iters: ");
    expect_bad(version_spaced, NULL, ver);
    expect_bad(version_number, NULL, ver);
}

/* One more sample block {arm, rank, shape, ns: [5], round when > 0} after the fixture's. */
static void block(msgpack_sbuffer *sb, const char *armname, int round)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, round ? 5 : 4);
    msgpack_pack_str_with_body(&pk, "arm", 3);
    msgpack_pack_str_with_body(&pk, armname, strlen(armname));
    msgpack_pack_str_with_body(&pk, "rank", 4);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_str_with_body(&pk, "shape", 5);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_str_with_body(&pk, "ns", 2);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 5);
    if (round) {
        msgpack_pack_str_with_body(&pk, "round", 5);
        msgpack_pack_uint64(&pk, (uint64_t)round);
    }
}

/* A block {arm B, rank 0, shape, ns: n samples of 5, the last one `last`} after the fixture's. */
static void block_of_u(msgpack_sbuffer *sb, uint64_t shape, uint32_t n, uint64_t last,
                       int last_unsigned);
static void block_of(msgpack_sbuffer *sb, uint64_t shape, uint32_t n, int64_t last)
{
    block_of_u(sb, shape, n, (uint64_t)last, 0);
}
/* ... its last sample packed as an unsigned integer when last_unsigned */
static void block_of_u(msgpack_sbuffer *sb, uint64_t shape, uint32_t n, uint64_t last,
                       int last_unsigned)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    msgpack_pack_str_with_body(&pk, "arm", 3);
    msgpack_pack_str_with_body(&pk, "B", 1);
    msgpack_pack_str_with_body(&pk, "rank", 4);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_str_with_body(&pk, "shape", 5);
    msgpack_pack_uint64(&pk, shape);
    msgpack_pack_str_with_body(&pk, "ns", 2);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i + 1 < n; i++)
        msgpack_pack_uint64(&pk, 5);
    if (last_unsigned)
        msgpack_pack_uint64(&pk, last);
    else
        msgpack_pack_int64(&pk, (int64_t)last);
}

/* A block of arm `armname` and `round` appended to the fixture's samples is refused, saying
 * `want` */
static void expect_bad_block(const char *armname, int round, const char *want)
{
    msgpack_sbuffer sb;
    block(&sb, armname, round);
    expect_bad(NULL, &sb, want);
    msgpack_sbuffer_destroy(&sb);
}

static void test_foreign_blocks(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    /* an audit arm keeps no samples; a round past the arm's rounds is not the record's */
    expect_bad_block("A", 0, "samples.msgpack: the sample block at byte 5201 (arm 'A') does "
                             "not fit the record");
    expect_bad_block("B", 2, "samples.msgpack: the sample block at byte 5201 (arm 'B') does "
                             "not fit the record");
    expect_bad_block("B", 1, "samples.msgpack: a second sample block for arm B round 1 rank 0 "
                             "shape 0 (at byte 5201)");
    /* a shape past the plan's two, a block of more samples than iters (100): refused before
     * they are taken for a second block */
    block_of(&sb, 2, 1, 5);
    expect_bad(NULL, &sb, "samples.msgpack: the sample block at byte 5201 (arm 'B') does not "
                          "fit the record");
    msgpack_sbuffer_destroy(&sb);
    block_of(&sb, 0, 101, 5);
    expect_bad(NULL, &sb, "samples.msgpack: the sample block at byte 5201 (arm 'B') does not "
                          "fit the record");
    msgpack_sbuffer_destroy(&sb);
    /* the arm's name as the file has it, made printable (an escape sequence would reach the
     * terminal), or said to be missing (was "arm ''") */
    expect_bad_block("\x1b[2J", 1, "samples.msgpack: the sample block at byte 5201 (arm "
                                   "'?[2J') does not fit the record");
    expect_bad_block("ABCDEFGHIJ", 1, "samples.msgpack: the sample block at byte 5201 (arm "
                                      "'ABCDEFGHIJ') does not fit the record");
    expect_bad_block("0123456789abcdefXYZ", 1, "samples.msgpack: the sample block at byte 5201 "
                                               "(arm '0123456789abcdef...') does not fit the "
                                               "record");
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str(&pk, 5);
    msgpack_pack_str_body(&pk, "shape", 5);
    msgpack_pack_uint64(&pk, 0);
    expect_bad(NULL, &sb, "samples.msgpack: the sample block at byte 5201 (no arm name) does "
                          "not fit the record");
    msgpack_sbuffer_destroy(&sb);
}

/* B rank 0 shape 0's block replaced by one of the same 100 samples, one of them negative: the
 * counts agree with the record, the sample is still not a time */
static void test_negative_sample(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    block_of(&sb, 0, 100, 5); /* as the fixture's, in form: reads */
    g_drop_first = 1;
    bk_run run;
    bk_err err = { 0 };
    bk_status st = read_edited(NULL, &sb, &run, &err);
    msgpack_sbuffer_destroy(&sb);
    if (st != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(run.arms[0].r[0].ns[0][99], 5);
    bk_run_free(&run);
    block_of(&sb, 0, 100, -1);
    expect_bad(NULL, &sb, "samples.msgpack: arm B: a sample is not an unsigned integer");
    msgpack_sbuffer_destroy(&sb);
    /* the mark of a sample that never arrived, in an arm that ended well: not a time */
    block_of_u(&sb, 0, 100, UINT64_MAX, 1);
    g_drop_first = 1;
    expect_bad(NULL, &sb, "samples.msgpack: arm B round 1 rank 0 shape 0: sample 99 is 2^64 - 1, "
                          "the mark of one that never arrived, in an arm that ended well");
    msgpack_sbuffer_destroy(&sb);
}

/* A record named without a folder (`bracket score record.json`) has its samples beside it, in
 * the working directory. */
static void test_relative_path(void **state)
{
    (void)state;
    bk_run run;
    bk_err err = { 0 };
    if (read_edited(NULL, NULL, &run, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_run_free(&run);
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    memset(&run, 0, sizeof run);
    bk_status st = bk_record_read("record.json", &run, &err);
    assert_int_equal(chdir(cwd), 0);
    if (st != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(run.run_dir, ".");
    bk_run_free(&run);
    /* a link to the record elsewhere: the samples read are the ones beside the record it
     * names (here the only ones), not beside the link */
    char other[512], link[600], rec[600];
    snprintf(other, sizeof other, "%s/elsewhere", g_dir);
    assert_int_equal(mkdir(other, 0700), 0);
    snprintf(link, sizeof link, "%s/record.json", other);
    snprintf(rec, sizeof rec, "%s/record.json", g_dir);
    assert_int_equal(symlink(rec, link), 0);
    memset(&run, 0, sizeof run);
    st = bk_record_read(link, &run, &err);
    unlink(link);
    rmdir(other);
    if (st != BK_OK)
        fail_msg("%s", err.msg);
    char *real = realpath(g_dir, NULL); /* malloc'ed: a buffer must be PATH_MAX (fortify) */
    assert_non_null(real);
    assert_string_equal(run.run_dir, real);
    free(real);
    bk_run_free(&run);
}

/* The samples header {schema, run, nshapes, iters} must match the record's plan. */
static void header(msgpack_sbuffer *sb, const char *schema, const char *run, uint64_t nshapes,
                   uint64_t iters)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    msgpack_pack_str_with_body(&pk, "schema", 6);
    msgpack_pack_str_with_body(&pk, schema, strlen(schema));
    msgpack_pack_str_with_body(&pk, "run", 3);
    msgpack_pack_str_with_body(&pk, run, strlen(run));
    msgpack_pack_str_with_body(&pk, "nshapes", 7);
    msgpack_pack_uint64(&pk, nshapes);
    msgpack_pack_str_with_body(&pk, "iters", 5);
    msgpack_pack_uint64(&pk, iters);
}

/* A NUL byte in record.json, inside it or after its end, is named with its offset: jansson
 * stops at one as at the end of the file ("string or '}' expected near end of file", or
 * "end of file expected near end of file" after the record's last brace). */
static void test_nul_byte(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    bk_err err = { 0 };
    assert_int_equal(bk_read_file(src("record.json"), &text, &len, &err), BK_OK);
    const size_t at[2] = { len / 2, len }; /* inside the record, then after it */
    char path[512];
    snprintf(path, sizeof path, "%s/record.json", g_dir);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(text, 1, at[i], f), at[i]);
        assert_int_equal(fputc('\0', f), 0);
        assert_int_equal(fwrite(text + at[i], 1, len - at[i], f), len - at[i]);
        assert_int_equal(fclose(f), 0);
        bk_run run;
        memset(&run, 0, sizeof run);
        bk_err_clear(&err);
        assert_int_equal(bk_record_read(path, &run, &err), BK_ERR_INPUT);
        char want[600];
        snprintf(want, sizeof want, "%s: a NUL byte at offset %zu (a record is JSON text",
                 path, at[i]);
        if (!strstr(err.msg, want))
            fail_msg("expected \"%s\" in \"%s\"", want, err.msg);
    }
    /* an editor's byte order mark before the record: named, not quoted as an invisible
     * character jansson did not expect */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("\xEF\xBB\xBF", 1, 3, f), 3);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    bk_run run;
    memset(&run, 0, sizeof run);
    bk_err_clear(&err);
    assert_int_equal(bk_record_read(path, &run, &err), BK_ERR_INPUT);
    char want[800];
    snprintf(want, sizeof want, "%s:1:1: starts with a UTF-8 byte order mark (bytes EF BB BF), "
             "which JSON does not allow (a record is JSON text)", path);
    if (!strstr(err.msg, want))
        fail_msg("expected \"%s\" in \"%s\"", want, err.msg);
    free(text);
}

static void test_samples_header(void **state)
{
    (void)state;
    json_error_t je;
    json_t *rec = json_load_file(src("record.json"), 0, &je);
    assert_non_null(rec);
    char run[128];
    snprintf(run, sizeof run, "%s", json_string_value(json_object_get(rec, "run_id")));
    json_decref(rec);
    msgpack_sbuffer sb;
    bk_run r;
    bk_err err = { 0 };
    header(&sb, "bracket.samples/1", run, 2, 100); /* as the fixture's: reads */
    g_header = &sb;
    if (read_edited(NULL, NULL, &r, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_run_free(&r);
    msgpack_sbuffer_destroy(&sb);
    header(&sb, "bracket.samples/1", run, 3, 100);
    expect_bad(NULL, NULL, "samples.msgpack: header: nshapes 3, the record's plan says 2");
    msgpack_sbuffer_destroy(&sb);
    header(&sb, "bracket.samples/1", run, 2, 101);
    expect_bad(NULL, NULL, "samples.msgpack: header: iters 101, the record's plan says 100");
    msgpack_sbuffer_destroy(&sb);
    header(&sb, "bracket.samples/1", "another-run", 2, 100);
    expect_bad(NULL, NULL, "samples.msgpack: not the samples of run");
    msgpack_sbuffer_destroy(&sb);
    header(&sb, "bracket.samples/2", run, 2, 100);
    expect_bad(NULL, NULL, "samples.msgpack: header: schema is not bracket.samples/1");
    msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_reads),
        cmocka_unit_test(test_shared_lanes),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_bf16_note),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_places),
        cmocka_unit_test(test_routed_shapes),
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_foreign_blocks),
        cmocka_unit_test_teardown(test_samples_header, plain_samples),
        cmocka_unit_test(test_bad_forms),
        cmocka_unit_test(test_control_chars),
        cmocka_unit_test(test_writer_text),
        cmocka_unit_test(test_pair_replaced_together),
        cmocka_unit_test(test_failed_arm_gaps),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test_teardown(test_negative_sample, plain_samples),
        cmocka_unit_test(test_relative_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
