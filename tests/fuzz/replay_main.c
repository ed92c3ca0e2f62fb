/* replay_main.c - a main() for the fuzz harnesses without libFuzzer (any compiler): each
 * argument is a file run through LLVMFuzzerTestOneInput once, a folder whose files are, or a
 * corpus pack (*.pack: records of a 4-byte little-endian length and that many bytes, as
 * tests/fuzz/pack.py writes them). ctest runs every harness this way over its corpus in
 * tests/fuzz/corpus, so the sanitizer build (make test-sanitize) replays what the fuzzers
 * found, and the harnesses keep compiling. A harness reports a failure by aborting. What the
 * code under test prints on stdout is discarded. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/record_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long g_runs;

/* One input, in an allocation of exactly its size, so that a read past it is a read past
 * an allocation (ASan). */
static int run_one(const uint8_t *p, size_t len)
{
    uint8_t *one = malloc(len ? len : 1);
    if (!one)
        return -1;
    memcpy(one, p, len);
    LLVMFuzzerTestOneInput(one, len);
    free(one);
    g_runs++;
    return 0;
}

static int run_pack(const char *path, const uint8_t *p, size_t n)
{
    size_t at = 0;
    while (at < n) {
        if (n - at < 4) {
            fprintf(stderr, "%s: a record cut short at byte %zu\n", path, at);
            return -1;
        }
        const size_t len = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 |
                           (size_t)p[at + 3] << 24;
        at += 4;
        if (len > n - at) {
            fprintf(stderr, "%s: a record of %zu bytes at byte %zu runs past the end\n", path,
                    len, at - 4);
            return -1;
        }
        if (run_one(p + at, len) != 0)
            return -1;
        at += len;
    }
    return 0;
}

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            perror(path);
            return -1;
        }
        struct dirent *e;
        int rc = 0;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rc |= run_path(sub);
        }
        closedir(d);
        return rc;
    }
    char *data = NULL;
    size_t size = 0;
    bk_err err = { 0 };
    if (bk_read_file(path, &data, &size, &err) != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    const size_t l = strlen(path);
    const int rc = l > 5 && strcmp(path + l - 5, ".pack") == 0
                       ? run_pack(path, (const uint8_t *)data, size)
                       : run_one((const uint8_t *)data, size);
    free(data);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|FOLDER|CORPUS.pack...\n", argv[0]);
        return 2;
    }
    /* what the code under test prints on stdout (bracket score's report) goes nowhere; its
     * errors and the sanitizers' reports stay on stderr */
    fflush(stdout);
    const int out = dup(1), null = open("/dev/null", O_WRONLY);
    if (out < 0 || null < 0 || dup2(null, 1) < 0) {
        perror("replay: stdout to /dev/null");
        return 1;
    }
    close(null);
    int rc = 0;
    for (int i = 1; i < argc; i++)
        rc |= run_path(argv[i]);
    fflush(stdout);
    dup2(out, 1);
    close(out);
    if (rc) {
        printf("%s: %ld inputs replayed, none failed, but some could not be read (above)\n",
               argv[0], g_runs);
        return 1;
    }
    printf("%s: %ld inputs replayed, none failed\n", argv[0], g_runs);
    return 0;
}
