/* test_topo_bind.c - rank-to-GPU binding rules as a pure function of the environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "topology/topology.h"

static bk_binding bind_ok(bk_bind_env env, bk_lane_policy pol)
{
    bk_binding b;
    bk_err err = { 0 };
    if (bk_bind_rank(&env, pol, &b, &err) != BK_OK)
        fail_msg("unexpected refusal: %s", err.msg);
    return b;
}

static void test_plain_mpirun(void **state)
{
    (void)state;
    bk_bind_env env = { .local_rank = 2, .local_size = 4, .device_count = 4 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 2);
    assert_false(b.shared);
    assert_string_equal(b.physical, "2");
}

static void test_one_visible_gpu_is_device_zero(void **state)
{
    (void)state;
    /* nccl-tests under --gpus-per-task picks ordinal = local rank: invalid ordinal. A task
     * alone in its group (its own GPU) */
    bk_bind_env env = { .cuda_visible_devices = "3", .local_rank = 0, .local_size = 1,
                        .node_size = 4, .device_count = 1 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 0);
    assert_false(b.shared);
    assert_string_equal(b.physical, "3");
    assert_non_null(strstr(b.why, "exactly one GPU"));
    env.device_count = -1; /* count unknown: taken from the list */
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 0);
}

/* Ranks of a group see the same GPUs: with one GPU among them they share it (a one-GPU
 * machine under mpirun -np 2). Device 0 for each, said as shared, not as a per-task
 * binding; the binding leaves a disjoint plan to the lanes, which refuse it naming both
 * ranks (test_topo_lanes) */
static void test_one_gpu_shared_by_the_group(void **state)
{
    (void)state;
    for (int r = 0; r < 2; r++) {
        bk_bind_env env = { .local_rank = r, .local_size = 2, .node_size = 2,
                            .device_count = 1 };
        bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
        assert_int_equal(b.device, 0);
        assert_true(b.shared);
        assert_null(strstr(b.why, "per-task"));
        assert_non_null(strstr(b.why, "and so do 1 other rank(s) of this node: they share it"));
        b = bind_ok(env, BK_LANES_SHARED);
        assert_int_equal(b.device, 0);
        assert_true(b.shared);
    }
}

static void test_visible_list(void **state)
{
    (void)state;
    bk_bind_env env = { .cuda_visible_devices = "2,3", .local_rank = 1, .local_size = 2,
                        .device_count = -1 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 1);
    assert_string_equal(b.physical, "3");
    env.cuda_visible_devices = "GPU-aaaa,GPU-bbbb";
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_string_equal(b.physical, "GPU-bbbb");
    env.cuda_visible_devices = "";
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, -1);
    assert_non_null(strstr(b.why, "no GPU visible"));
}

static void test_slurm_variables(void **state)
{
    (void)state;
    bk_bind_env env = { .slurm_step_gpus = "4,5,6,7", .local_rank = 2, .local_size = 4,
                        .device_count = 4 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 2);
    assert_string_equal(b.physical, "6");
    bk_bind_env job = { .slurm_job_gpus = "1,3", .local_rank = 0, .local_size = 2,
                        .device_count = 2 };
    b = bind_ok(job, BK_LANES_DISJOINT);
    assert_string_equal(b.physical, "1");
    /* --gpus-per-task with device cgroups: each task sees one GPU as "0", its own (alone in
     * its group: the groups are by bus id) */
    bk_bind_env task = { .cuda_visible_devices = "0", .slurm_step_gpus = "0,1,2,3",
                         .local_rank = 0, .local_size = 1, .node_size = 4,
                         .device_count = 1 };
    b = bind_ok(task, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 0);
    assert_false(b.shared);
}

