/* score_evidence.c - `bracket score`'s checks of a record against its own evidence: the
 * plan's, the samples' and the topology snapshot's digests, the arms against their processes
 * and the plan, the lanes against their policy, the quality state against its tensors. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/catalog.h"
#include "runner/digest.h"
#include "runner/record_io.h"
#include "runner/run.h"
#include "runner/score_evidence.h"
#include "topology/topology.h"

/* ---- the record's own evidence: digests, arms, quality ---- */

/* The plan's digest (run_setup.c: sha256 of bk_plan_dump) and the samples file's (record.c:
 * sha256 of its bytes) recomputed, and the identity's plan fields; 0 when they agree. The
 * plan is hashed as the record holds it: the loader of today may fill defaults (a record
 * from before protocol.repeats has none) that the run did not hash. */
static int check_digests(const char *path, json_t *rec, const bk_run *run, char *why,
                         size_t len)
{
    char d[BK_SHA256_HEX_LEN], spath[800];
    bk_err e = { 0 };
    bk_plan as_run;
    memset(&as_run, 0, sizeof as_run);
    as_run.doc = json_object_get(rec, "plan"); /* borrowed */
    char *text = bk_plan_dump(&as_run);
    if (!text) {
        snprintf(why, len, "%s: plan: cannot serialise it", path);
        return -1;
    }
    bk_sha256_hex(text, strlen(text), d);
    free(text);
    if (strcmp(d, run->plan_digest) != 0) {
        snprintf(why, len, "%s: plan_digest: the record says '%s', its plan hashes to %s (the "
                 "plan or its digest was changed)", path, run->plan_digest, d);
        return -1;
    }
    /* the samples are read from samples.msgpack beside the record, the only file a run
     * writes them to: a record naming another is not one a run wrote */
    const json_t *samples = json_object_get(rec, "samples");
    const char *sf = json_string_value(json_object_get(samples, "file"));
    if (!sf || strcmp(sf, "samples.msgpack") != 0) {
        snprintf(why, len, "%s: samples.file: the record says '%s'; a run writes its samples to "
                 "samples.msgpack beside its record, the file read here", path,
                 sf ? sf : "(missing)");
        return -1;
    }
    snprintf(spath, sizeof spath, "%s/samples.msgpack", run->run_dir);
    const char *sd = json_string_value(json_object_get(samples, "digest"));
    if (bk_sha256_file(spath, d, &e) != BK_OK) {
        snprintf(why, len, "%s", e.msg);
        return -1;
    }
    if (!sd || strcmp(d, sd) != 0) {
        snprintf(why, len, "%s: its digest is %s, the record's samples.digest says '%s' (the "
                 "samples or the digest were changed)", spath, d, sd ? sd : "(missing)");
        return -1;
    }
    const json_t *id = json_object_get(rec, "identity");
    const char *stack = json_string_value(json_object_get(id, "stack_digest"));
    const char *src = json_string_value(json_object_get(id, "candidate_source_digest"));
    const json_t *gen = json_object_get(id, "incumbent_generation");
    const bk_plan *p = &run->plan;
    if (!stack || strcmp(stack, p->arena.stack_digest) != 0)
        snprintf(why, len, "%s: identity.stack_digest: the record says '%s', its plan says %s",
                 path, stack ? stack : "(missing)", p->arena.stack_digest);
    else if (!src || strcmp(src, p->candidate.source_digest) != 0)
        snprintf(why, len, "%s: identity.candidate_source_digest: the record says '%s', its "
                 "plan says %s", path, src ? src : "(missing)", p->candidate.source_digest);
    else if (!json_is_integer(gen) || json_integer_value(gen) != p->arena.incumbent_generation)
        snprintf(why, len, "%s: identity.incumbent_generation: differs from its plan's %lld",
                 path, (long long)p->arena.incumbent_generation);
    else
        return 0;
    return -1;
}

