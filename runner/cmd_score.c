/* cmd_score.c - `bracket score RECORD`: recompute the verdict from the raw samples. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/report.h"
#include "runner/run.h"
#include "runner/score_evidence.h"
#include "runner/terminate.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bracket score RECORD [--quiet] [--strict]\n"
        "\n"
        "Recomputes the score and verdict of a run from RECORD (DIR/<run-id>/record.json,\n"
        "or the run's folder) and the raw samples beside it (samples.msgpack), with the\n"
        "thresholds and seed the record holds, and checks that they equal what the record\n"
        "says, bit for bit. First the record is checked against its own evidence: the\n"
        "plan's and the samples' digests (plan_digest, samples.digest), the topology\n"
        "snapshot's (topology_digest, against topology.json, which must load as a\n"
        "bracket.topology/1 snapshot), each timed arm's rounds against the plan's\n"
        "protocol.repeats, each arm's ok against its processes' exit codes, signals and\n"
        "time-outs, the quality state against quality.tensors' counts. Then the verdict,\n"
        "the score, each timed arm's summary, the status and the reasons are compared;\n"
        "the first difference is named by its JSON path. identity.binary_digest is\n"
        "checked for its form only (records are scored on other machines). An unfinished\n"
        "record (the one a run writes before each arm, left when it ended abruptly) is\n"
        "rescored as such: NO_DECISION, with a note that says so. A record that differs\n"
        "from its evidence or its recomputation prints nothing on stdout (no report, no\n"
        "verdict line): its first difference goes to stderr. Otherwise it prints the\n"
        "run's header and report as the run did, from the record.\n"
        "\n"
        "  -q, --quiet   no report: the verdict line, then the check's outcome (any note\n"
        "                on the evidence, and \"recomputed from RECORD: identical to the\n"
        "                record\")\n"
        "  -s, --strict  refuse a record identical to its recomputation when an identity\n"
        "                it claims cannot be checked: its topology.json missing\n"
        "                (identity.topology_digest), identity.binary_digest \"unknown\", or\n"
        "                a --set that changed the candidate's variant but not its source\n"
        "                digest (identity.source_digest_note). Each is named on stderr;\n"
        "                nothing is printed on stdout (no report, no verdict line);\n"
        "                exit 2\n"
        "  -h, --help    this text\n"
        "\n"
        "Exit status (the record identical to its recomputation): 0 PASS, 3 FAIL,\n"
        "4 NO_DECISION; 2 bad input or usage (a record or samples file unreadable,\n"
        "malformed or truncated, a topology.json that is no file; samples of another\n"
        "run, or a sample block missing, repeated or not the count its process says;\n"
        "with --strict, an identity not checked); 1 internal failure or a record that\n"
        "differs from its evidence (digests, topology.json, arms, quality) or its\n"
        "recomputation. A report that cannot be written turns a 0 into a 1.\n");
}

/* ---- the recomputation against the record ---- */

static int differ(const char *at, const json_t *want, const json_t *got, char *why, size_t len)
{
    char *w = want ? json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17))
                   : NULL;
    char *g = got ? json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17))
                  : NULL;
    snprintf(why, len, "%s: the record says %.300s, recomputed %.300s", at, g ? g : "(absent)",
             w ? w : "(absent)");
    free(w);
    free(g);
    return -1;
}

/* The first place, by JSON path, where `got` (the record's) differs from `want` (what the
 * run writes for the recomputed score); 0 when none. Numbers compare by value (a record may
 * hold 1.0 as 1); a key on either side only is a difference. */
static int json_diff(const json_t *want, const json_t *got, const char *at, char *why, size_t len)
{
    char path[256];
    const char *k;
    json_t *v;
    if (json_is_number(want) && json_is_number(got)) {
        if (json_is_integer(want) && json_is_integer(got)
                ? json_integer_value(want) == json_integer_value(got)
                : json_number_value(want) == json_number_value(got))
            return 0;
    } else if (json_is_object(want) && json_is_object(got)) {
        json_object_foreach((json_t *)want, k, v) {
            snprintf(path, sizeof path, "%s.%s", at, k);
            if (json_diff(v, json_object_get(got, k), path, why, len))
                return -1;
        }
        json_object_foreach((json_t *)got, k, v)
            if (!json_object_get(want, k)) {
                snprintf(path, sizeof path, "%s.%s", at, k);
                return differ(path, NULL, v, why, len);
            }
        return 0;
    } else if (json_is_array(want) && json_is_array(got) &&
               json_array_size(want) == json_array_size(got)) {
        for (size_t i = 0; i < json_array_size(want); i++) {
            snprintf(path, sizeof path, "%s[%zu]", at, i);
            if (json_diff(json_array_get(want, i), json_array_get(got, i), path, why, len))
                return -1;
        }
        return 0;
    } else if (json_is_string(want) && json_is_string(got)) {
        if (!strcmp(json_string_value(want), json_string_value(got)))
            return 0;
    } else if (want && got && !json_is_array(want) && json_typeof(want) == json_typeof(got)) {
        return 0; /* true, false, null */
    }
    return differ(at, want, got, why, len);
}

