/* cmd_score.c - `bracket score RECORD`: recompute the verdict from the raw samples. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/cli.h"
#include "runner/report.h"
#include "runner/run.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bracket score RECORD [--quiet]\n"
        "\n"
        "Recomputes the score and verdict of a run from RECORD (DIR/<run-id>/record.json)\n"
        "and the raw samples beside it (samples.msgpack), with the thresholds and seed the\n"
        "record holds, and checks that they equal what the record says, bit for bit.\n"
        "\n"
        "  -q, --quiet   print only the verdict line\n"
        "  -h, --help    this text\n"
        "\n"
        "Exit status: 0 PASS, 3 FAIL, 4 NO_DECISION, 2 bad input or usage,\n"
        "1 internal failure or a recomputed score that differs from the record.\n");
}

/* Compare the recomputed numbers with the record's; 0 when equal. */
static int same_as_record(const char *path, const bk_score *sc, char *why, size_t len)
{
    json_error_t je;
    json_t *rec = json_load_file(path, 0, &je);
    int rc = -1;
    if (!rec) {
        snprintf(why, len, "cannot reread %s", path);
        return -1;
    }
    const char *verdict = json_string_value(json_object_get(rec, "verdict"));
    json_t *score = json_object_get(rec, "score");
    json_t *s = json_object_get(score, "speedup");
    json_t *iv = json_object_get(score, "speedup_interval");
    if (!verdict || strcmp(verdict, bk_verdict_name(sc->verdict)) != 0) {
        snprintf(why, len, "verdict %s, the record says %s", bk_verdict_name(sc->verdict),
                 verdict ? verdict : "(none)");
        goto out;
    }
    if (!!s != !!sc->have_speedup ||
        (s && (json_real_value(s) != sc->speedup ||
               json_real_value(json_array_get(iv, 0)) != sc->speedup_lo ||
               json_real_value(json_array_get(iv, 1)) != sc->speedup_hi))) {
        snprintf(why, len, "speed-up %.17g [%.17g, %.17g], the record says %.17g [%.17g, %.17g]",
                 sc->speedup, sc->speedup_lo, sc->speedup_hi, s ? json_real_value(s) : NAN,
                 json_real_value(json_array_get(iv, 0)), json_real_value(json_array_get(iv, 1)));
        goto out;
    }
    rc = 0;
out:
    json_decref(rec);
    return rc;
}

int bk_cmd_score(int argc, char **argv)
{
    static const struct option opts[] = { { "quiet", no_argument, 0, 'q' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    int quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        if (c == 'q')
            quiet = 1;
        else if (c == 'h') {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bracket score: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return BK_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "bracket score: one RECORD expected\n");
        usage(stderr);
        return BK_EXIT_USAGE;
    }
    const char *path = argv[optind];
    bk_run *run = calloc(1, sizeof *run);
    bk_err err = { 0 };
    int rc = BK_EXIT_INTERNAL;
    if (!run)
        return rc;
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    bk_status st = bk_record_read(path, run, &err);
    if (st != BK_OK) {
        fprintf(stderr, "bracket score: %s\n", err.msg);
        rc = st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
        goto out;
    }
    if (bk_run_evaluate(run, 0, &sc, &err) != BK_OK) {
        fprintf(stderr, "bracket score: %s\n", err.msg);
        goto out;
    }
    if (!quiet)
        bk_report_print(stdout, run, &sc);
    else
        printf("verdict: %s (%s)\n", bk_verdict_name(sc.verdict), sc.status);
    char why[512];
    if (same_as_record(path, &sc, why, sizeof why) != 0) {
        fprintf(stderr, "bracket score: the recomputed score differs from the record: %s\n", why);
        goto out;
    }
    printf("recomputed from %s: identical to the record\n", path);
    rc = sc.verdict == BK_VERDICT_PASS ? BK_EXIT_PASS
       : sc.verdict == BK_VERDICT_FAIL ? BK_EXIT_FAIL : BK_EXIT_NO_DECISION;
out:
    for (int i = 0; i < BK_ARM_NAMES; i++)
        bk_arm_free(&run->arms[i], run->plan.workload.nshapes, run->noutputs);
    bk_run_free(run);
    free(run);
    return rc;
}
