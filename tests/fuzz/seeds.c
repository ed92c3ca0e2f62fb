/* seeds.c - fuzz_seeds DIR: starting inputs for the harnesses that have no files of their
 * own in the tree: DIR/wire (one message of each type, as the engines send them) and DIR/mem
 * (meminfo, cgroup and mountinfo joined by NUL bytes: cgroup v2, v1 in a container, hybrid)
 * and DIR/bind (local rank, local size, node size, device count in 6 bytes, then
 * CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS joined by NUL bytes).
 * The others start from the tree's files (tests/fuzz/README.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runner/wire.h"
#include "fuzz_util.h"

static int put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fuzz_put(path, data, len) != 0) {
        fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* mkdir that an existing folder satisfies; says what failed */
static int make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_seeds: mkdir %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int sub(const char *dir, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", dir, name);
    return make_dir(out);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    char wire[400], mem[400], bind[400];
    if (make_dir(argv[1]) != 0 || sub(argv[1], "wire", wire, sizeof wire) ||
        sub(argv[1], "mem", mem, sizeof mem) || sub(argv[1], "bind", bind, sizeof bind))
        return 1;
    bk_wire_buf b = { 0 };
    bk_err err = { 0 };
    const bk_wire_hdr h = { .run = "fuzz-run", .arm = "C", .rank = 1 };
    const uint64_t ns[5] = { 1200, 1300, 1250, 99999, 1 };
    const unsigned char blob[24] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    const void *blobs[2] = { blob, blob };
    const size_t lens[2] = { sizeof blob, 8 };
    const uint16_t tensor[8] = { 0x3f80, 0xbf80, 0, 0x7f80, 1, 2, 3, 4 };
    int rc = 0;
#define SEED(name, call)                                                            \
    do {                                                                            \
        if ((call) != BK_OK || put(wire, name, b.data, b.size) != 0) {               \
            fprintf(stderr, "fuzz_seeds: %s: %s\n", name, err.msg);                 \
            rc = 1;                                                                 \
        }                                                                           \
    } while (0)
    SEED("hello", bk_wire_hello(&b, &h, 2, 4242, blob, sizeof blob, &err));
    SEED("peers", bk_wire_peers(&b, &h, 2, blobs, lens, &err));
    SEED("samples", bk_wire_samples(&b, &h, 1, 256, ns, 5, &err));
    SEED("tensor", bk_wire_tensor(&b, &h, 0, "out", "bf16", tensor, sizeof tensor, &err));
    SEED("status", bk_wire_status(&b, &h, 0, 5, "engine: a failure", 512, 123456,
                                  "gate=1 pdl=1", 6, &err));
#undef SEED
    bk_wire_buf_free(&b);
    static const char meminfo[] = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\n"
                                  "MemAvailable:   20000000 kB\n";
    static const char v2[] = "0::/user.slice/user-0.slice/session-1.scope\n";
    static const char v2_mounts[] =
        "25 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
        "cgroup2 rw,nsdelegate,memory_recursiveprot\n";
    static const char v1[] = "12:memory:/docker/0123abcd\n11:cpu,cpuacct:/docker/0123abcd\n";
    static const char v1_mounts[] =
        "700 690 0:40 /docker/0123abcd /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup "
        "rw,memory\n701 690 0:41 / /sys/fs/cgroup/cpu\\040acct ro - cgroup cgroup rw,cpu\n";
    static const char hybrid[] = "0::/init.scope\n4:memory:/init.scope\n";
    static const char hybrid_mounts[] =
        "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    const char *const sets[3][3] = { { meminfo, v2, v2_mounts }, { meminfo, v1, v1_mounts },
                                     { meminfo, hybrid, hybrid_mounts } };
    const char *const names[3] = { "v2", "v1-docker", "hybrid" };
    for (int i = 0; i < 3; i++) {
        char buf[2048];
        size_t n = 0;
        for (int k = 0; k < 3; k++) {
            size_t l = strlen(sets[i][k]);
            memcpy(buf + n, sets[i][k], l);
            n += l;
            if (k < 2)
                buf[n++] = '\0';
        }
        if (put(mem, names[i], buf, n) != 0)
            rc = 1;
    }
    /* bind: mpirun on 8 GPUs; Slurm --gpus-per-task=2 (node of 8 ranks, 2 see these); a
     * UUID list; no device count known */
    static const char b1[] = "\x03\x08\x08\x08\x00\x00" "0,1,2,3,4,5,6,7\0\0";
    static const char b2[] = "\x01\x02\x08\x02\x00\x00" "4,5\0" "4,5\0" "0,1,2,3,4,5,6,7";
    static const char b3[] = "\x00\x01\x01\xff\xff\x01" "GPU-8f3e2a11-0000-4c5e-9c2b-aa01,"
                             "GPU-77aa\0\0";
    if (put(bind, "mpirun8", b1, sizeof b1 - 1) || put(bind, "slurm2", b2, sizeof b2 - 1) ||
        put(bind, "uuids", b3, sizeof b3 - 1))
        rc = 1;
    return rc;
}
