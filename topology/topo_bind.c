/* topo_bind.c - which GPU a rank uses: a pure function of the environment
 * (CUDA_VISIBLE_DEVICES, Slurm's GPU variables, the local rank from
 * MPI_Comm_split_type and the device count), so every rule is unit-tested. */
#include "topology/topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Entry `idx` of a comma list into buf ("" when absent); returns the entry count. */
static int list_entry(const char *list, int idx, char *buf, size_t n)
{
    int count = 0;
    if (buf && n)
        buf[0] = '\0';
    if (!list || !*list)
        return 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len > 0) {
            if (count == idx && buf && n) {
                size_t k = len < n - 1 ? len : n - 1;
                memcpy(buf, p, k);
                buf[k] = '\0';
            }
            count++;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return count;
}

void bk_bind_env_from_process(bk_bind_env *env, int local_rank, int local_size, int device_count)
{
    memset(env, 0, sizeof *env);
    env->cuda_visible_devices = getenv("CUDA_VISIBLE_DEVICES");
    env->slurm_step_gpus = getenv("SLURM_STEP_GPUS");
    env->slurm_job_gpus = getenv("SLURM_JOB_GPUS");
    env->local_rank = local_rank;
    env->local_size = local_size;
    env->device_count = device_count;
}

bk_status bk_bind_rank(const bk_bind_env *env, bk_lane_policy policy, bk_binding *out,
                       bk_err *err)
{
    memset(out, 0, sizeof *out);
    out->device = -1;
    if (env->local_rank < 0 || env->local_size < 1 || env->local_rank >= env->local_size)
        return BK_FAIL(err, BK_ERR_INPUT, "binding: local rank %d of %d is not a valid position",
                       env->local_rank, env->local_size);
    const char *cvd = env->cuda_visible_devices;
    const int subset = env->node_size > env->local_size; /* other ranks see other GPUs */
    int listed = cvd ? list_entry(cvd, 0, NULL, 0) : -1;
    int n = env->device_count >= 0 ? env->device_count : listed;
    if (n < 0) {
        snprintf(out->why, sizeof out->why, "no CUDA runtime or driver: no GPU (cpu backend)");
        return BK_OK;
    }
    if (n == 0) {
        snprintf(out->why, sizeof out->why, "no GPU visible%s%s%s (cpu backend)",
                 cvd ? " (CUDA_VISIBLE_DEVICES=\"" : "", cvd ? cvd : "", cvd ? "\")" : "");
        return BK_OK;
    }
    if (n == 1) {
        out->device = 0;
        /* the ranks of a group see the same GPUs (bus ids): more than one share the one. A
         * disjoint plan is then refused where the lanes are chosen, naming ranks and GPU */
        out->shared = env->local_size > 1;
        if (out->shared)
            snprintf(out->why, sizeof out->why,
                     "this process sees one GPU, device 0, and so do %d other rank(s) of this "
                     "node: they share it", env->local_size - 1);
        else
            snprintf(out->why, sizeof out->why,
                     "this process sees exactly one GPU: device 0 (per-task binding, e.g. "
                     "Slurm --gpus-per-task, or a one-entry CUDA_VISIBLE_DEVICES)");
    } else if (env->local_rank < n && subset) {
        out->device = env->local_rank;
        snprintf(out->why, sizeof out->why,
                 "rank %d of the %d of this node's %d ranks that see these %d GPUs (per-task "
                 "GPU sets, e.g. Slurm --gpus-per-task): device %d",
                 env->local_rank, env->local_size, env->node_size, n, out->device);
    } else if (env->local_rank < n) {
        out->device = env->local_rank;
        snprintf(out->why, sizeof out->why, "local rank %d of %d, %d GPUs visible: device %d",
                 env->local_rank, env->local_size, n, out->device);
    } else {
        out->device = env->local_rank % n;
        out->shared = 1;
        snprintf(out->why, sizeof out->why,
                 "local rank %d of %d but only %d GPUs visible: shares device %d",
                 env->local_rank, env->local_size, n, out->device);
        if (policy != BK_LANES_SHARED)
            return BK_FAIL(err, BK_ERR_INPUT,
                           "binding: local rank %d of %d sees only %d GPU(s), so two ranks would "
                           "share GPU %d; refused unless lanes.policy is \"shared\" (start one "
                           "rank per GPU)",
                           env->local_rank, env->local_size, n, out->device);
    }
    /* the physical id, for the log: the CUDA_VISIBLE_DEVICES entry (as it
     * names the device), else the entry of Slurm's GPU list, else the ordinal */
    /* Slurm's lists name the step's or job's GPUs, not a task's own subset */
    const char *slurm = subset ? NULL
                        : env->slurm_step_gpus ? env->slurm_step_gpus : env->slurm_job_gpus;
    if (!(cvd && list_entry(cvd, out->device, out->physical, sizeof out->physical) > out->device) &&
        !(slurm && list_entry(slurm, out->device, out->physical, sizeof out->physical) > out->device))
        snprintf(out->physical, sizeof out->physical, "%d", out->device);
    if (!out->physical[0])
        snprintf(out->physical, sizeof out->physical, "%d", out->device);
    return BK_OK;
}

void bk_bind_group(const char *keys, size_t stride, int nlocal, int me, int *group_rank,
                   int *group_size)
{
    const char *mine = keys + (size_t)me * stride;
    *group_rank = 0;
    *group_size = 0;
    for (int i = 0; i < nlocal; i++)
        if (strncmp(keys + (size_t)i * stride, mine, stride) == 0) {
            *group_rank += i < me;
            (*group_size)++;
        }
}
