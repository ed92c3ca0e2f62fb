/* fuzz_record.c - libFuzzer: `bracket score` (bk_cmd_score, in this process) on a run folder
 * whose record.json is the input, or whose samples.msgpack (BK_FUZZ_FILE=samples) or
 * topology.json (BK_FUZZ_FILE=topology) is, the other files those of
 * tests/fixtures/records/byte-cut-reasons. It may not crash, read out
 * of bounds or leak (ASan, UBSan), and answers with one of its exit statuses: 0/3/4 (the
 * verdict, recomputed identical), 1 (differs from its evidence or recomputation), 2 (not a
 * record it can read). Seeds: that fixture's files. Run with -close_fd_mask=3 (its report
 * goes to stdout, its errors to stderr). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/record_io.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIXTURE BK_SOURCE_DIR "/tests/fixtures/records/byte-cut-reasons"

static char g_record[128], g_target[128];

static void copy_in(const char *dir, const char *name)
{
    char src[256], dst[160];
    char *text = NULL;
    size_t len = 0;
    bk_err err = { 0 };
    snprintf(src, sizeof src, "%s/%s", FIXTURE, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (bk_read_file(src, &text, &len, &err) != BK_OK ||
        bk_write_atomic(dst, text, len, &err) != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_record[0]) {
        const char *which = getenv("BK_FUZZ_FILE");
        const char *dir = fuzz_tmpdir("record");
        copy_in(dir, "record.json");
        copy_in(dir, "samples.msgpack");
        copy_in(dir, "topology.json");
        snprintf(g_record, sizeof g_record, "%s/record.json", dir);
        snprintf(g_target, sizeof g_target, "%s/%s", dir,
                 !which ? "record.json" : !strcmp(which, "samples") ? "samples.msgpack"
                 : !strcmp(which, "topology") ? "topology.json" : "record.json");
    }
    if (fuzz_put(g_target, data, size) != 0)
        abort();
    char a0[] = "score", a1[] = "--strict";
    char *argv[] = { a0, a1, g_record, NULL };
    int rc = bk_cmd_score(3, argv);
    if (rc != 0 && rc != 1 && rc != 2 && rc != 3 && rc != 4) {
        fprintf(stderr, "bracket score exited %d\n", rc);
        abort();
    }
    return 0;
}