/* The verdict, the score object, each timed arm's summary, the status and the reasons, as
 * the run would write them for `sc`, against the record's; 0 when all are equal. */
static int same_as_record(const json_t *rec, const bk_run *run, const bk_score *sc, char *why,
                          size_t len)
{
    static const int timed[] = { BK_ARM_IDX_B, BK_ARM_IDX_C, BK_ARM_IDX_BP };
    json_t *top = json_pack("{s:s, s:s, s:s}", "verdict", bk_verdict_name(sc->verdict), "status",
                            sc->status, "reasons", sc->reasons);
    json_t *score = bk_record_score_json(sc);
    int rc = -1;
    if (!top || !score) {
        snprintf(why, len, "out of memory");
        goto out;
    }
    if (json_diff(json_object_get(top, "verdict"), json_object_get(rec, "verdict"), "verdict",
                  why, len) ||
        json_diff(score, json_object_get(rec, "score"), "score", why, len))
        goto out;
    for (size_t i = 0; i < sizeof timed / sizeof timed[0]; i++) {
        char at[32];
        json_t *arm = bk_record_arm_json(run, sc, timed[i]);
        const json_t *want = json_object_get(arm, "summary");
        const json_t *got = json_object_get(json_array_get(json_object_get(rec, "arms"),
                                                           (size_t)timed[i]), "summary");
        snprintf(at, sizeof at, "arms[%d].summary", timed[i]);
        int d = (want || got) && json_diff(want, got, at, why, len);
        json_decref(arm);
        if (d)
            goto out;
    }
    if (json_diff(json_object_get(top, "status"), json_object_get(rec, "status"), "status", why,
                  len) ||
        json_diff(json_object_get(top, "reasons"), json_object_get(rec, "reasons"), "reasons",
                  why, len))
        goto out;
    rc = 0;
out:
    json_decref(top);
    json_decref(score);
    return rc;
}

/* What --strict refuses: the identities the record claims and no check can confirm,
 * joined with "; " into `gaps` (empty when there is none). `topo_missing`: check_topology
 * found no topology.json. */
static void strict_gaps(const bk_run *run, int topo_missing, char *gaps, size_t len)
{
    gaps[0] = '\0';
    if (topo_missing)
        snprintf(gaps, len, "%s/topology.json is missing: identity.topology_digest cannot be "
                 "checked", run->run_dir);
    if (!strcmp(run->binary_digest, "unknown"))
        snprintf(gaps + strlen(gaps), len - strlen(gaps), "%sidentity.binary_digest is "
                 "\"unknown\": the bracket binary that ran is not identified",
                 gaps[0] ? "; " : "");
    if (run->plan.source_digest_note[0])
        snprintf(gaps + strlen(gaps), len - strlen(gaps), "%sidentity.source_digest_note is "
                 "present: identity.candidate_source_digest is not the variant's that ran (run "
                 "it again with --set candidate.source_digest=... beside candidate.variant)",
                 gaps[0] ? "; " : "");
}

/* The score from the record's samples, as the run computed it. A run cut short by SIGTERM /
 * SIGINT marked its score: so is the recomputation, from the arms' and stopped's evidence
 * (bk_run_terminated), not from the record's verdict text, which anyone could have
 * prefixed. An unfinished record (checked against its arms by check_unfinished) is marked
 * as the run marked it before the arm its `stopped` names. */
static bk_status recompute(const bk_run *run, bk_score *sc, bk_err *err)
{
    char tname[32], unused[2] = "-";
    bk_status st = bk_run_evaluate(run, 0, sc, err);
    if (st == BK_OK && bk_run_terminated(run, tname, sizeof tname))
        bk_terminate_mark_as(sc, tname, unused, sizeof unused);
    else if (st == BK_OK && run->unfinished && bk_run_unfinished_arm(run->stopped) >= 0)
        bk_terminate_mark_unfinished(sc, bk_arm_names[bk_run_unfinished_arm(run->stopped)]);
    return st;
}