/* topology.json read as the topology loader reads a snapshot (bk_topo_parse, what
 * `bracket topo --topology FILE` takes): a run writes a bracket.topology/1 snapshot, so JSON
 * that is none (an empty object, an array, no hosts) is evidence that differs, whatever its
 * digest. 0 when it is one; -1 with the loader's reason in why; -3 when this machine failed
 * (out of memory). */
static int check_snapshot(const char *tpath, const char *text, char *why, size_t len)
{
    bk_topo *t = NULL;
    bk_err e = { 0 };
    const bk_status st = bk_topo_parse(text, tpath, &t, &e);
    bk_topo_free(t);
    if (st == BK_OK)
        return 0;
    /* the loader's message starts with the file's name (made printable, as BK_FAIL's
     * messages are), which why names first */
    char shown[sizeof e.msg];
    snprintf(shown, sizeof shown, "%s", tpath);
    bk_text_clean(shown);
    const size_t n = strlen(shown);
    const char *msg = !strncmp(e.msg, shown, n) && !strncmp(e.msg + n, ": ", 2) ? e.msg + n + 2
                                                                                : e.msg;
    if (st != BK_ERR_INPUT) {
        snprintf(why, len, "%s: %s", tpath, msg);
        return -3;
    }
    snprintf(why, len, "%s: not a bracket.topology/1 snapshot (the topology loader says: %s)",
             tpath, msg);
    return -1;
}

/* identity.topology_digest against the topology.json beside the record: FNV-1a 64 of its
 * canonical compact form (docs/record.md), then the file read as a snapshot (check_snapshot).
 * Records from before 2026-12-03 were hashed from a wrong offset basis (BK_FNV1A64_OLD_BASIS);
 * such a digest is accepted, and said so in `note`. A record whose topology.json was never
 * written (the run reports that) is scored with a note too. 0 when they agree; -1 when they
 * differ; -2 when topology.json cannot be read (bad input); -3 when this machine failed. */
static int check_topology(const char *path, const json_t *rec, const bk_run *run, char *why,
                          size_t len, char *note, size_t note_len, int *missing)
{
    char tpath[800], got[40], old[40];
    const char *want = json_string_value(json_object_get(json_object_get(rec, "identity"),
                                                         "topology_digest"));
    snprintf(tpath, sizeof tpath, "%s/topology.json", run->run_dir);
    if (access(tpath, F_OK) != 0 && errno == ENOENT) {
        *missing = 1;
        snprintf(note, note_len, "%s is missing: identity.topology_digest not checked", tpath);
        return 0;
    }
    /* a folder, a pipe (whose open would wait for a writer), a device or a file past a
     * snapshot's size is not read: bad input (-2), not evidence that differs */
    char *text = NULL;
    size_t tlen = 0;
    bk_err rerr = { 0 };
    int rc = -1;
    if (bk_read_file_max(tpath, BK_TOPO_MAX_FILE, "a topology snapshot", &text, &tlen, &rerr) !=
        BK_OK) {
        snprintf(why, len, "%s", rerr.msg);
        return -2;
    }
    json_error_t je;
    json_t *t = json_loadb(text, tlen, JSON_REJECT_DUPLICATES, &je);
    char *compact = t ? json_dumps(t, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(t);
    if (!compact) {
        snprintf(why, len, "%s: not readable JSON (%s)", tpath, t ? "cannot serialise" : je.text);
        goto out;
    }
    snprintf(got, sizeof got, "fnv1a64:%016" PRIx64, bk_fnv1a64(compact, strlen(compact)));
    snprintf(old, sizeof old, "fnv1a64:%016" PRIx64,
             bk_fnv1a64_from(BK_FNV1A64_OLD_BASIS, compact, strlen(compact)));
    if (want && !strcmp(want, got)) {
        rc = check_snapshot(tpath, text, why, len);
    } else if (want && !strcmp(want, old)) {
        snprintf(note, note_len, "identity.topology_digest was made with the offset basis of "
                 "records before 2026-12-03; it matches %s", tpath);
        rc = check_snapshot(tpath, text, why, len);
    } else {
        snprintf(why, len, "%s: identity.topology_digest: the record says '%s', %s hashes to %s "
                 "(the snapshot or the digest was changed)", path, want ? want : "(missing)",
                 tpath, got);
    }
out:
    free(compact);
    free(text);
    return rc;
}

/* The rounds of each timed arm that ran against the plan's protocol.repeats: the run gives
 * every timed arm protocol.repeats rounds, failed or cut short ones too (their later rounds
 * zero-filled), and audits one, which the reader holds them to (bk_run_arm). A record from
 * before repeats has neither: both read as 1. 0 when they agree. */
static int check_rounds(const char *path, const bk_run *run, char *why, size_t len)
{
    const int want = run->plan.protocol.repeats;
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        if (a->ran && bk_arm_rounds(a) != want) {
            snprintf(why, len, "%s: arms[%d] (%s).rounds: the record says %d, its plan's "
                     "protocol.repeats says %d (a timed arm runs protocol.repeats rounds)",
                     path, idx, a->name, bk_arm_rounds(a), want);
            return -1;
        }
    }
    return 0;
}

