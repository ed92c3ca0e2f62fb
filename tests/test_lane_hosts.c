/* test_lane_hosts.c - where `bracket run` lets a lane's ranks be (bk__pick_lanes): a lane
 * of the cpu backend, or of a cuda plan with a variant that maps peer memory, stays on one
 * host; a cuda lane of NCCL variants may span hosts (TP above a node's GPUs). The hosts are
 * the topology fixture's (cluster128x8: HGX nodes of 8 GPUs), placed one rank per GPU. Lanes
 * of rank 0's host alone are local (no tcp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/catalog.h"
#include "runner/run_setup.h"

typedef struct {
    bk_topo *topo;
    bk_rank_place *all; /* one rank per GPU of the whole fixture */
    int nall;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char path[1024];
    bk_err err = { 0 };
    assert_non_null(f);
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/cluster128x8.json", BK_SOURCE_DIR);
    if (bk_topo_load(path, &f->topo, &err) != BK_OK)
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(bk_places_one_per_gpu(f->topo, &f->all, &f->nall, &err), BK_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->all);
    bk_topo_free(f->topo);
    free(f);
    return 0;
}

/* A run of the demo cuda plan with `sets` (its backend as the plan says: cuda, or cpu by a
 * set), on the ranks of the first `nhosts` hosts (each `per_host` GPUs of it, from GPU 0),
 * named as the fixture names the hosts. */
typedef struct {
    bk_run run;
    bk_rank_place pl[64];
    char hosts[64][BK_HOST_LEN];
} ranks;

static void make_run(const fixture *f, ranks *r, const char *const *sets, int nsets,
                     int nhosts, int per_host)
{
    char path[1024];
    bk_err err = { 0 };
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/plans/demo-cuda.json", BK_SOURCE_DIR);
    if (bk_plan_load(path, sets, nsets, &r->run.plan, &err) != BK_OK)
        fail_msg("%s: %s", path, err.msg);
    r->run.backend = r->run.plan.backend;
    assert_true(r->run.backend == BK_BACKEND_CPU || r->run.backend == BK_BACKEND_CUDA);
    int n = 0;
    for (int h = 0; h < nhosts; h++)
        for (int g = 0; g < per_host; g++) {
            assert_true(n < 64);
            r->pl[n] = f->all[h * 8 + g];
            assert_int_equal(r->pl[n].host, h);
            bk_strlcpy(r->hosts[n], f->topo->hosts[h].hostname, BK_HOST_LEN);
            n++;
        }
    r->run.world_size = n;
    r->run.hosts = r->hosts;
}

static int hosts_of(const ranks *r, const int *lane, int L)
{
    int seen[64] = { 0 }, k = 0;
    for (int i = 0; i < L; i++)
        if (!seen[r->pl[lane[i]].host]++)
            k++;
    return k;
}

/* Two whole hosts of 8 with `sets`: each lane is one host's, and the one on node001 makes
 * the run remote. */
static void expect_one_host_lanes(const fixture *f, ranks *r, const char *const *sets,
                                  int nsets)
{
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, nsets, 2, 8);
    if (bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    assert_int_equal(hosts_of(r, r->run.baseline, 8), 1);
    assert_int_equal(hosts_of(r, r->run.candidate, 8), 1);
    assert_int_equal(remote, 1);
}

static int have_cuda_variants(void)
{
    if (bk_catalog_variant("collective.allreduce_residual_rmsnorm", "nccl_then_rmsnorm"))
        return 1;
    print_message("SKIPPED half: built without CUDA, so the catalog has no cuda variants\n");
    return 0;
}

/* TP 16 on four 8-GPU hosts, NCCL alone (an A/A of the incumbent): each lane spans two
 * hosts, the lanes are disjoint and of equal signature, and the coordinator goes to tcp. */
