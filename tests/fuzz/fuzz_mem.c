/* fuzz_mem.c - libFuzzer: the memory check's readers (bk__mem_available_in) on any
 * /proc/meminfo, /proc/self/cgroup and /proc/self/mountinfo: the input split at its first
 * two NUL bytes into the three files. No crash, no read out of bounds, no leak (ASan,
 * UBSan); the answer is 0 (nothing known) or 1 with a number of bytes. The cgroup files it
 * then reads are this machine's, where a mount line names them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "runner/memory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[3][128];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[3] = { "meminfo", "cgroup", "mountinfo" };
    if (!g_path[0][0])
        for (int i = 0; i < 3; i++)
            snprintf(g_path[i], sizeof g_path[i], "%s/%s", fuzz_tmpdir("mem"), names[i]);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        const uint8_t *end = i < 2 && at < size ? memchr(data + at, 0, size - at) : NULL;
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        if (fuzz_put(g_path[i], data + at, len) != 0)
            abort();
        at += len + (end ? 1 : 0);
        if (at > size)
            at = size;
    }
    uint64_t bytes = 0;
    char from[64];
    int rc = bk__mem_available_in(g_path[0], g_path[1], g_path[2], &bytes, from, sizeof from);
    if ((rc != 0 && rc != 1) || !memchr(from, '\0', sizeof from))
        abort();
    return 0;
}