/* Each arm's ok judged again from its processes, round by round, as the run judged it
 * (bk_run_judge_arm; a failed round ends the arm): an arm marked ok whose processes failed,
 * or marked failed whose processes all ended well, is refused. A signal fails the arm it
 * reached only where its processes show it (killed, unreported, short of samples). */
static int check_arms(const char *path, const bk_run *run, char *why, size_t len)
{
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        if (!a->ran)
            continue;
        bk_arm_run v = *a;
        v.ok = 1;
        for (int k = 0; k < bk_arm_rounds(a) && v.ok; k++) {
            char name[BK_ARM_LEN];
            v.name = bk_arm_round_name(idx, k, name);
            v.rounds = 1;
            v.r = a->r + (size_t)k * (size_t)a->world;
            v.reason[0] = '\0';
            bk_run_judge_arm(run, &v);
        }
        if (a->ok && !v.ok) {
            snprintf(why, len, "%s: arms[%d].ok: the record says true, its processes say false "
                     "(%s)", path, idx, v.reason);
            return -1;
        }
        /* (an arm a signal reached while it ran is failed only when its processes show it:
         * killed, unreported or short of samples; bk_run_arm) */
        if (!a->ok && v.ok) {
            snprintf(why, len, "%s: arms[%d].ok: the record says false, but its processes ended "
                     "well", path, idx);
            return -1;
        }
    }
    return 0;
}

/* `backend` against the plan's (when the plan named one): before the arms are judged again,
 * as their routing follows from it. Then (check_run_facts) `rehearsal` against what makes
 * one (the cpu backend, or B and C on the same ranks), and `stopped` against the arms:
 * the first arm that failed ("arm X failed; later arms not run", or for one a signal cut
 * short "terminated by NAME during arm X; later arms not run", or as records before
 * 2026-12-03 put it, the former), else the first arm not run ("terminated by NAME before
 * arm X"; under v7 a B' that B/C made unnecessary is "v7: B/C decided (V), B' not run";
 * in an unfinished record "unfinished: written before arm X; the run did not replace it"),
 * else "". 0 when the record says what its arms give. */
static int check_backend(const char *path, const json_t *rec, const bk_run *run, char *why,
                         size_t len)
{
    const char *backend = json_string_value(json_object_get(rec, "backend"));
    const bk_backend pb = run->plan.backend;
    if (!backend || (strcmp(backend, "cpu") && strcmp(backend, "cuda")) ||
        (pb != BK_BACKEND_AUTO && strcmp(backend, bk_backend_name(pb)))) {
        snprintf(why, len, "%s: backend: the record says '%s', its plan says %s", path,
                 backend ? backend : "(missing)", bk_backend_name(pb));
        return -1;
    }
    return 0;
}

