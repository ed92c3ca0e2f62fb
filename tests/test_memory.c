/* test_memory.c - rank 0's peak bytes for a plan, worked by hand for the it-cpu fixture,
 * split into samples and audit outputs for the refusal's advice, and the memory this host
 * and cgroup still have (live, and from meminfo and cgroup v1/v2 files in a scratch folder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/memory.h"
#include "runner/wire.h"

static uint64_t peak(const char *const *sets, int nsets)
{
    const char *d = getenv("BK_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/plans/it-cpu.json",
             d && d[0] ? d : BK_SOURCE_DIR);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_load(path, sets, nsets, &p, &err), BK_OK);
    uint64_t b = bk_rank0_peak_bytes(&p);
    bk_plan_free(&p);
    return b;
}

/* it-cpu: 2 shapes (1 and 8 tokens x 4096), 300 iterations, lanes of 2 (tp 2).
 * Audit outputs (out, residual_out; bf16) of A and T from 2 lane ranks:
 * 2 arms x 2 ranks x 2 outputs x (4096 + 32768) x 2 B = 589824 B. */
static void test_peak_by_hand(void **state)
{
    (void)state;
    /* one round: slots 8 B x 2 ranks x 600 x (3 + 2 arms) = 48000; the scorer's
     * 72 B x 600 = 43200 beats the packed file's 10 B x 2 x 600 x 3 = 36000 */
    assert_int_equal(peak(NULL, 0), 48000 + 43200 + 589824);
    /* 4 rounds: slots 8 x 2 x 600 x 14 = 134400; scorer 72 x 600 x 4 = 172800 beats
     * the packed file's 10 x 2 x 600 x 12 = 144000 */
    const char *four[] = { "protocol.repeats=4" };
    assert_int_equal(peak(four, 1), 134400 + 172800 + 589824);
    /* lanes of 64, 10^7 iterations, 16 rounds: 2e7 per round; slots 8 x 64 x 2e7 x 50;
     * the packed file 10 x 64 x 2e7 x 48 beats the scorer's 72 x 2e7 x 16; outputs
     * 2 x 64 x 147456 */
    const char *big[] = { "arena.tp=64", "workload.iters=10000000", "protocol.repeats=16" };
    assert_int_equal(peak(big, 3), 512000000000ull + 614400000000ull + 18874368ull);
}

static bk_plan load(const char *const *sets, int nsets)
{
    const char *d = getenv("BK_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/plans/it-cpu.json",
             d && d[0] ? d : BK_SOURCE_DIR);
    bk_plan p;
    bk_err err = { 0 };
    assert_int_equal(bk_plan_load(path, sets, nsets, &p, &err), BK_OK);
    return p;
}

/* An audit sends each rank's output tensor of a shape in one message, of at most
 * BK_WIRE_TENSOR_MAX bytes of data: 16384 x 16384 bf16 (512 MiB) goes, 32768 x 16384 (1 GiB
 * exactly: the message's other fields push it over) does not, and the first such shape is
 * named with its output; a lane's size does not change the allreduce's [tokens, hidden]
 * outputs. Before, such a plan ran its timed arms and then found audit A's outputs missing
 * (ZeroMQ drops a message over the coordinator's limit, saying nothing). */
static void test_audit_msg_too_big(void **state)
{
    (void)state;
    char why[512] = "";
    const char *fits[] = { "workload.shapes=[{\"tokens\":16384,\"hidden\":16384,\"weight\":1}]" };
    bk_plan p = load(fits, 1);
    assert_int_equal(bk_audit_msg_too_big(&p, 2, why, sizeof why), -1);
    bk_plan_free(&p);
    const char *over[] = { "workload.shapes=[{\"tokens\":8,\"hidden\":4096,\"weight\":1},"
                           "{\"tokens\":32768,\"hidden\":16384,\"weight\":1},"
                           "{\"tokens\":65536,\"hidden\":16384,\"weight\":1}]" };
    p = load(over, 1);
    for (int world = 1; world <= 8; world *= 2) {
        assert_int_equal(bk_audit_msg_too_big(&p, world, why, sizeof why), 1);
        assert_string_equal(why, "workload.shapes[1] (tokens 32768, hidden 16384): audits A and "
                                 "T send each rank's output 'out' whole, 1.0 GiB here, and one "
                                 "message carries at most 1073737728 bytes (1 GiB, less 4 KiB "
                                 "for its other fields): give this shape fewer tokens");
    }
    bk_plan_free(&p);
    /* the limit itself: the coordinator's message limit less room for the other fields */
    assert_true(BK_WIRE_TENSOR_MAX < BK_WIRE_MSG_MAX);
    assert_true(BK_WIRE_MSG_MAX - BK_WIRE_TENSOR_MAX >= 1024);
}