static void test_per_task_gpu_sets(void **state)
{
    (void)state;
    /* Slurm --gpus-per-task=2, 4 tasks on a node: each task sees its own 2 GPUs as 0,1
     * and is alone in its group: device 0, where local rank 3 of 4 used to be refused */
    char keys[4][32] = { "0000:19:00.0,0000:3b:00.0", "0000:4c:00.0,0000:5d:00.0",
                         "0000:9a:00.0,0000:ab:00.0", "0000:ba:00.0,0000:db:00.0" };
    int gr = -1, gs = -1;
    bk_bind_group(&keys[0][0], sizeof keys[0], 4, 3, &gr, &gs);
    assert_int_equal(gr, 0);
    assert_int_equal(gs, 1);
    bk_bind_env own = { .cuda_visible_devices = "0,1", .local_rank = gr, .local_size = gs,
                        .node_size = 4, .device_count = 2 };
    assert_int_equal(bind_ok(own, BK_LANES_DISJOINT).device, 0);
    /* two tasks that see the same pair (no device cgroups) take it in rank order */
    memcpy(keys[2], keys[0], sizeof keys[0]);
    memcpy(keys[3], keys[1], sizeof keys[1]);
    bk_bind_group(&keys[0][0], sizeof keys[0], 4, 3, &gr, &gs);
    assert_int_equal(gr, 1);
    assert_int_equal(gs, 2);
    bk_bind_group(&keys[0][0], sizeof keys[0], 4, 0, &gr, &gs);
    assert_int_equal(gr, 0);
    assert_int_equal(gs, 2);
    /* plain mpirun: every rank sees the same GPUs, the group is the node */
    memcpy(keys[1], keys[0], sizeof keys[0]);
    memcpy(keys[3], keys[0], sizeof keys[0]);
    bk_bind_group(&keys[0][0], sizeof keys[0], 4, 3, &gr, &gs);
    assert_int_equal(gr, 3);
    assert_int_equal(gs, 4);
    /* task 3 (its group's second) gets its own device 1, not a refusal */
    bk_bind_env env = { .cuda_visible_devices = "0,1", .slurm_step_gpus = "0,1,2,3",
                        .local_rank = 1, .local_size = 2, .node_size = 4, .device_count = 2 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 1);
    assert_false(b.shared);
    assert_non_null(strstr(b.why, "rank 1 of the 2 of this node's 4 ranks that see these 2 GPUs"));
    assert_string_equal(b.physical, "1"); /* CUDA_VISIBLE_DEVICES's entry, not the step's */
    env.cuda_visible_devices = NULL; /* Slurm's list names the step's GPUs, not the task's */
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_string_equal(b.physical, "1");
    env.slurm_step_gpus = "4,5,6,7";
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_string_equal(b.physical, "1");
    /* taken as the whole node (the old rule) it would have been refused */
    bk_bind_env whole = { .local_rank = 3, .local_size = 4, .device_count = 2 };
    bk_err err = { 0 };
    assert_int_equal(bk_bind_rank(&whole, BK_LANES_DISJOINT, &b, &err), BK_ERR_INPUT);
}

static void test_two_ranks_one_gpu(void **state)
{
    (void)state;
    bk_bind_env env = { .local_rank = 5, .local_size = 8, .device_count = 4 };
    bk_binding b;
    bk_err err = { 0 };
    assert_int_equal(bk_bind_rank(&env, BK_LANES_DISJOINT, &b, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "share GPU 1"));
    assert_non_null(strstr(err.msg, "refused unless lanes.policy is \"shared\""));
    b = bind_ok(env, BK_LANES_SHARED);
    assert_int_equal(b.device, 1);
    assert_true(b.shared);
}

static void test_no_runtime_and_bad_rank(void **state)
{
    (void)state;
    bk_bind_env env = { .local_rank = 0, .local_size = 1, .device_count = -1 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, -1);
    bk_bind_env bad = { .local_rank = 4, .local_size = 4, .device_count = 4 };
    bk_err err = { 0 };
    assert_int_equal(bk_bind_rank(&bad, BK_LANES_DISJOINT, &b, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "local rank 4 of 4"));
}

static void test_env_from_process(void **state)
{
    (void)state;
    bk_bind_env env;
    setenv("CUDA_VISIBLE_DEVICES", "7", 1);
    unsetenv("SLURM_STEP_GPUS");
    bk_bind_env_from_process(&env, 0, 2, -1);
    assert_string_equal(env.cuda_visible_devices, "7");
    assert_null(env.slurm_step_gpus);
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 0);
    assert_string_equal(b.physical, "7");
    unsetenv("CUDA_VISIBLE_DEVICES");
    /* each variable into its own field: the job's list where the step has none */
    setenv("SLURM_JOB_GPUS", "2,3", 1);
    setenv("SLURM_STEP_GPUS", "5", 1);
    bk_bind_env_from_process(&env, 1, 2, 2);
    assert_null(env.cuda_visible_devices);
    assert_string_equal(env.slurm_step_gpus, "5");
    assert_string_equal(env.slurm_job_gpus, "2,3");
    assert_int_equal(env.local_rank, 1);
    assert_int_equal(env.local_size, 2);
    assert_int_equal(env.device_count, 2);
    unsetenv("SLURM_STEP_GPUS");
    bk_bind_env_from_process(&env, 1, 2, 2);
    assert_string_equal(bind_ok(env, BK_LANES_DISJOINT).physical, "3");
    unsetenv("SLURM_JOB_GPUS");
}

/* An empty entry of a list (",," or a trailing comma) is no device: it neither counts nor
 * shifts the entries after it. */
static void test_list_skips_empty_entries(void **state)
{
    (void)state;
    bk_bind_env env = { .cuda_visible_devices = "2,,3,", .local_rank = 1, .local_size = 2,
                        .device_count = -1 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 1);
    assert_string_equal(b.physical, "3");
    assert_non_null(strstr(b.why, "2 GPUs visible"));
    bk_bind_env slurm = { .slurm_step_gpus = ",4,,5", .local_rank = 1, .local_size = 2,
                          .device_count = 2 };
    assert_string_equal(bind_ok(slurm, BK_LANES_DISJOINT).physical, "5");
}