static int check_run_facts(const char *path, const json_t *rec, const bk_run *run, char *why,
                           size_t len)
{
    const char *backend = json_string_value(json_object_get(rec, "backend")); /* checked */
    const int shared = run->shared_lanes; /* as record_read derives it from lanes */
    int want_rehearsal = !strcmp(backend, "cpu") || shared;
    const json_t *reh = json_object_get(rec, "rehearsal");
    if (!json_is_boolean(reh) || json_is_true(reh) != want_rehearsal) {
        snprintf(why, len, "%s: rehearsal: the record says %s, its backend (%s) and lanes (%s) "
                 "make it %s", path, json_is_boolean(reh) ? (json_is_true(reh) ? "true" : "false")
                                                          : "(missing)",
                 backend, shared ? "shared" : "disjoint", want_rehearsal ? "true" : "false");
        return -1;
    }
    const char *stopped = json_string_value(json_object_get(rec, "stopped"));
    char want[256] = "", alt[256] = "", name[32];
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) { /* in run order */
        const bk_arm_run *a = &run->arms[idx];
        if (a->ran && !a->ok) {
            bk_run_stopped_failed(run, idx, want, sizeof want);
            /* the form of records before 2026-12-03, also for an arm a signal cut short */
            snprintf(alt, sizeof alt, "arm %s failed; later arms not run", bk_arm_names[idx]);
            break;
        }
        if (a->ran)
            continue;
        /* B' not run under v7: B/C decided, unless a signal came before it */
        if (idx == BK_ARM_IDX_BP && run->plan.protocol.version == BK_PROTO_V7 &&
            bk_run_v7_decided(run, want, sizeof want))
            continue;
        if (run->unfinished) /* check_unfinished: no arm failed, none ran after this one */
            bk_run_stopped_unfinished(idx, want, sizeof want);
        else if (stopped && strstr(stopped, " before arm ") &&
                 bk_run_terminated(run, name, sizeof name))
            bk_run_stopped_before(name, idx, want, sizeof want);
        else
            snprintf(want, sizeof want, "arm %s did not run, and no arm failed and no signal "
                     "came before it", bk_arm_names[idx]);
        break;
    }
    if (!stopped || (strcmp(stopped, want) && (!alt[0] || strcmp(stopped, alt)))) {
        snprintf(why, len, "%s: stopped: the record says '%s', its arms give '%s'", path,
                 stopped ? stopped : "(missing)", want);
        return -1;
    }
    return 0;
}

/* The lanes against their policy (bk_lanes_choose): lanes.policy is the plan's lanes.policy;
 * no lane names an MPI rank twice (each lane rank is its own rank's engine); under disjoint
 * no rank is in both lanes (shared: the same lanes, check_lanes). Which GPU a rank had is
 * not in the record: two ranks of the two lanes on one GPU cannot be seen here. 0 when they
 * agree. */
