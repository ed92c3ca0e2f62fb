/* fuzz_bind.c - libFuzzer: the GPU binding rules (bk_bind_rank) on any CUDA_VISIBLE_DEVICES,
 * SLURM_STEP_GPUS and SLURM_JOB_GPUS (the input's first three NUL-separated strings, after 6
 * bytes that give the local rank, local size, node size and device count). No crash, no read
 * out of bounds (ASan, UBSan); a refusal says why; a binding names a device this process can
 * use (below device_count when it is known), shared only when ranks outnumber GPUs, with a
 * physical id and a rule. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    bk_bind_env env;
    memset(&env, 0, sizeof env);
    env.local_rank = (int8_t)data[0];
    env.local_size = (int8_t)data[1];
    env.node_size = (int8_t)data[2];
    env.device_count = (int16_t)(data[3] | data[4] << 8) % 300;
    const bk_lane_policy policy = data[5] & 1 ? BK_LANES_SHARED : BK_LANES_DISJOINT;
    char *text = malloc(size - 6 + 3);
    if (!text)
        return 0;
    memcpy(text, data + 6, size - 6);
    memset(text + size - 6, 0, 3);
    const char *s[3];
    const char *p = text;
    for (int i = 0; i < 3; i++) {
        s[i] = p;
        p += strlen(p) + 1;
        if (p > text + size - 6 + 2)
            p = text + size - 6 + 2; /* the last NUL */
    }
    /* an empty string stands for an unset variable, except in CUDA_VISIBLE_DEVICES */
    env.cuda_visible_devices = s[0];
    env.slurm_step_gpus = s[1][0] ? s[1] : NULL;
    env.slurm_job_gpus = s[2][0] ? s[2] : NULL;
    bk_binding b;
    bk_err err = { 0 };
    if (bk_bind_rank(&env, policy, &b, &err) != BK_OK) {
        if (!err.msg[0])
            abort();
    } else if (b.device >= 0) {
        if ((env.device_count >= 0 && b.device >= env.device_count) || !b.physical[0] ||
            !b.why[0] || (b.shared && env.local_rank < (env.device_count >= 0 ? env.device_count : 1)
                          && env.device_count > 1)) {
            fprintf(stderr, "device %d shared %d physical '%s' why '%s' (rank %d of %d, %d "
                    "devices)\n", b.device, b.shared, b.physical, b.why, env.local_rank,
                    env.local_size, env.device_count);
            abort();
        }
    } else if (!b.why[0]) {
        abort();
    }
    free(text);
    return 0;
}