/* The refusal names what holds the memory and advises on the larger part: one huge shape's
 * audit outputs are not helped by fewer iterations, many iterations not by smaller shapes. */
static void test_too_big_says_what_holds_it(void **state)
{
    (void)state;
    char msg[1024];
    /* 2^21 tokens x 1024: 2 outputs x 2^31 elements x 2 B x 2 ranks x 2 audit arms = 32 GiB,
     * the samples 300 x 2 shapes of it-cpu as by hand above, but one shape: 45600 B */
    const char *huge[] = { "workload.shapes=[{\"tokens\":4,\"hidden\":64,\"weight\":1},"
                           "{\"tokens\":2097152,\"hidden\":1024,\"weight\":1}]" };
    bk_plan p = load(huge, 1);
    bk_rank0_peak k;
    bk_rank0_peak_split(&p, &k);
    assert_int_equal(k.top_shape, 1);
    assert_int_equal(k.top_outputs, 32ull << 30);
    assert_int_equal(k.outputs, (32ull << 30) + 2 * 2 * 2 * 256 * 2);
    assert_int_equal(k.samples, 48000 + 43200);
    assert_int_equal(k.total, k.samples + k.outputs);
    assert_int_equal(bk_rank0_peak_bytes(&p), k.total);
    bk_rank0_too_big_text(&p, 1ull << 30, "its memory cgroup /sys/fs/cgroup/job_7", msg,
                          sizeof msg);
    assert_string_equal(msg, "rank 0 would hold about 32.0 GiB for this plan (89.1 KiB for the "
                             "samples of 3 timed arms x 1 round(s), lanes of 2 ranks, 2 shape(s) "
                             "x 300 iterations; 32.0 GiB for the audit outputs, every lane rank's "
                             "output tensors of each shape from arms A and T) but its memory "
                             "cgroup /sys/fs/cgroup/job_7 has 1.0 GiB available; lower tokens x hidden of the "
                             "largest shapes (workload.shapes[1], tokens 2097152 x hidden 1024, "
                             "holds 32.0 GiB of the audit outputs)");
    bk_plan_free(&p);
    /* the samples' plan of test_peak_by_hand: the advice is the iterations and rounds */
    const char *big[] = { "arena.tp=64", "workload.iters=10000000", "protocol.repeats=16" };
    p = load(big, 3);
    bk_rank0_peak_split(&p, &k);
    assert_int_equal(k.samples, 512000000000ull + 614400000000ull);
    assert_int_equal(k.outputs, 18874368ull);
    bk_rank0_too_big_text(&p, 1ull << 30, NULL, msg, sizeof msg);
    assert_non_null(strstr(msg, "rank 0 would hold about 1049.1 GiB for this plan (1049.0 GiB "
                                "for the samples of 3 timed arms x 16 round(s), lanes of 64 "
                                "ranks, 2 shape(s) x 10000000 iterations; 18.0 MiB for the "
                                "audit outputs"));
    assert_non_null(strstr(msg, "; lower workload.iters, protocol.repeats or the number of "
                                "shapes"));
    bk_plan_free(&p);
    char b[32];
    assert_string_equal(bk_mem_text(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(bk_mem_text(3u << 20, b, sizeof b), "3.0 MiB");
    assert_string_equal(bk_mem_text(5ull << 30, b, sizeof b), "5.0 GiB");
}

static void test_available(void **state)
{
    (void)state;
    uint64_t have = 0, total_kb = 0;
    int known = bk_mem_available(&have, NULL, 0);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        skip(); /* not Linux: nothing to compare with */
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %" SCNu64 " kB", &total_kb) == 1)
            break;
    fclose(f);
    assert_true(total_kb > 0);
    assert_int_equal(known, 1);
    assert_true(have > 0);
    assert_true(have <= total_kb * 1024);
}

/* Of two shapes with the same audit outputs (2^31 elements each way), the advice names the
 * first: the plan's order decides a tie, not the scan's last word. */
static void test_too_big_tie_names_the_first(void **state)
{
    (void)state;
    const char *tie[] = { "workload.shapes=[{\"tokens\":2097152,\"hidden\":1024,\"weight\":1},"
                          "{\"tokens\":1048576,\"hidden\":2048,\"weight\":1}]" };
    bk_plan p = load(tie, 1);
    bk_rank0_peak k;
    bk_rank0_peak_split(&p, &k);
    assert_int_equal(k.top_shape, 0);
    assert_int_equal(k.top_outputs, 32ull << 30);
    assert_int_equal(k.outputs, 64ull << 30);
    char msg[1024];
    bk_rank0_too_big_text(&p, 1ull << 30, NULL, msg, sizeof msg);
    assert_non_null(strstr(msg, "(workload.shapes[0], tokens 2097152 x hidden 1024, holds "
                                "32.0 GiB of the audit outputs)"));
    bk_plan_free(&p);
}

/* The units change at exactly 1 MiB and 1 GiB, not one byte past them. */
static void test_mem_text_edges(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(bk_mem_text(0, b, sizeof b), "0.0 KiB");
    assert_string_equal(bk_mem_text((1u << 20) - 512, b, sizeof b), "1023.5 KiB");
    assert_string_equal(bk_mem_text(1u << 20, b, sizeof b), "1.0 MiB");
    assert_string_equal(bk_mem_text((1ull << 30) - (1u << 19), b, sizeof b), "1023.5 MiB");
    assert_string_equal(bk_mem_text(1ull << 30, b, sizeof b), "1.0 GiB");
}


/* ---- the memory left: /proc/meminfo and the cgroups of /proc/self/cgroup, as files in a
 * scratch folder (bk__mem_available_in) ---- */

static char g_root[64];

static void put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static char g_from[256]; /* what left_in's call named as the holder */

/* What bk__mem_available_in says for the files written so far; *known its return. */
static uint64_t left_in(int *known)
{
    char meminfo[128], self[128], mounts[128];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", g_root);
    snprintf(self, sizeof self, "%s/self_cgroup", g_root);
    snprintf(mounts, sizeof mounts, "%s/mountinfo", g_root);
    uint64_t b = 0;
    *known = bk__mem_available_in(meminfo, self, mounts, &b, g_from, sizeof g_from);
    return b;
}

/* mountinfo: each line "ROOT AT FSTYPE OPTIONS" of `spec` becomes a mountinfo line for a
 * mount of ROOT at g_root/AT ("-" for AT: the line is written as is, after the fields) */
static void mounts(const char *spec)
{
    char text[4096] = "", line[512];
    const char *at = spec;
    int id = 30;
    while (*at) {
        char root[128], where[128], fstype[32], opts[128];
        size_t n = strcspn(at, "\n");
        assert_true(n < sizeof line);
        memcpy(line, at, n);
        line[n] = '\0';
        at += n + (at[n] != '\0');
        assert_int_equal(sscanf(line, "%127s %127s %31s %127s", root, where, fstype, opts), 4);
        snprintf(text + strlen(text), sizeof text - strlen(text),
                 "%d 23 0:%d %s %s%s%s rw,nosuid - %s %s rw,%s\n", id, id, root,
                 where[0] == '/' ? "" : g_root, where[0] == '/' ? "" : "/", where, fstype,
                 fstype, opts);
        id++;
    }
    put("mountinfo", text);
}

/* the usual layout: cgroup2 at g_root/cg, v1's memory controller at g_root/cg/memory, other
 * controllers beside it, and a tmpfs that is no cgroup */
static void usual_mounts(void)
{
    mounts("/ tmp tmpfs mode=755\n"
           "/ cg cgroup2 nsdelegate\n"
           "/ cg/memory cgroup memory\n"
           "/ cg/pids cgroup pids\n");
}

static int mk_root(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/bk-test-memory-XXXXXX");
    return mkdtemp(g_root) ? 0 : -1;
}

static int rm_root(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *const MEMINFO = "MemTotal:       8000000 kB\nMemFree:        1000000 kB\n"
                                   "MemAvailable:   4000000 kB\nBuffers:          10000 kB\n";

static void test_available_meminfo_only(void **state)
{
    (void)state;
    int known = -1;
    put("meminfo", MEMINFO); /* no self_cgroup file: MemAvailable alone */
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    assert_int_equal(known, 1);
    assert_string_equal(g_from, "this host");
    put("meminfo", "MemTotal:       8000000 kB\n");
    assert_int_equal(left_in(&known), 0);
    assert_int_equal(known, 0);
    assert_string_equal(g_from, "");
}

/* v2 ("0::/path"): memory.max - memory.current of the process's own cgroup, when lower */
static void test_available_cgroup_v2(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    usual_mounts();
    put("self_cgroup", "0::/job/step\n");
    put("cg/job/step/memory.max", "3000000000\n");
    put("cg/job/step/memory.current", "1000000000\n");
    assert_int_equal(left_in(&known), 2000000000ull);
    assert_int_equal(known, 1);
    /* the holder is named: the cgroup by its folder */
    char want[300];
    snprintf(want, sizeof want, "its memory cgroup %s/cg/job/step", g_root);
    assert_string_equal(g_from, want);
    /* a limit above MemAvailable leaves MemAvailable */
    put("cg/job/step/memory.max", "9000000000\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    assert_string_equal(g_from, "this host");
    /* "max" is no limit; usage past the limit leaves nothing */
    put("cg/job/step/memory.max", "max\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    put("cg/job/step/memory.max", "500\n");
    assert_int_equal(left_in(&known), 0);
    assert_int_equal(known, 1);
    /* without MemAvailable the cgroup alone is known */
    put("meminfo", "MemTotal:       8000000 kB\n");
    put("cg/job/step/memory.max", "3000000000\n");
    assert_int_equal(left_in(&known), 2000000000ull);
    assert_int_equal(known, 1);
}

/* The limit may sit on a cgroup above the process's own: Slurm's cgroup v2 layout limits the
 * job and the step, the task's own memory.max being "max". The lowest of them counts. */
static void test_available_cgroup_parents(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    usual_mounts();
    put("self_cgroup", "0::/slurm/job_7/step_0/task_0\n");
    put("cg/slurm/job_7/step_0/task_0/memory.max", "max\n");
    put("cg/slurm/job_7/step_0/task_0/memory.current", "100\n");
    put("cg/slurm/job_7/memory.max", "3000000000\n");
    put("cg/slurm/job_7/memory.current", "1000000000\n");
    assert_int_equal(left_in(&known), 2000000000ull);
    assert_int_equal(known, 1);
    /* the step's tighter limit wins over the job's */
    put("cg/slurm/job_7/step_0/memory.max", "1500000000\n");
    put("cg/slurm/job_7/step_0/memory.current", "1000000000\n");
    assert_int_equal(left_in(&known), 500000000ull);
    /* the same walk in v1's memory hierarchy */
    put("self_cgroup", "4:memory:/slurm/uid_0/job_8/step_0\n");
    put("cg/memory/slurm/uid_0/job_8/step_0/memory.limit_in_bytes", "9223372036854771712\n");
    put("cg/memory/slurm/uid_0/job_8/step_0/memory.usage_in_bytes", "10\n");
    put("cg/memory/slurm/uid_0/job_8/memory.limit_in_bytes", "2000000000\n");
    put("cg/memory/slurm/uid_0/job_8/memory.usage_in_bytes", "500000000\n");
    put("cg/memory/slurm/uid_0/job_8/memory.use_hierarchy", "1\n");
    assert_int_equal(left_in(&known), 1500000000ull);
    assert_int_equal(known, 1);
    /* without use_hierarchy the job's limit does not bind the step below it (v1) */
    put("cg/memory/slurm/uid_0/job_8/memory.use_hierarchy", "0\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    /* the process's own cgroup binds it whatever its use_hierarchy says */
    put("cg/memory/slurm/uid_0/job_8/step_0/memory.limit_in_bytes", "1000000010\n");
    put("cg/memory/slurm/uid_0/job_8/step_0/memory.use_hierarchy", "0\n");
    assert_int_equal(left_in(&known), 1000000000ull);
}

/* v1 ("N:memory:/path"): memory.limit_in_bytes - memory.usage_in_bytes under memory/; its
 * "unlimited" (2^63 less a page) is no limit; another controller's line is not memory's */
static void test_available_cgroup_v1(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    usual_mounts();
    put("self_cgroup", "5:pids:/other\n4:memory:/box\n3:memoryx:/box2\n");
    put("cg/memory/box/memory.limit_in_bytes", "9223372036854771712\n");
    put("cg/memory/box/memory.usage_in_bytes", "31408128\n");
    put("cg/memory/box2/memory.limit_in_bytes", "1000\n");
    put("cg/memory/box2/memory.usage_in_bytes", "10\n");
    put("cg/pids/other/memory.limit_in_bytes", "1000\n");
    put("cg/pids/other/memory.usage_in_bytes", "10\n");
    put("cg/other/memory.max", "1000\n");
    put("cg/other/memory.current", "10\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    put("cg/memory/box/memory.limit_in_bytes", "1073741824\n");
    assert_int_equal(left_in(&known), 1073741824ull - 31408128);
    assert_int_equal(known, 1);
}

/* A container that binds only its own v1 memory cgroup (root /docker/abc, as Docker without a
 * cgroup namespace mounts it): the limit is read at the mount point, and nothing above the
 * mount's root is (the folder above the mount point is another thing) */
static void test_available_container_bind(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    put("self_cgroup", "4:memory:/docker/abc\n0::/\n");
    mounts("/docker/abc ctr/memory cgroup memory\n");
    put("ctr/memory/memory.limit_in_bytes", "1000000000\n");
    put("ctr/memory/memory.usage_in_bytes", "100000000\n");
    put("ctr/memory.limit_in_bytes", "100\n");
    put("ctr/memory.usage_in_bytes", "10\n");
    assert_int_equal(left_in(&known), 900000000ull);
    assert_int_equal(known, 1);
    /* a root that is a prefix of the path but not a whole component shows no cgroup of ours */
    put("self_cgroup", "4:memory:/docker/abcd\n");
    put("ctr/memoryd/memory.limit_in_bytes", "100\n");
    put("ctr/memoryd/memory.usage_in_bytes", "10\n");
    put("ctr/memory/d/memory.limit_in_bytes", "100\n");
    put("ctr/memory/d/memory.usage_in_bytes", "10\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
}

/* Inside a cgroup namespace /proc/self/cgroup says "0::/" and the namespace's root is
 * mounted as "/": the limit is the mount point's own; a path that climbs out of the
 * namespace ("/../x") is shown by no mount and read nowhere */
static void test_available_cgroup_namespace(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    put("self_cgroup", "0::/\n");
    mounts("/ ns cgroup2 nsdelegate\n");
    put("ns/memory.max", "2000000000\n");
    put("ns/memory.current", "500000000\n");
    put("memory.max", "100\n");
    put("memory.current", "10\n");
    assert_int_equal(left_in(&known), 1500000000ull);
    assert_int_equal(known, 1);
    put("self_cgroup", "0::/../x\n");
    put("x/memory.max", "100\n");
    put("x/memory.current", "10\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
    put("self_cgroup", "0::/a/../../x\n");
    assert_int_equal(left_in(&known), 4000000ull * 1024);
}

/* A hybrid host: v1 controllers under cg/, cgroup2 at cg/unified. The v2 path is read under
 * cg/unified, not cg/; an option that merely starts with "memory" is not the controller; of
 * two mounts of the memory hierarchy the one whose root sits highest is used, so a limit on
 * the cgroup above ours is seen; a mount point with a space comes escaped (\040) */
static void test_available_hybrid_and_binds(void **state)
{
    (void)state;
    int known = 0;
    put("meminfo", MEMINFO);
    put("self_cgroup", "0::/a\n");
    mounts("/ cg tmpfs mode=755\n"
           "/ cg/unified cgroup2 nsdelegate\n");
    put("cg/a/memory.max", "100\n");
    put("cg/a/memory.current", "10\n");
    put("cg/unified/a/memory.max", "3000000000\n");
    put("cg/unified/a/memory.current", "1000000000\n");
    assert_int_equal(left_in(&known), 2000000000ull);

    put("self_cgroup", "4:memory:/docker/abc\n");
    mounts("/ cg/mx cgroup memoryx\n"
           "/docker/abc ctr/memory cgroup memory\n"
           "/ cg/memory cgroup rw,memory\n");
    put("cg/mx/docker/memory.limit_in_bytes", "100\n");
    put("cg/mx/docker/memory.usage_in_bytes", "10\n");
    put("ctr/memory/memory.limit_in_bytes", "1000000000\n");
    put("ctr/memory/memory.usage_in_bytes", "100000000\n");
    put("cg/memory/docker/abc/memory.limit_in_bytes", "1000000000\n");
    put("cg/memory/docker/abc/memory.usage_in_bytes", "100000000\n");
    put("cg/memory/docker/memory.limit_in_bytes", "600000000\n");
    put("cg/memory/docker/memory.usage_in_bytes", "200000000\n");
    assert_int_equal(left_in(&known), 400000000ull);
    assert_int_equal(known, 1);

    put("self_cgroup", "0::/job\n");
    mounts("/ sp\\040ace cgroup2 nsdelegate\n");
    put("sp ace/job/memory.max", "700000000\n");
    put("sp ace/job/memory.current", "100000000\n");
    assert_int_equal(left_in(&known), 600000000ull);
}

/* The advice of a too-large shape names what makes it large: tokens x hidden, and for an
 * MoE shape the experts' weights first */
static void test_lower_shape_text(void **state)
{
    (void)state;
    char buf[256];
    const bk_shape dense = { .tokens = 32000, .hidden = 16384, .weight = 1 };
    bk_lower_shape_text(&dense, "workload.shapes[0], ", buf, sizeof buf);
    assert_string_equal(buf, "lower tokens x hidden of the largest shape (workload.shapes[0], "
                             "tokens 32000 x hidden 16384)");
    const bk_shape moe = { .tokens = 1, .hidden = 16384, .experts = 8, .topk = 2,
                           .intermediate = 262144, .weight = 1 };
    bk_lower_shape_text(&moe, "shape 2 of the table: ", buf, sizeof buf);
    assert_string_equal(buf, "lower experts x intermediate x hidden, the experts' weights, or "
                             "tokens x hidden of the largest shape (shape 2 of the table: "
                             "experts 8 x intermediate 262144 x hidden 16384, tokens 1)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peak_by_hand),
        cmocka_unit_test(test_too_big_says_what_holds_it),
        cmocka_unit_test(test_audit_msg_too_big),
        cmocka_unit_test(test_lower_shape_text),
        cmocka_unit_test(test_available),
        cmocka_unit_test(test_too_big_tie_names_the_first),
        cmocka_unit_test(test_mem_text_edges),
        cmocka_unit_test_setup_teardown(test_available_meminfo_only, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_cgroup_v2, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_cgroup_v1, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_cgroup_parents, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_container_bind, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_cgroup_namespace, mk_root, rm_root),
        cmocka_unit_test_setup_teardown(test_available_hybrid_and_binds, mk_root, rm_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