static int check_lane_policy(const char *path, const json_t *lanes, const json_t *const lane[2],
                             const bk_run *run, char *why, size_t len)
{
    static const char *const names[2] = { "baseline", "candidate" };
    const char *policy = json_string_value(json_object_get(lanes, "policy"));
    const char *want = bk_lane_policy_name(run->plan.lane_policy);
    if (!policy || strcmp(policy, want) != 0) {
        snprintf(why, len, "%s: lanes.policy: the record says '%s', its plan's lanes.policy "
                 "says %s", path, policy ? policy : "(missing)", want);
        return -1;
    }
    const int size = run->lane_size;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < size; i++) {
            const json_t *v = json_array_get(lane[k], (size_t)i);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                snprintf(why, len, "%s: lanes.%s[%d]: must be an MPI rank (an integer >= 0)",
                         path, names[k], i);
                return -1;
            }
            for (int j = 0; j < i; j++)
                if (json_integer_value(json_array_get(lane[k], (size_t)j)) ==
                    json_integer_value(v)) {
                    snprintf(why, len, "%s: lanes.%s: MPI rank %lld at lane ranks %d and %d (a "
                             "lane rank is an MPI rank of its own)", path, names[k],
                             (long long)json_integer_value(v), j, i);
                    return -1;
                }
        }
    if (run->plan.lane_policy != BK_LANES_DISJOINT)
        return 0;
    for (int i = 0; i < size; i++)
        for (int j = 0; j < size; j++) {
            const json_int_t b = json_integer_value(json_array_get(lane[0], (size_t)i));
            if (b == json_integer_value(json_array_get(lane[1], (size_t)j))) {
                snprintf(why, len, "%s: lanes: policy disjoint, but MPI rank %lld is in both "
                         "lanes.baseline[%d] and lanes.candidate[%d] (disjoint lanes share no "
                         "rank)", path, (long long)b, i, j);
                return -1;
            }
        }
    return 0;
}

/* `lanes` against the processes: every process of an arm that ran sat on the MPI rank its
 * lane names (B, B' and T the baseline lane, C and A the candidate's), the lanes hold
 * lanes.size ranks each, and policy shared names one lane twice; then against the policy
 * (check_lane_policy). The report's "shared lanes" note and the rehearsal rule read
 * `lanes`: an edit of it is a difference. */
static int check_lanes(const char *path, const json_t *rec, const bk_run *run, char *why,
                       size_t len)
{
    const json_t *lanes = json_object_get(rec, "lanes");
    const json_t *lane[2] = { json_object_get(lanes, "baseline"),
                              json_object_get(lanes, "candidate") };
    const char *names[2] = { "baseline", "candidate" };
    const int size = run->lane_size;
    for (int k = 0; k < 2; k++)
        if (!json_is_array(lane[k]) || (int)json_array_size(lane[k]) != size) {
            snprintf(why, len, "%s: lanes.%s: must be an array of lanes.size (%d) ranks", path,
                     names[k], size);
            return -1;
        }
    const char *policy = json_string_value(json_object_get(lanes, "policy"));
    if (policy && !strcmp(policy, "shared") && !json_equal(lane[0], lane[1])) {
        snprintf(why, len, "%s: lanes: policy shared, but the baseline and candidate lanes "
                 "differ", path);
        return -1;
    }
    for (int i = 0; i < BK_ARM_NAMES; i++) {
        const bk_arm_run *a = &run->arms[i];
        if (!a->ran)
            continue;
        const int k = i == BK_ARM_IDX_C || i == BK_ARM_IDX_A;
        const json_t *procs = json_object_get(json_array_get(json_object_get(rec, "arms"),
                                                             (size_t)i), "processes");
        for (size_t p = 0; p < json_array_size(procs); p++) {
            const json_t *pr = json_array_get(procs, p);
            const json_int_t r = json_integer_value(json_object_get(pr, "lane_rank"));
            const json_int_t m = json_integer_value(json_object_get(pr, "mpi_rank"));
            const json_t *want = r >= 0 && r < size ? json_array_get(lane[k], (size_t)r) : NULL;
            if (!json_is_integer(want) || json_integer_value(want) != m) {
                snprintf(why, len, "%s: arms[%d] (%s).processes[%zu]: lane rank %lld ran on MPI "
                         "rank %lld, which lanes.%s does not put there", path, i, a->name, p,
                         (long long)r, (long long)m, names[k]);
                return -1;
            }
        }
    }
    return check_lane_policy(path, lanes, lane, run, why, len);
}

/* An unfinished record (`unfinished` true: the provisional one the run writes before arm X
 * and replaces with its final record) against its arms: every arm before X ended well, X
 * and every later arm did not run (under v7 a B' that B/C made unnecessary is passed
 * over), and `stopped` names X. 0 when it says so, or when the record is a final one. */