static void test_nccl_lane_spans_hosts(void **state)
{
    fixture *f = *state;
    if (!have_cuda_variants())
        skip();
    static const char *const sets[] = { "arena.tp=16", "candidate.variant=nccl_then_rmsnorm" };
    ranks *r = calloc(1, sizeof *r);
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, 2, 4, 8);
    if (bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    assert_int_equal(r->run.lane_size, 16);
    assert_int_equal(remote, 1);
    assert_int_equal(hosts_of(r, r->run.baseline, 16), 2);
    assert_int_equal(hosts_of(r, r->run.candidate, 16), 2);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            assert_int_not_equal(r->run.baseline[i], r->run.candidate[j]);
    assert_non_null(strstr(r->run.lane_note, "(2 hosts per lane); each lane spans hosts: NCCL "
                                             "between them, tcp with CURVE to rank 0"));
    assert_non_null(strstr(r->run.lane_signature, " h2 "));
    bk_plan_free(&r->run.plan);
    free(r);
}

/* The same lanes with a candidate that maps peer memory (one-shot over CUDA IPC, at TP 8
 * on hosts of 4 ranks: inside its domain) are refused before any engine starts, naming
 * the candidate; and the same plan with lanes of one host each runs them there. */
static void test_peer_memory_stays_on_one_host(void **state)
{
    fixture *f = *state;
    if (!have_cuda_variants())
        skip();
    static const char *const sets[] = { "arena.tp=8" };
    ranks *r = calloc(1, sizeof *r);
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, 1, 4, 4); /* four hosts, four ranks on each */
    assert_int_equal(bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err),
                     BK_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "the baseline lane spans hosts (MPI rank 0 on node000, rank 4 "
                                 "on node001): the candidate ipc_oneshot_fused needs CUDA peer "
                                 "memory, which is one host's, so place each lane's 8 ranks on "
                                 "one host (e.g. srun --ntasks-per-node=8)");
    bk_plan_free(&r->run.plan);
    /* the incumbent named when it is the one that maps peers */
    static const char *const inc[] = { "arena.tp=8", "incumbent.variant=ipc_twoshot_fused",
                                       "candidate.variant=nccl_then_rmsnorm" };
    make_run(f, r, inc, 3, 4, 4);
    memset(&err, 0, sizeof err);
    assert_int_equal(bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err),
                     BK_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, ": the incumbent ipc_twoshot_fused needs CUDA peer memory"));
    bk_plan_free(&r->run.plan);
    /* two whole hosts: each lane is one host's, and the one on node001 is remote */
    expect_one_host_lanes(f, r, sets, 1);
    assert_string_equal(r->run.lane_note, "disjoint lanes on two hosts (tcp with CURVE)");
    bk_plan_free(&r->run.plan);
    free(r);
}

/* A cpu lane shares POSIX memory: never across hosts, whatever its variants. */
static void test_cpu_lane_stays_on_one_host(void **state)
{
    fixture *f = *state;
    static const char *const sets[] = { "arena.tp=8", "backend=cpu",
                                        "incumbent.variant=shm_twopass",
                                        "candidate.variant=shm_twopass" };
    ranks *r = calloc(1, sizeof *r);
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, 4, 4, 4);
    assert_int_equal(bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err),
                     BK_ERR_UNSUPPORTED);
    bk_plan_free(&r->run.plan);
    assert_string_equal(err.msg, "the baseline lane spans hosts (MPI rank 0 on node000, rank 4 "
                                 "on node001): the cpu engines of a lane share memory, which is "
                                 "one host's, so place each lane's 8 ranks on one host (e.g. "
                                 "srun --ntasks-per-node=8)");
    /* lanes of one host each run there */
    expect_one_host_lanes(f, r, sets, 4);
    bk_plan_free(&r->run.plan);
    free(r);
}

/* Both lanes on rank 0's host: not remote (the coordinator stays on ipc://), and the note
 * says both lanes are on one host, and nothing of tcp. */
