/* fuzz_plan.c - libFuzzer: any text as a plan (bk_plan_parse), and its first line as a --set
 * applied to plans/demo-cpu.json. Neither may crash, read out of bounds or leak (ASan,
 * UBSan); a refusal names what is wrong; an accepted plan is one the checker accepts again
 * from the same text. Seeds: plans/ and tests/fixtures/plans/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/plan.h"
#include "runner/record_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *g_demo; /* plans/demo-cpu.json */

static void parse(const char *text, const char *const *sets, int nsets)
{
    bk_plan p;
    bk_err err = { 0 };
    if (bk_plan_parse(text, "fuzz.json", sets, nsets, &p, &err) != BK_OK) {
        if (!err.msg[0]) {
            fprintf(stderr, "a plan refused without a reason\n");
            abort();
        }
        return;
    }
    bk_plan q;
    bk_err_clear(&err);
    if (bk_plan_parse(text, "fuzz.json", sets, nsets, &q, &err) != BK_OK) {
        fprintf(stderr, "accepted once, refused the second time: %s\n", err.msg);
        abort();
    }
    bk_plan_free(&q);
    bk_plan_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_demo) {
        size_t len = 0;
        bk_err err = { 0 };
        if (bk_read_file(BK_SOURCE_DIR "/plans/demo-cpu.json", &g_demo, &len, &err) != BK_OK) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    parse(text, NULL, 0);
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    const char *set = text;
    parse(g_demo, &set, 1);
    free(text);
    return 0;
}