static int check_unfinished(const char *path, const bk_run *run, char *why, size_t len)
{
    if (!run->unfinished)
        return 0;
    char v7[256];
    int first = -1;
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) { /* in run order */
        const bk_arm_run *a = &run->arms[idx];
        if (first < 0 && a->ran && !a->ok) {
            snprintf(why, len, "%s: unfinished: the record says true, but arm %s ran and "
                     "failed (an unfinished record is written before an arm, when every arm "
                     "before it ended well)", path, bk_arm_names[idx]);
            return -1;
        }
        if (first < 0 && !a->ran &&
            !(idx == BK_ARM_IDX_BP && run->plan.protocol.version == BK_PROTO_V7 &&
              bk_run_v7_decided(run, v7, sizeof v7)))
            first = idx;
        else if (first >= 0 && a->ran) {
            snprintf(why, len, "%s: unfinished: the record says true, but arm %s ran after "
                     "arm %s, which did not", path, bk_arm_names[idx], bk_arm_names[first]);
            return -1;
        }
    }
    if (first < 0) {
        snprintf(why, len, "%s: unfinished: the record says true, but every arm ran", path);
        return -1;
    }
    const int named = bk_run_unfinished_arm(run->stopped);
    if (named >= 0 && run->arms[named].ran) {
        snprintf(why, len, "%s: unfinished: the record says true, but arm %s, before which "
                 "stopped says it was written, ran", path, bk_arm_names[named]);
        return -1;
    }
    if (named != first) {
        char want[256];
        bk_run_stopped_unfinished(first, want, sizeof want);
        snprintf(why, len, "%s: stopped: the record says '%s', its arms give '%s' (the record "
                 "is unfinished, and arm %s is the first not run)", path, run->stopped, want,
                 bk_arm_names[first]);
        return -1;
    }
    return 0;
}

/* The quality state from the record's evidence, decided as the run decided it: A and T's
 * outcomes (bk_quality_missing), then the per-tensor counts (bk_quality_decide), with the
 * tolerances of the plan. 0 when the record's state and reason are what that gives. */
/* Each comparison's element count against its shape: every lane rank's output tensor, the
 * target's size of it at the lane's world (bf16 elements), less the ranks whose output was
 * missing, each of which counts a mismatch. A count of 0 or past the whole, or not whole
 * ranks, is no comparison a run made (a PASS over 0 elements read "A equals T bit for
 * bit"). */
static int check_elements(const char *path, const bk_run *run, const bk_quality *q, char *why,
                          size_t len)
{
    const bk_target *tg = bk_catalog_target(run->plan.target);
    const int world = run->arms[BK_ARM_IDX_A].world;
    if (!tg || world < 1)
        return 0; /* the reader refuses an unknown target or an empty lane first */
    for (int i = 0; i < q->nshapes * q->noutputs; i++) {
        const bk_shape *sh = &run->plan.workload.shapes[i / q->noutputs];
        int t = -1;
        for (int j = 0, k = -1; j < tg->ntensors && k < i % q->noutputs; j++)
            if (tg->tensor_is_output[j] && ++k == i % q->noutputs)
                t = j;
        if (t < 0)
            return 0;
        const uint64_t one = (uint64_t)tg->tensor_elems(sh, world, t) * tg->tensor_elem_bytes(t) / 2;
        if (one > UINT64_MAX / (uint64_t)world)
            return 0; /* a shape no run held (the reader's limits are far below) */
        const uint64_t all = one * (uint64_t)world, got = q->per[i].elems;
        const uint64_t missing = one && got <= all && (all - got) % one == 0 ? (all - got) / one
                                                                            : UINT64_MAX;
        if (missing == UINT64_MAX || (missing > 0 && q->per[i].mismatches < missing)) {
            snprintf(why, len, "%s: quality.tensors[%d]: %" PRIu64 " element(s) compared, but "
                     "shape %d's %s holds %" PRIu64 " a rank x %d rank(s) = %" PRIu64 " (a rank "
                     "whose output was missing leaves its share out and counts a mismatch)",
                     path, i, got, i / q->noutputs, tg->tensor_names[t], one, world, all);
            return -1;
        }
    }
    return 0;
}