/* A physical id longer than the binding's field is cut to fit, never written past it. */
static void test_long_entry_is_cut(void **state)
{
    (void)state;
    char cvd[200];
    memset(cvd, 'x', sizeof cvd - 1);
    cvd[sizeof cvd - 1] = '\0';
    bk_bind_env env = { .cuda_visible_devices = cvd, .local_rank = 0, .local_size = 1,
                        .device_count = 1 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(strlen(b.physical), sizeof b.physical - 1);
    assert_int_equal(strncmp(b.physical, cvd, sizeof b.physical - 1), 0);
    assert_non_null(strstr(b.why, "exactly one GPU"));
}

/* A local rank outside 0..local_size-1 (negative, or local_size itself) is no position:
 * refused as such, even where a shared GPU would be allowed. */
static void test_rank_outside_local_size(void **state)
{
    (void)state;
    static const int ranks[] = { -1, 4 };
    for (int i = 0; i < 2; i++) {
        bk_bind_env env = { .local_rank = ranks[i], .local_size = 4, .device_count = 4 };
        bk_binding b;
        bk_err err = { 0 };
        char want[64];
        snprintf(want, sizeof want, "local rank %d of 4 is not a valid position", ranks[i]);
        assert_int_equal(bk_bind_rank(&env, BK_LANES_SHARED, &b, &err), BK_ERR_INPUT);
        if (!strstr(err.msg, want))
            fail_msg("local rank %d of 4: '%s', want '%s'", ranks[i], err.msg, want);
        assert_int_equal(b.device, -1);
    }
}

/* A node whose ranks all share this group (node_size == local_size) is plain mpirun, not
 * per-task sets: Slurm's step list names its GPUs. */
static void test_whole_node_group_is_not_a_subset(void **state)
{
    (void)state;
    bk_bind_env env = { .slurm_step_gpus = "4,5,6,7", .local_rank = 2, .local_size = 4,
                        .node_size = 4, .device_count = 4 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, 2);
    assert_string_equal(b.physical, "6");
    assert_non_null(strstr(b.why, "local rank 2 of 4, 4 GPUs visible: device 2"));
}

/* A runtime that counts zero devices says no GPU is visible, whatever the list claims. */
static void test_zero_devices_counted(void **state)
{
    (void)state;
    bk_bind_env env = { .cuda_visible_devices = "0,1", .local_rank = 0, .local_size = 1,
                        .device_count = 0 };
    bk_binding b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, -1);
    assert_string_equal(b.why, "no GPU visible (CUDA_VISIBLE_DEVICES=\"0,1\") (cpu backend)");
    env.cuda_visible_devices = NULL;
    b = bind_ok(env, BK_LANES_DISJOINT);
    assert_int_equal(b.device, -1);
    assert_string_equal(b.why, "no GPU visible (cpu backend)");
}

/* Per-task GPU sets with more ranks in the group than GPUs: two would share one, so the
 * disjoint policy refuses, as without sets. */
static void test_subset_with_too_few_gpus(void **state)
{
    (void)state;
    bk_bind_env env = { .cuda_visible_devices = "0,1", .local_rank = 3, .local_size = 4,
                        .node_size = 8, .device_count = 2 };
    bk_binding b;
    bk_err err = { 0 };
    assert_int_equal(bk_bind_rank(&env, BK_LANES_DISJOINT, &b, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "share GPU 1"));
    b = bind_ok(env, BK_LANES_SHARED);
    assert_int_equal(b.device, 1);
    assert_true(b.shared);
}

/* The step's list beats the job's (the step is what this process runs in); the job's list
 * stands in when the step's is absent; a CUDA_VISIBLE_DEVICES too short to name the device
 * leaves the naming to Slurm's list. */
static void test_slurm_list_order(void **state)
{
    (void)state;
    bk_bind_env env = { .slurm_step_gpus = "4,5", .slurm_job_gpus = "0,1,2,3,4,5",
                        .local_rank = 1, .local_size = 2, .device_count = 2 };
    assert_string_equal(bind_ok(env, BK_LANES_DISJOINT).physical, "5");
    env.slurm_step_gpus = NULL;
    assert_string_equal(bind_ok(env, BK_LANES_DISJOINT).physical, "1");
    bk_bind_env short_cvd = { .cuda_visible_devices = "6", .slurm_step_gpus = "6,7",
                              .local_rank = 1, .local_size = 2, .device_count = 2 };
    assert_string_equal(bind_ok(short_cvd, BK_LANES_DISJOINT).physical, "7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_mpirun),
        cmocka_unit_test(test_one_visible_gpu_is_device_zero),
        cmocka_unit_test(test_one_gpu_shared_by_the_group),
        cmocka_unit_test(test_visible_list),
        cmocka_unit_test(test_slurm_variables),
        cmocka_unit_test(test_per_task_gpu_sets),
        cmocka_unit_test(test_two_ranks_one_gpu),
        cmocka_unit_test(test_no_runtime_and_bad_rank),
        cmocka_unit_test(test_env_from_process),
        cmocka_unit_test(test_list_skips_empty_entries),
        cmocka_unit_test(test_long_entry_is_cut),
        cmocka_unit_test(test_rank_outside_local_size),
        cmocka_unit_test(test_whole_node_group_is_not_a_subset),
        cmocka_unit_test(test_zero_devices_counted),
        cmocka_unit_test(test_subset_with_too_few_gpus),
        cmocka_unit_test(test_slurm_list_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