int bk_cmd_score(int argc, char **argv)
{
    static const struct option opts[] = { { "quiet", no_argument, 0, 'q' },
                                          { "strict", no_argument, 0, 's' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    int quiet = 0, strict = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qsh", opts, NULL)) != -1) {
        if (c == 'q')
            quiet = 1;
        else if (c == 's')
            strict = 1;
        else if (c == 'h') {
            usage(stdout);
            return 0;
        } else {
            char msg[256];
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket score: %s\n", msg);
            fprintf(stderr, "(bracket score --help: the whole usage)\n");
            return BK_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "bracket score: one RECORD expected\n");
        fprintf(stderr, "(bracket score --help: the whole usage)\n");
        return BK_EXIT_USAGE;
    }
    /* the run's folder names its record */
    char in_dir[sizeof ((bk_run *)0)->run_dir + sizeof "/record.json"];
    const char *path = argv[optind];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
            n--;
        if ((size_t)snprintf(in_dir, sizeof in_dir, "%.*s/record.json", (int)n, path) >=
            sizeof in_dir) {
            fprintf(stderr, "bracket score: %s: path too long (%zu bytes at most)\n", path,
                    sizeof in_dir - sizeof "/record.json");
            return BK_EXIT_USAGE;
        }
        if (access(in_dir, F_OK) != 0) {
            fprintf(stderr, "bracket score: %s: a folder with no record.json (give a run's "
                    "folder, DIR/<run-id>, or its record.json)\n", path);
            return BK_EXIT_USAGE;
        }
        path = in_dir;
    }
    bk_run *run = calloc(1, sizeof *run);
    bk_err err = { 0 };
    int rc = BK_EXIT_INTERNAL;
    if (!run)
        return rc;
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    json_t *rec = NULL;
    json_error_t je;
    char why[2048];
    bk_status st = bk_record_read(path, run, &err);
    if (st != BK_OK) {
        fprintf(stderr, "bracket score: %s\n", err.msg);
        rc = st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
        goto out;
    }
    if (!(rec = json_load_file(path, JSON_REJECT_DUPLICATES, &je))) {
        fprintf(stderr, "bracket score: cannot reread %s: %s\n", path, je.text);
        goto out;
    }
    /* a record that does not agree with its own evidence is not scored */
    char note[1024] = "";
    int topo_missing = 0, topo_rc = 0;
    if ((topo_rc = bk__score_evidence(path, rec, run, why, sizeof why, note, sizeof note,
                                      &topo_missing)) != 0) {
        if (topo_rc == -2 || topo_rc == -3) { /* topology.json cannot be read: bad input,
                                                * as a record's; or this machine failed */
            fprintf(stderr, "bracket score: %s\n", why);
            rc = topo_rc == -2 ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
            goto out;
        }
        fprintf(stderr, "bracket score: the record differs from its evidence: %s\n", why);
        goto out;
    }
    if (recompute(run, &sc, &err) != BK_OK) {
        fprintf(stderr, "bracket score: %s\n", err.msg);
        goto out;
    }
    /* checked before anything is printed: a record that differs gets no report (its
     * verdict line would read as the record's) */
    if (same_as_record(rec, run, &sc, why, sizeof why) != 0) {
        /* a record from before 2026-12-04 cut long reasons where the bytes ran out */
        bk_score old;
        char why_old[sizeof why];
        bk_cut_reasons_by_bytes(1);
        const int same_old = recompute(run, &old, &err) == BK_OK &&
                             same_as_record(rec, run, &old, why_old, sizeof why_old) == 0;
        bk_cut_reasons_by_bytes(0);
        if (!same_old) {
            fprintf(stderr, "bracket score: the recomputed score differs from the record %s: "
                    "%s\n", path, why);
            goto out;
        }
        snprintf(note + strlen(note), sizeof note - strlen(note), "%sits reasons are cut "
                 "where the bytes ran out, as records written before 2026-12-04 cut them",
                 note[0] ? "; " : "");
    }
    /* decided before anything is printed: a refused record gets no report and no verdict
     * line (a script could take them for an accepted one's), as a record that differs */
    if (strict) {
        strict_gaps(run, topo_missing, why, sizeof why);
        if (why[0]) {
            fprintf(stderr, "bracket score: --strict: %s is refused: %s\n", path, why);
            rc = BK_EXIT_USAGE;
            goto out;
        }
    }
    if (!quiet) {
        bk_report_header(stdout, run);
        bk_report_print(stdout, run, &sc);
    } else
        printf("verdict: %s (%s)\n", bk_verdict_name(sc.verdict), sc.status);
    if (run->unfinished)
        snprintf(note + strlen(note), sizeof note - strlen(note), "%sunfinished: the run wrote "
                 "this record before arm %s and ended without replacing it with its final "
                 "record; arms from %s on did not run here", note[0] ? "; " : "",
                 bk_arm_names[bk_run_unfinished_arm(run->stopped)],
                 bk_arm_names[bk_run_unfinished_arm(run->stopped)]);
    if (note[0])
        printf("note: %s\n", note);
    printf("recomputed from %s: identical to the record\n", path);
    rc = sc.verdict == BK_VERDICT_PASS ? BK_EXIT_PASS
       : sc.verdict == BK_VERDICT_FAIL ? BK_EXIT_FAIL : BK_EXIT_NO_DECISION;
out:
    json_decref(rec);
    bk_run_free(run); /* the arms too */
    free(run);
    return rc;
}
