/* test_topo_gather.c - bk_topo_gather and bk_topo_local_rank as a one-rank MPI
 * job (singleton MPI_Init): hosts matched by hostname + boot id, ranks by bus id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "topology/topology.h"

static MPI_Comm world;

static void test_local_rank(void **state)
{
    (void)state;
    int lr = -1, ls = -1;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_local_rank(&world, &lr, &ls, &err), BK_OK);
    assert_int_equal(lr, 0);
    assert_int_equal(ls, 1);
}

static void test_gpu_group_alone(void **state)
{
    (void)state;
    int gr = -1, gs = -1, ns = -1;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_gpu_group(&world, "0000:19:00.0", &gr, &gs, &ns, &err), BK_OK);
    assert_int_equal(gr, 0);
    assert_int_equal(gs, 1);
    assert_int_equal(ns, 1);
}

static void test_gather_probe(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_rank_place *pl = NULL;
    bk_err err = { 0 };
    char host[128], boot[64];
    if (bk_topo_gather(&world, NULL, "", &t, &pl, &err) != BK_OK)
        fail_msg("%s", err.msg);
    bk_host_identity(host, sizeof host, boot, sizeof boot);
    assert_int_equal(t->nhosts, 1);
    assert_string_equal(t->hosts[0].hostname, host);
    assert_string_equal(t->hosts[0].boot_id, boot);
    assert_int_equal(pl[0].host, 0);
    assert_int_equal(pl[0].gpu, -1);
    assert_true(pl[0].numa >= 0); /* the CPU this rank runs on lies in some NUMA node */
    free(pl);
    bk_topo_free(t);
}

/* The HGX fixture, renamed to this machine (so the rank is found on it), or to
 * another hostname. */
static bk_topo *hgx_named(const char *hostname, const char *boot)
{
    char path[1024], host[128], myboot[64];
    bk_topo *t = NULL;
    bk_err err = { 0 };
    snprintf(path, sizeof path, "%s/tests/fixtures/topo/hgx8_nvswitch.json", BK_SOURCE_DIR);
    assert_int_equal(bk_topo_load(path, &t, &err), BK_OK);
    bk_host_identity(host, sizeof host, myboot, sizeof myboot);
    bk_strlcpy(t->hosts[0].hostname, hostname ? hostname : host, sizeof t->hosts[0].hostname);
    bk_strlcpy(t->hosts[0].boot_id, boot ? boot : myboot, sizeof t->hosts[0].boot_id);
    return t;
}

static bk_topo *hgx_here(const char *boot)
{
    return hgx_named(NULL, boot);
}