static int check_quality(const char *path, const json_t *rec, const bk_run *run, char *why,
                         size_t len)
{
    const bk_quality *rq = &run->quality;
    const json_t *jq = json_object_get(rec, "quality");
    bk_quality q;
    memset(&q, 0, sizeof q);
    q.nshapes = rq->nshapes;
    q.noutputs = rq->noutputs;
    q.per = rq->per; /* borrowed */
    if (!json_is_number(json_object_get(jq, "rtol")) ||
        json_number_value(json_object_get(jq, "rtol")) != run->plan.quality.rtol ||
        !json_is_number(json_object_get(jq, "atol")) ||
        json_number_value(json_object_get(jq, "atol")) != run->plan.quality.atol) {
        snprintf(why, len, "%s: quality.rtol / quality.atol: not the plan's tolerances (rtol %g, "
                 "atol %g)", path, run->plan.quality.rtol, run->plan.quality.atol);
        return -1;
    }
    if (bk_quality_missing(run, &q)) {
        if (rq->per) {
            snprintf(why, len, "%s: quality.tensors: a comparison is listed, but %s", path,
                     q.reason);
            return -1;
        }
    } else {
        if (!rq->per) {
            snprintf(why, len, "%s: quality.tensors: A and T completed, but no comparison is "
                     "listed", path);
            return -1;
        }
        for (int i = 0; i < q.nshapes * q.noutputs; i++) {
            const bk_quality_shape *x = &q.per[i];
            if (x->mismatches < x->nan_a || x->mismatches < x->nan_t) {
                snprintf(why, len, "%s: quality.tensors[%d]: %llu mismatch(es) but %llu NaN "
                         "element(s) (a NaN is a mismatch)", path, i,
                         (unsigned long long)x->mismatches,
                         (unsigned long long)(x->nan_a > x->nan_t ? x->nan_a : x->nan_t));
                return -1;
            }
        }
        if (check_elements(path, run, &q, why, len))
            return -1;
        /* the first bad element is not in the record's numbers: its text is taken as written */
        const char *first = strstr(rq->reason, "; first: ");
        bk_quality_decide(&q, first ? first + 9 : "(not in the record)");
    }
    if (q.state != rq->state) {
        snprintf(why, len, "%s: quality.state: the record says %s, its evidence gives %s (%s)",
                 path, bk_quality_name(rq->state), bk_quality_name(q.state),
                 q.reason[0] ? q.reason : "no mismatch");
        return -1;
    }
    if (strcmp(q.reason, rq->reason) != 0) {
        snprintf(why, len, "%s: quality.reason: the record says '%s', its evidence gives '%s'",
                 path, rq->reason, q.reason);
        return -1;
    }
    return 0;
}

/* Every check of the record against its own evidence, in order; the first that fails
 * says why. */
int bk__score_evidence(const char *path, json_t *rec, const bk_run *run, char *why,
                       size_t len, char *note, size_t note_len, int *topo_missing)
{
    int rc = check_digests(path, rec, run, why, len);
    if (rc == 0)
        rc = check_topology(path, rec, run, why, len, note, note_len, topo_missing);
    if (rc == 0 && (check_backend(path, rec, run, why, len) || check_rounds(path, run, why, len) ||
                    check_arms(path, run, why, len) || check_unfinished(path, run, why, len) ||
                    check_lanes(path, rec, run, why, len) ||
                    check_run_facts(path, rec, run, why, len) ||
                    check_quality(path, rec, run, why, len)))
        rc = -1;
    return rc;
}