static void test_one_host_is_local(void **state)
{
    fixture *f = *state;
    static const char *const sets[] = { "arena.tp=2", "backend=cpu",
                                        "incumbent.variant=shm_twopass",
                                        "candidate.variant=shm_twopass" };
    ranks *r = calloc(1, sizeof *r);
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, 4, 1, 4);
    if (bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err) != BK_OK)
        fail_msg("refused: %s", err.msg);
    assert_int_equal(remote, 0);
    assert_int_equal(hosts_of(r, r->run.baseline, 2), 1);
    assert_int_equal(hosts_of(r, r->run.candidate, 2), 1);
    if (strstr(r->run.lane_note, "tcp") || !strstr(r->run.lane_note, "both on one host"))
        fail_msg("lane note of one host: '%s'", r->run.lane_note);
    bk_plan_free(&r->run.plan);
    free(r);
}

/* Two hosts of one hostname (cloned nodes, containers) are still two hosts: said so. */
static void test_same_name_two_hosts(void **state)
{
    fixture *f = *state;
    static const char *const sets[] = { "arena.tp=8", "backend=cpu",
                                        "incumbent.variant=shm_twopass",
                                        "candidate.variant=shm_twopass" };
    ranks *r = calloc(1, sizeof *r);
    bk_err err = { 0 };
    int remote = -1;
    make_run(f, r, sets, 4, 4, 4);
    for (int i = 0; i < r->run.world_size; i++)
        bk_strlcpy(r->hosts[i], "clone", BK_HOST_LEN);
    assert_int_equal(bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err),
                     BK_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "(MPI rank 0 on clone, rank 4 on clone, another host of "
                                    "that name)"));
    bk_plan_free(&r->run.plan);
    free(r);
}

/* Shared lanes (a rehearsal) of TP 2 on one host: where both ranks are bound to GPU 0 they
 * share it, and the note says no straggler is named (their own times are their turns on
 * it); on two GPUs, or on the cpu backend (whose engines use no GPU), they do not. Built
 * without CUDA (no cuda variants) only the cpu half runs, saying so. */
static void test_shared_gpu_lane(void **state)
{
    fixture *f = *state;
    const int cuda = have_cuda_variants();
    static const char *const sets[] = { "arena.tp=2", "lanes.policy=shared", "backend=cpu",
                                        "incumbent.variant=shm_twopass",
                                        "candidate.variant=shm_twopass" };
    ranks *r = calloc(1, sizeof *r);
    assert_non_null(r);
    for (int gpus = 1; gpus <= 2; gpus++)
        for (int cpu = !cuda; cpu <= 1; cpu++) {
            bk_err err = { 0 };
            int remote = -1;
            make_run(f, r, sets, cpu ? 5 : 2, 1, 2); /* cuda: the first two alone */
            if (gpus == 1)
                r->pl[1] = r->pl[0];
            if (bk__pick_lanes(&r->run, f->topo, r->pl, &remote, &err) != BK_OK)
                fail_msg("%d GPU(s), %s: refused: %s", gpus, cpu ? "cpu" : "cuda", err.msg);
            const int want = gpus == 1 && !cpu;
            const char *said = strstr(r->run.lane_note, "ranks of a lane share a GPU");
            if (r->run.lane_gpu_shared != want || !said != !want)
                fail_msg("%d GPU(s), %s: lane_gpu_shared %d, note '%s'", gpus, cpu ? "cpu" : "cuda",
                         r->run.lane_gpu_shared, r->run.lane_note);
            assert_true(r->run.shared_lanes);
            bk_plan_free(&r->run.plan);
        }
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_lane_spans_hosts),
        cmocka_unit_test(test_peer_memory_stays_on_one_host),
        cmocka_unit_test(test_cpu_lane_stays_on_one_host),
        cmocka_unit_test(test_same_name_two_hosts),
        cmocka_unit_test(test_one_host_is_local),
        cmocka_unit_test(test_shared_gpu_lane),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