static void test_gather_with_snapshot(void **state)
{
    (void)state;
    bk_topo *snap = hgx_here(NULL), *t = NULL;
    bk_rank_place *pl = NULL;
    bk_err err = { 0 };
    if (bk_topo_gather(&world, snap, "0000:2a:00.0", &t, &pl, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(pl[0].host, 0);
    assert_int_equal(pl[0].gpu, 1); /* the second GPU of the fixture */
    free(pl);
    bk_topo_free(t);
    bk_err e2 = { 0 };
    assert_int_equal(bk_topo_gather(&world, snap, "0000:99:00.0", &t, &pl, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "rank 0 is bound to GPU 0000:99:00.0"));
    assert_null(t);
    bk_topo_free(snap);
    /* same hostname, another boot: a different machine (or a reboot) */
    snap = hgx_here("another-boot");
    bk_err e3 = { 0 };
    assert_int_equal(bk_topo_gather(&world, snap, "", &t, &pl, &e3), BK_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "which the snapshot does not list"));
    bk_topo_free(snap);
}

/* A host is its hostname and boot id: the same boot id under another hostname is
 * another host (a UTS namespace); a snapshot host without a boot id matches any boot. */
static void test_gather_snapshot_identity(void **state)
{
    (void)state;
    bk_topo *snap = hgx_named("not-this-host", NULL), *t = NULL;
    bk_rank_place *pl = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_gather(&world, snap, "", &t, &pl, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "which the snapshot does not list"));
    assert_null(t);
    bk_topo_free(snap);
    snap = hgx_here("");
    bk_err e2 = { 0 };
    if (bk_topo_gather(&world, snap, "0000:2a:00.0", &t, &pl, &e2) != BK_OK)
        fail_msg("%s", e2.msg);
    assert_int_equal(pl[0].host, 0);
    assert_int_equal(pl[0].gpu, 1);
    free(pl);
    bk_topo_free(t);
    /* this hostname twice, without a boot id first and with this boot second: the rank is on
     * the second (it was matched to the first, whichever stood first) */
    bk_topo *two = NULL;
    assert_int_equal(bk_topo_new(2, &two, &e2), BK_OK);
    bk_topo *mine = hgx_here(NULL);
    two->hosts[0] = snap->hosts[0];
    two->hosts[1] = mine->hosts[0];
    bk_strlcpy(two->hosts[1].gpus[1].name, "the exact one", sizeof two->hosts[1].gpus[1].name);
    if (bk_topo_gather(&world, two, "0000:2a:00.0", &t, &pl, &e2) != BK_OK)
        fail_msg("%s", e2.msg);
    assert_int_equal(pl[0].host, 1);
    assert_string_equal(t->hosts[pl[0].host].gpus[pl[0].gpu].name, "the exact one");
    free(pl);
    bk_topo_free(t);
    bk_topo_free(two);
    bk_topo_free(mine);
    bk_topo_free(snap);
}

/* Child mode, under mpirun -n 3: one host, every rank placed on it; GPU groups by key. */
static int child(void)
{
    bk_topo *t = NULL;
    bk_rank_place *pl = NULL;
    bk_err err = { 0 };
    int rank, size, bad = 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return 1;
    world = MPI_COMM_WORLD;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    bk_status st = bk_topo_gather(&world, NULL, "", &t, &pl, &err);
    if (st != BK_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        bad = 1;
    } else if (rank == 0) {
        bad = t->nhosts != 1; /* three ranks, one machine: one host */
        for (int r = 0; r < size; r++)
            bad |= pl[r].host != 0 || pl[r].gpu != -1;
        if (bad)
            fprintf(stderr, "gathered %d hosts for %d ranks on one machine\n", t->nhosts, size);
    } else {
        bad = t != NULL || pl != NULL; /* only rank 0 gets the result */
    }
    /* per-task GPU sets: ranks 0 and 2 see the GPUs "A", rank 1 sees "B" */
    int gr = -1, gs = -1, ns = -1;
    if (bk_topo_gpu_group(&world, rank == 1 ? "B" : "A", &gr, &gs, &ns, &err) != BK_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        bad = 1;
    } else if (gr != (rank == 2) || gs != (rank == 1 ? 1 : 2) || ns != size) {
        fprintf(stderr, "rank %d: GPU group %d of %d, node %d\n", rank, gr, gs, ns);
        bad = 1;
    }
    free(pl);
    bk_topo_free(t);
    MPI_Finalize();
    return bad;
}

static int multi_rc = -1; /* exit status of the mpirun child job, 127: no mpirun */

static void test_gather_three_ranks(void **state)
{
    (void)state;
    if (multi_rc == 127)
        skip();
    assert_int_equal(multi_rc, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child"))
        return child();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "command -v mpirun >/dev/null || exit 127; mpirun "
             "--allow-run-as-root --oversubscribe -n 3 %s --child", argv[0]);
    int sys = system(cmd);
    multi_rc = sys == -1 ? 1 : WEXITSTATUS(sys);
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return 1;
    world = MPI_COMM_WORLD;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_rank),
        cmocka_unit_test(test_gpu_group_alone),
        cmocka_unit_test(test_gather_probe),
        cmocka_unit_test(test_gather_with_snapshot),
        cmocka_unit_test(test_gather_snapshot_identity),
        cmocka_unit_test(test_gather_three_ranks),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
