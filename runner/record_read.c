/* record_read.c - reading a record and its raw samples back, for `bracket score`. */
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/catalog.h"
#include "runner/digest.h"
#include "runner/record_io.h"
#include "runner/run.h"
#include "runner/wire.h"

static int quality_from_name(const char *s, bk_quality_state *q)
{
    static const bk_quality_state all[] = { BK_QUALITY_PASS, BK_QUALITY_FAIL, BK_QUALITY_MISSING,
                                            BK_QUALITY_NOT_RUN };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, bk_quality_name(all[i]))) {
            *q = all[i];
            return 0;
        }
    return -1;
}

/* "sha256:" and 64 lowercase hex digits (digest.h). */
static int is_sha256(const char *s)
{
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 2 * BK_SHA256_LEN)
        return 0;
    for (s += 7; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

/* Only printable ASCII, no space (a version: "0.1.0"). */
static int printable(const char *s)
{
    for (; *s; s++)
        if (*s < 0x21 || *s > 0x7e)
            return 0;
    return 1;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Which key of `obj` a failed json_unpack_ex stumbled on, as "KEY: must be ..., got ..." or
 * "KEY: missing" in buf (jansson's own text names the type it wanted, not the key). `keys`:
 * "name:t" separated by spaces, t one of s b i I F o, with "?" before t for an optional key;
 * jansson's text when none of them is the cause (a number out of range). */
static const char *unpack_why(const json_t *obj, const char *keys, const json_error_t *je,
                              char *buf, size_t len)
{
    if (!json_is_object(obj)) {
        snprintf(buf, len, "must be an object, got %s", obj ? json_kind(obj) : "nothing");
        return buf;
    }
    char spec[512], *save = NULL;
    bk_strlcpy(spec, keys, sizeof spec);
    for (char *tok = strtok_r(spec, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *t = strchr(tok, ':');
        if (!t)
            continue;
        *t++ = '\0';
        const int optional = *t == '?';
        t += optional;
        const json_t *v = json_object_get(obj, tok);
        if (!v) {
            if (optional)
                continue;
            snprintf(buf, len, "%s: missing", tok);
            return buf;
        }
        const char *want = *t == 's' ? (json_is_string(v) ? NULL : "a string")
                         : *t == 'b' ? (json_is_boolean(v) ? NULL : "true or false")
                         : *t == 'i' || *t == 'I' ? (json_is_integer(v) ? NULL : "an integer")
                         : *t == 'F' ? (json_is_number(v) ? NULL : "a number")
                         : NULL;
        if (want) {
            snprintf(buf, len, "%s: must be %s, got %s", tok, want, json_kind(v));
            return buf;
        }
    }
    snprintf(buf, len, "%s", je->text);
    return buf;
}

/* One count of `wire`: absent is 0 (the repeat counts are absent in records from before
 * 2026-12-06), else an integer >= 0. */
static bk_status wire_count(const char *path, const json_t *obj, const char *where,
                            const char *key, uint64_t *out, bk_err *err)
{
    const json_t *v = json_object_get(obj, key);
    *out = 0;
    if (!v)
        return BK_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: %s%s: must be an integer >= 0", path, where, key);
    *out = (uint64_t)json_integer_value(v);
    return BK_OK;
}

/* wire: rank 0's message counts, read back for the report (its wire lines) and never
 * compared with anything (docs/record.md). Absent: all 0. A reason this bracket does not
 * know is refused, not dropped: the report's count of rejections would leave it out. */
static bk_status read_wire(const char *path, const json_t *rec, bk_wire_stats *w, bk_err *err)
{
    bk_status st = BK_OK;
    memset(w, 0, sizeof *w);
    const json_t *wire = json_object_get(rec, "wire"), *rej = NULL;
    if (!wire)
        return BK_OK;
    if (!json_is_object(wire))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: wire: must be an object", path);
    BK_TRY(wire_count(path, wire, "wire.", "accepted", &w->accepted, err));
    BK_TRY(wire_count(path, wire, "wire.", "repeated", &w->repeated, err));
    BK_TRY(wire_count(path, wire, "wire.", "repeated_tensors", &w->repeated_tensors, err));
    BK_TRY(wire_count(path, wire, "wire.", "repeated_hellos", &w->repeated_hellos, err));
    rej = json_object_get(wire, "rejected");
    if (!rej)
        return BK_OK;
    if (!json_is_object(rej))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: wire.rejected: must be an object", path);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)rej, key, v) {
        int i = 0;
        while (i < BK_REJ_COUNT && strcmp(key, bk_wire_reject_name((bk_wire_reject)i)) != 0)
            i++;
        if (i == BK_REJ_COUNT)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: wire.rejected: '%s' is not a reason this "
                           "bracket knows", path, key);
        BK_TRY(wire_count(path, rej, "wire.rejected.", key, &w->rejected[i], err));
    }
out:
    return st;
}

/* quality.tensors: empty (A or T did not complete), or one entry per shape and output tensor
 * of the target, in that order, as record.c writes them; into run->quality.per. */
static bk_status read_tensors(const char *path, json_t *quality, bk_run *run, bk_err *err)
{
    bk_quality *q = &run->quality;
    json_t *list = json_object_get(quality, "tensors");
    const bk_target *tg = bk_catalog_target(run->plan.target);
    const char *names[16];
    int no = 0;
    for (int t = 0; tg && t < tg->ntensors; t++)
        if (tg->tensor_is_output[t] && no < 16)
            names[no++] = tg->tensor_names[t];
    q->nshapes = run->plan.workload.nshapes;
    q->noutputs = no;
    if (!json_is_array(list))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: quality.tensors: must be an array", path);
    size_t n = json_array_size(list);
    if (n == 0)
        return BK_OK;
    if (n != (size_t)q->nshapes * (size_t)no)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: quality.tensors: %zu entries; the plan's %d "
                       "shape(s) x %d output(s) of %s make %d", path, n, q->nshapes, no,
                       run->plan.target, q->nshapes * no);
    q->per = calloc(n, sizeof *q->per);
    if (!q->per)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        bk_quality_shape *x = &q->per[i];
        json_error_t je;
        char why[256];
        const char *tensor = "", *da = "", *dt = "";
        int shape = -1;
        json_int_t el = -1, mm = -1, na = -1, nt = -1;
        if (json_unpack_ex(json_array_get(list, i), &je, 0,
                           "{s:i, s:s, s:I, s:I, s:I, s:I, s:F, s:F, s:s, s:s}", "shape", &shape,
                           "tensor", &tensor, "elements", &el, "mismatches", &mm, "nan_a", &na,
                           "nan_t", &nt, "max_abs_err", &x->max_abs, "max_rel_err", &x->max_rel,
                           "digest_a", &da, "digest_t", &dt) != 0)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: quality.tensors[%zu]: %s", path, i,
                           unpack_why(json_array_get(list, i), "shape:i tensor:s elements:I "
                                      "mismatches:I nan_a:I nan_t:I max_abs_err:F "
                                      "max_rel_err:F digest_a:s digest_t:s", &je, why,
                                      sizeof why));
        if (shape != (int)i / no || strcmp(tensor, names[i % (size_t)no]) != 0 || el < 0 ||
            mm < 0 || na < 0 || nt < 0)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: quality.tensors[%zu]: shape %d tensor '%s' "
                           "expected (counts >= 0)", path, i, (int)i / no, names[i % (size_t)no]);
        x->elems = (uint64_t)el;
        x->mismatches = (uint64_t)mm;
        x->nan_a = (uint64_t)na;
        x->nan_t = (uint64_t)nt;
        bk_strlcpy(x->digest_a, da, sizeof x->digest_a);
        bk_strlcpy(x->digest_t, dt, sizeof x->digest_t);
    }
    return BK_OK;
}

static bk_status read_arm(const char *path, json_t *ja, bk_run *run, int idx, bk_err *err)
{
    bk_arm_run *a = &run->arms[idx];
    json_t *lane, *procs;
    int ran = 0, audit = 0, ok = 0, rounds = 1;
    const char *variant = "", *reason = "";
    json_error_t je;
    char why[256];
    const char *name = "";
    if (json_unpack_ex(ja, &je, 0, "{s:s, s:b}", "name", &name, "ran", &ran) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d]: %s", path, idx,
                       unpack_why(ja, "name:s ran:b", &je, why, sizeof why));
    /* an arm is judged by its place (B, C, B', A, T): a name that says otherwise is a
     * record that was reordered or edited */
    if (strcmp(name, bk_arm_names[idx]) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].name: must be \"%s\" (the arms are "
                       "B, C, B', A, T in that order), got \"%.16s\"", path, idx,
                       bk_arm_names[idx], name);
    a->idx = idx;
    a->name = bk_arm_names[idx];
    a->ran = ran;
    if (!ran)
        return BK_OK;
    /* rounds: absent in records from before protocol.repeats (one round) */
    if (json_unpack_ex(ja, &je, 0, "{s:s, s:b, s:b, s:s, s:o, s:o, s?i}", "variant", &variant,
                       "audit", &audit, "ok", &ok, "reason", &reason, "lane", &lane, "processes",
                       &procs, "rounds", &rounds) != 0 ||
        rounds < 1 || rounds > BK_MAX_ROUNDS || (audit && rounds != 1) || !json_is_array(lane) ||
        !json_is_array(procs) || json_array_size(lane) == 0 ||
        json_array_size(lane) > BK_MAX_LANE ||
        json_array_size(procs) != (size_t)rounds * json_array_size(lane))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d] (%s): %s", path, idx, a->name,
                       je.text[0] ? unpack_why(ja, "variant:s audit:b ok:b reason:s lane:o "
                                               "processes:o rounds:?i", &je, why, sizeof why)
                                  : "rounds 1..16 (1 for an audit), and processes must hold "
                                    "rounds x lane entries");
    /* B, C and B' are timed, A and T audits, by their place: an arm judged as an audit is
     * not held to its sample counts */
    if (audit != (idx >= BK_ARM_IDX_A))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d] (%s): audit: must be %s (arms B, C and "
                       "B' are timed, A and T audits)", path, idx, a->name,
                       idx >= BK_ARM_IDX_A ? "true" : "false");
    bk_strlcpy(a->variant, variant, sizeof a->variant);
    bk_strlcpy(a->reason, reason, sizeof a->reason);
    a->audit = audit;
    a->ok = ok;
    a->world = (int)json_array_size(lane);
    a->rounds = rounds;
    a->lane = calloc((size_t)a->world, sizeof *a->lane);
    a->r = calloc((size_t)(rounds * a->world), sizeof *a->r);
    if (!a->lane || !a->r)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    int ns = run->plan.workload.nshapes;
    for (int r = 0; r < rounds * a->world; r++) {
        bk_rank_data *d = &a->r[r];
        const char *host = "", *smsg = "";
        int exit_code = 0, sig = 0, to = 0, killed = 0, rep = 0, lrank = -1;
        int hello = 1; /* absent in records before 2026-12-07: taken as said (no line for it) */
        int round = r / a->world + 1; /* absent in records before protocol.repeats */
        json_int_t sent = 0, got = 0, pid = 0;
        /* what the run judged the arm by (bk_run_judge_arm): `bracket score` judges again;
         * the pid, as the report picks the round it shows by it */
        if (json_unpack_ex(json_array_get(procs, (size_t)r), &je, 0,
                           "{s:i, s:s, s:i, s:i, s:b, s:b, s:b, s:b, s:b, s:s, s:I, s:I, s?b, "
                           "s?I, s:i, s?i, s?b}",
                           "mpi_rank", &d->mpi_rank, "host", &host, "exit_code", &exit_code,
                           "signal", &sig, "timed_out", &to, "killed", &killed, "reported", &rep,
                           "status_seen", &d->status_seen, "status_ok", &d->status_ok,
                           "status_message", &smsg, "samples_sent", &sent, "samples_received",
                           &got, "broke_contract", &d->broke_contract, "pid", &pid,
                           "lane_rank", &lrank, "round", &round, "hello", &hello) != 0 ||
            sent < 0 ||
            got < 0 || (d->broke_contract && d->status_ok))
            return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].processes[%d]: %s", path, idx, r,
                           je.text[0] ? unpack_why(json_array_get(procs, (size_t)r),
                                                   "mpi_rank:i host:s exit_code:i signal:i "
                                                   "timed_out:b killed:b reported:b "
                                                   "status_seen:b status_ok:b status_message:s "
                                                   "samples_sent:I samples_received:I "
                                                   "broke_contract:?b pid:?I lane_rank:i "
                                                   "round:?i hello:?b", &je, why,
                                                   sizeof why)
                                      : "sample counts must be >= 0, and an engine that broke "
                                        "its contract cannot have status_ok");
        /* processes are kept round by round, lane rank within round, and each sat on the
         * MPI rank the arm's lane names at its lane rank (the score reads them by place) */
        const json_t *lv = json_array_get(lane, (size_t)(r % a->world));
        if (round != r / a->world + 1 || lrank != r % a->world)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].processes[%d]: round %d, lane_rank "
                           "%d; its place says round %d, lane_rank %d (round by round, lane "
                           "rank within round)", path, idx, r, round, lrank,
                           r / a->world + 1, r % a->world);
        if (!json_is_integer(lv) || json_integer_value(lv) != d->mpi_rank)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].lane[%d]: must be the MPI rank its "
                           "process%s sat on, %d (arms[%d].processes[%d].mpi_rank)", path, idx,
                           r % a->world, rounds > 1 ? "es" : "", d->mpi_rank, idx, r);
        a->lane[r % a->world] = d->mpi_rank;
        /* the shapes its engine said it served with the incumbent (absent: no status, or a
         * record from before 2026-12-06): judged again against the domains */
        const json_t *routed = json_object_get(json_array_get(procs, (size_t)r),
                                               "routed_shapes");
        if (routed) {
            size_t k;
            const json_t *e;
            if (!json_is_array(routed))
                return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].processes[%d].routed_shapes: "
                               "must be an array of shape indexes", path, idx, r);
            json_array_foreach(routed, k, e) {
                const json_int_t s = json_is_integer(e) ? json_integer_value(e) : -1;
                if (s < 0 || s >= ns || s >= 64 || (d->routed >> s) & 1 ||
                    (k && s < json_integer_value(json_array_get(routed, k - 1))))
                    return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].processes[%d]."
                                   "routed_shapes[%zu]: must be a shape index in 0..%d, "
                                   "ascending, each once", path, idx, r, k, ns - 1);
                d->routed |= (uint64_t)1 << s;
            }
            d->routed_known = 1;
        }
        d->pid = pid;
        d->hello = hello;
        bk_strlcpy(d->host, host, sizeof d->host);
        bk_strlcpy(d->status_msg, smsg, sizeof d->status_msg);
        d->samples_claimed = (uint64_t)sent;
        d->samples_got = (uint64_t)got;
        d->proc.done = 1;
        d->proc.exit_code = exit_code;
        d->proc.signal = sig;
        d->proc.timed_out = to;
        d->proc.killed = killed;
        d->reported = rep;
        d->ns = calloc((size_t)ns, sizeof *d->ns);
        d->ns_seen = calloc((size_t)ns, sizeof *d->ns_seen);
        if (!d->ns || !d->ns_seen)
            return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    }
    return BK_OK;
}

static int arm_index(const char *name)
{
    for (int i = 0; i < BK_ARM_NAMES; i++)
        if (!strcmp(name, bk_arm_names[i]))
            return i;
    return -1;
}

static const msgpack_object *map_get(const msgpack_object *m, const char *key)
{
    if (m->type != MSGPACK_OBJECT_MAP)
        return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
            !memcmp(k->via.str.ptr, key, kl))
            return &m->via.map.ptr[i].val;
    }
    return NULL;
}

static int str_is(const msgpack_object *o, const char *s)
{
    return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
           !memcmp(o->via.str.ptr, s, o->via.str.size);
}

/* The header's unsigned field `key` equals `want`; else a message in err. */
static bk_status header_count(const char *path, const msgpack_object *h, const char *key,
                              int want, bk_err *err)
{
    const msgpack_object *o = map_get(h, key);
    if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: header: %s missing or not an unsigned integer",
                       path, key);
    if (o->via.u64 != (uint64_t)want)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: header: %s %llu, the record's plan says %d", path,
                       key, (unsigned long long)o->via.u64, want);
    return BK_OK;
}

/* samples.msgpack as record.c writes it: a header map (schema, run, nshapes, iters), then one
 * block per (timed arm that ran, round, lane rank, shape), each exactly once ("round" absent
 * in records from before protocol.repeats: round 1). A file cut short or malformed (the byte
 * named), foreign to the record, or with a block repeated or missing (the block named) is
 * BK_ERR_INPUT. */
static bk_status read_samples(const char *path, bk_run *run, bk_err *err)
{
    bk_status st = BK_OK;
    char *data = NULL;
    size_t len = 0, off = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    /* per timed arm and process, the slots its blocks hold, marks included */
    uint64_t *slots[BK_ARM_IDX_BP + 1] = { 0 };
    BK_TRY(bk_read_file(path, &data, &len, err));
    int first = 1, iters = run->plan.workload.iters, ns = run->plan.workload.nshapes;
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++)
        if (run->arms[idx].ran &&
            !(slots[idx] = calloc((size_t)bk_arm_rounds(&run->arms[idx]) *
                                  (size_t)run->arms[idx].world, sizeof **slots))) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
            goto out;
        }
    if (len == 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: truncated at byte 0: the file is empty (no header)",
                     path);
        goto out;
    }
    while (off < len) {
        const size_t at = off; /* where this object starts */
        const char *why = "";
        size_t used = 0, bad = 0;
        /* bound every array, map, str and bin by the bytes left before msgpack-c allocates
         * for it (a 5-byte array header can claim 2^32 elements) */
        if (bk_wire_scan_next(data + at, len - at, &used, &why, &bad) != 0) {
            char more[160] = ""; /* what a claim past the end of the file claims */
            if (!strcmp(why, "reserved byte 0xc1")) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: malformed at byte %zu (not msgpack)", path,
                             at + bad);
                goto out;
            }
            if (strcmp(why, "truncated") != 0)
                snprintf(more, sizeof more, ": an array or map at byte %zu claims more elements "
                         "than the %zu byte(s) left in the file", at + bad, len - (at + bad));
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: truncated at byte %zu (the %s starting at byte "
                         "%zu is incomplete)%s", path, len, first ? "header" : "sample block", at,
                         more);
            goto out;
        }
        msgpack_unpack_return r = msgpack_unpack_next(&u, data, at + used, &off);
        if (r != MSGPACK_UNPACK_SUCCESS || off != at + used) {
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: malformed at byte %zu (not msgpack)", path, at);
            goto out;
        }
        const msgpack_object *o = &u.data;
        if (first) {
            if (!str_is(map_get(o, "schema"), "bracket.samples/1")) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: header: schema is not bracket.samples/1",
                             path);
                goto out;
            }
            if (!str_is(map_get(o, "run"), run->run_id)) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: not the samples of run %s", path, run->run_id);
                goto out;
            }
            BK_TRY(header_count(path, o, "nshapes", ns, err));
            BK_TRY(header_count(path, o, "iters", iters, err));
            first = 0;
            continue;
        }
        const msgpack_object *arm = map_get(o, "arm"), *rank = map_get(o, "rank"),
                             *shape = map_get(o, "shape"), *v = map_get(o, "ns"),
                             *round = map_get(o, "round"); /* absent: round 1 */
        char an[8] = "";
        const int named = arm && arm->type == MSGPACK_OBJECT_STR;
        if (named && arm->via.str.size < sizeof an)
            memcpy(an, arm->via.str.ptr, arm->via.str.size);
        int idx = arm_index(an);
        const int rounds = idx >= 0 ? bk_arm_rounds(&run->arms[idx]) : 1;
        if (idx < 0 || idx > BK_ARM_IDX_BP || !run->arms[idx].ran || !rank ||
            rank->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !shape ||
            (round && (round->type != MSGPACK_OBJECT_POSITIVE_INTEGER || round->via.u64 < 1 ||
                       round->via.u64 > (uint64_t)rounds)) ||
            shape->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !v || v->type != MSGPACK_OBJECT_ARRAY ||
            rank->via.u64 >= (uint64_t)run->arms[idx].world || shape->via.u64 >= (uint64_t)ns ||
            v->via.array.size > (uint32_t)iters) {
            /* its name as the file has it (at most 16 bytes, then "..."), made printable */
            char shown[24] = "";
            if (named) {
                const size_t k = arm->via.str.size < 16 ? arm->via.str.size : 16;
                memcpy(shown, arm->via.str.ptr, k);
                for (size_t i = 0; i < k; i++)
                    shown[i] = shown[i] ? shown[i] : '?'; /* a NUL inside */
                bk_text_clean(shown);
                if (arm->via.str.size > k)
                    memcpy(shown + k, "...", 4);
            }
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: the sample block at byte %zu (%s%s%s) does "
                         "not fit the record", path, at, named ? "arm '" : "no arm name",
                         shown, named ? "'" : "");
            goto out;
        }
        const uint64_t rd = round ? round->via.u64 : 1;
        bk_rank_data *d = &run->arms[idx].r[(rd - 1) * (uint64_t)run->arms[idx].world +
                                            rank->via.u64];
        if (d->ns[shape->via.u64]) { /* filled below, never NULL once read (iters >= 1) */
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: a second sample block for arm %s round %llu "
                         "rank %llu shape %llu (at byte %zu)", path, an, (unsigned long long)rd,
                         (unsigned long long)rank->via.u64, (unsigned long long)shape->via.u64,
                         at);
            goto out;
        }
        uint64_t *dst = malloc((size_t)iters * sizeof *dst);
        if (!dst) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
            goto out;
        }
        size_t arrived = 0;
        for (uint32_t i = 0; i < v->via.array.size; i++) {
            if (v->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
                free(dst);
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: arm %s: a sample is not an unsigned integer",
                             path, an);
                goto out;
            }
            dst[i] = v->via.array.ptr[i].via.u64;
            /* the coordinator's mark of a sample that never arrived: in an arm that ended
             * well every sample arrived, and the mark would be scored as a time */
            if (dst[i] == UINT64_MAX && run->arms[idx].ok) {
                free(dst);
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: arm %s round %llu rank %llu shape %llu: "
                             "sample %u is 2^64 - 1, the mark of one that never arrived, in an "
                             "arm that ended well", path, an, (unsigned long long)rd,
                             (unsigned long long)rank->via.u64,
                             (unsigned long long)shape->via.u64, i);
                goto out;
            }
            arrived += dst[i] != UINT64_MAX;
        }
        for (size_t i = v->via.array.size; i < (size_t)iters; i++)
            dst[i] = UINT64_MAX; /* never arrived, as in the coordinator's slots */
        d->ns[shape->via.u64] = dst;
        d->ns_seen[shape->via.u64] = arrived;
        slots[idx][(rd - 1) * (uint64_t)run->arms[idx].world + rank->via.u64] +=
            v->via.array.size;
    }
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        for (int i = 0; a->ran && i < bk_arm_rounds(a) * a->world; i++)
            for (int s = 0; s < ns; s++)
                if (!a->r[i].ns[s]) {
                    st = BK_FAIL(err, BK_ERR_INPUT, "%s: no sample block for arm %s round %d "
                                 "rank %d shape %d", path, a->name, i / a->world + 1,
                                 i % a->world, s);
                    goto out;
                }
    }
    /* a block cut short (fewer samples than its rank received) is a damaged file, not a
     * record that differs from its evidence. A block holds the slots up to the last sample
     * that arrived, marks between; before 2026-12-08 it held the first N slots, N the
     * samples of its shape that arrived (marks among them where batches came out of
     * order): read either way (docs/record.md) */
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        for (int i = 0; a->ran && i < bk_arm_rounds(a) * a->world; i++) {
            uint64_t held = 0;
            for (int s = 0; s < ns; s++)
                held += a->r[i].ns_seen[s];
            if (held != a->r[i].samples_got && slots[idx][i] != a->r[i].samples_got) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: arm %s round %d rank %d: its sample blocks "
                             "hold %llu sample(s), the record's arms[%d].processes[%d]."
                             "samples_received says %llu", path, a->name, i / a->world + 1,
                             i % a->world, (unsigned long long)held, idx, i,
                             (unsigned long long)a->r[i].samples_got);
                goto out;
            }
        }
    }
out:
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++)
        free(slots[idx]);
    msgpack_unpacked_destroy(&u);
    free(data);
    return st;
}

/* run->noutputs stays 0: a record keeps no output tensors (quality.tensors holds their
 * comparison), so an audit arm is judged again by its processes alone. */
bk_status bk_record_read(const char *record_path, bk_run *run, bk_err *err)
{
    bk_status st = BK_OK;
    char *text = NULL, *plan_text = NULL;
    size_t len = 0;
    json_t *rec = NULL;
    json_error_t je;
    BK_TRY(bk_read_json_file(record_path, SIZE_MAX, "a record", &text, &len, err));
    rec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!rec) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s:%d:%d: %s", record_path, je.line, je.column, je.text);
        goto out;
    }
    char where[256] = "";
    long at = -1;
    unsigned char byte = 0;
    if (bk_json_control_in(rec, where, sizeof where, &at, &byte)) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: %s: a control character (byte 0x%02x at offset "
                     "%ld): bracket records none (a tab aside), and it would reach the "
                     "terminal as it is (an escape sequence, a line of its own); was the "
                     "record edited?",
                     record_path, where[0] ? where : "(top)", byte, at);
        goto out;
    }
    const char *run_id = "", *backend = "", *qstate = "", *qreason = "",
               *plan_digest = "";
    json_t *plan, *arms, *lanes, *quality;
    /* the schema first: a plan or a snapshot given as a record is said to be one */
    const json_t *jsch = json_object_get(rec, "schema");
    const char *sch = json_string_value(jsch);
    if (!json_is_object(rec)) { /* jansson gives an object or an array */
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: a record is a JSON object, this is an array",
                     record_path);
        goto out;
    }
    if (!sch || strcmp(sch, "bracket.record/1") != 0) {
        char other[96];
        if (sch)
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: schema: '%s' is not bracket.record/1%s",
                         record_path, sch,
                         bk_schema_other(sch, "a run's record", other, sizeof other));
        else
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: schema: %s (bracket.record/1)", record_path,
                         jsch ? "must be a string" : "missing");
        goto out;
    }
    if (json_unpack_ex(rec, &je, 0, "{s:s, s:o, s:s, s:s, s:o, s:o, s:o}", "run_id", &run_id,
                       "plan", &plan, "plan_digest", &plan_digest, "backend", &backend, "arms",
                       &arms, "lanes", &lanes, "quality", &quality) != 0) {
        char why[256];
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: %s", record_path,
                     unpack_why(rec, "run_id:s plan:o plan_digest:s backend:s arms:o lanes:o "
                                "quality:o", &je, why, sizeof why));
        goto out;
    }
    plan_text = json_dumps(plan, JSON_COMPACT);
    if (!plan_text) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: plan: not an object", record_path);
        goto out;
    }
    char label[600];
    /* the plan's errors and the report's header name it so: "the plan in DIR/record.json" */
    snprintf(label, sizeof label, "the plan in %s", record_path);
    BK_TRY(bk_plan_parse(plan_text, label, NULL, 0, &run->plan, err));
    bk_strlcpy(run->run_id, run_id, sizeof run->run_id);
    bk_strlcpy(run->plan_digest, plan_digest, sizeof run->plan_digest); /* as the record says */
    run->backend = !strcmp(backend, "cuda") ? BK_BACKEND_CUDA : BK_BACKEND_CPU;
    /* what the run warned of its plan (a bf16 sum that may fail A against T), for the report
     * under a failed quality: a function of the plan, recomputed (empty where this build's
     * catalog lacks the variants) */
    (void)bk_catalog_bf16_sum_note(&run->plan, run->backend, run->sum_note, sizeof run->sum_note);
    if (json_unpack_ex(quality, &je, 0, "{s:s, s:s}", "state", &qstate, "reason", &qreason) != 0 ||
        quality_from_name(qstate, &run->quality.state) != 0) {
        char why[256];
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: quality: %s", record_path,
                     je.text[0] ? unpack_why(quality, "state:s reason:s", &je, why, sizeof why)
                                : "unknown state");
        goto out;
    }
    bk_strlcpy(run->quality.reason, qreason, sizeof run->quality.reason);
    BK_TRY(read_tensors(record_path, quality, run, err));
    /* not compared (the record may be scored on another machine): only its form */
    const char *bin = json_string_value(json_object_get(json_object_get(rec, "identity"),
                                                        "binary_digest"));
    if (!bin || (strcmp(bin, "unknown") != 0 && !is_sha256(bin))) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: identity.binary_digest: '%s' is neither "
                     "sha256:<64 lowercase hex digits> nor unknown", record_path,
                     bin ? bin : "(missing)");
        goto out;
    }
    bk_strlcpy(run->binary_digest, bin, sizeof run->binary_digest);
    /* the bracket that ran it (the header says so; a record of another version is scored
     * by this one's rules, the verdict then compared) */
    const char *ver = json_string_value(json_object_get(rec, "bracket_version"));
    if (!ver || !ver[0] || strlen(ver) >= sizeof run->version || !printable(ver)) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: bracket_version: must be a version string of 1 "
                     "to %zu printable ASCII characters, no space", record_path,
                     sizeof run->version - 1);
        goto out;
    }
    bk_strlcpy(run->version, ver, sizeof run->version);
    /* written only when a --set left the digest naming another variant (and not before) */
    const json_t *sdn_j = json_object_get(json_object_get(rec, "identity"), "source_digest_note");
    if (sdn_j && !json_is_string(sdn_j)) { /* read as absent, --strict let it through */
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: identity.source_digest_note: must be a string "
                     "(or absent), got %s", record_path, json_kind(sdn_j));
        goto out;
    }
    const char *sdn = sdn_j ? json_string_value(sdn_j) : "";
    bk_strlcpy(run->plan.source_digest_note, sdn, sizeof run->plan.source_digest_note);
    BK_TRY(read_wire(record_path, rec, &run->wire, err));
    const char *stopped = json_string_value(json_object_get(rec, "stopped"));
    bk_strlcpy(run->stopped, stopped ? stopped : "", sizeof run->stopped);
    /* absent in records from before 2026-12-04: a final record */
    const json_t *unfinished = json_object_get(rec, "unfinished");
    if (unfinished && !json_is_boolean(unfinished)) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: unfinished: must be true or false (or absent, as "
                     "in records before 2026-12-04)", record_path);
        goto out;
    }
    run->unfinished = json_is_true(unfinished);
    if (!json_is_array(arms) || json_array_size(arms) != BK_ARM_NAMES) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: arms: must be an array of %d arms", record_path,
                     BK_ARM_NAMES);
        goto out;
    }
    for (int i = 0; i < BK_ARM_NAMES; i++)
        BK_TRY(read_arm(record_path, json_array_get(arms, (size_t)i), run, i, err));
    run->lane_size = (int)json_integer_value(json_object_get(lanes, "size"));
    /* what the report's header shows of the run (bracket score checks the lanes against
     * the processes): the lanes' ranks, the run's rank count, the routing share */
    if (run->lane_size < 0 || run->lane_size > BK_MAX_LANE) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: lanes.size: must be an integer in 0..%d",
                     record_path, BK_MAX_LANE);
        goto out;
    }
    for (int i = 0; i < run->lane_size; i++) {
        const json_t *b = json_array_get(json_object_get(lanes, "baseline"), (size_t)i);
        const json_t *c = json_array_get(json_object_get(lanes, "candidate"), (size_t)i);
        run->baseline[i] = json_is_integer(b) ? (int)json_integer_value(b) : -1;
        run->candidate[i] = json_is_integer(c) ? (int)json_integer_value(c) : -1;
    }
    const char *lnote = json_string_value(json_object_get(lanes, "note"));
    bk_strlcpy(run->lane_note, lnote ? lnote : "", sizeof run->lane_note);
    const json_t *hosts = json_object_get(json_object_get(rec, "identity"), "hosts");
    run->world_size = json_is_array(hosts) ? (int)json_array_size(hosts) : 0;
    /* the candidate's routing as the run's catalog made it (routing.shapes' served_by): the
     * processes' routed_shapes are judged against it, and the report's share of the weight
     * comes from it, whatever this build's catalog says */
    {
        const json_t *rs = json_object_get(json_object_get(rec, "routing"), "shapes");
        int whole = json_is_array(rs) && json_array_size(rs) ==
                                             (size_t)run->plan.workload.nshapes;
        run->cand_routed = 0;
        for (int i = 0; whole && i < run->plan.workload.nshapes && i < 64; i++) {
            const char *by = json_string_value(json_object_get(json_array_get(rs, (size_t)i),
                                                               "served_by"));
            if (!by)
                whole = 0;
            else if (strcmp(by, run->plan.candidate.name) != 0)
                run->cand_routed |= (uint64_t)1 << i;
        }
        run->cand_routed_known = whole;
        double in = 0.0, all = 0.0;
        for (int i = 0; whole && i < run->plan.workload.nshapes; i++) {
            all += run->plan.workload.shapes[i].weight;
            if (i >= 64 || !(run->cand_routed & ((uint64_t)1 << i)))
                in += run->plan.workload.shapes[i].weight;
        }
        /* a record without routing.shapes: this build's catalog's view */
        run->routing_share = !whole ? bk_routing_share(&run->plan, run->backend, 1)
                                    : all > 0.0 ? in / all : 0.0;
    }
    /* B and C on the same ranks: the policy said so, or the lanes are one */
    const char *policy = json_string_value(json_object_get(lanes, "policy"));
    run->shared_lanes = (policy && !strcmp(policy, "shared")) ||
                        json_equal(json_object_get(lanes, "baseline"),
                                   json_object_get(lanes, "candidate"));
    /* the processes are the evidence: B and C on the same MPI ranks is a shared lane
     * whatever `lanes` says, and each arm ran the plan's variant on tp x ep ranks */
    {
        const bk_arm_run *b = &run->arms[BK_ARM_IDX_B], *cand = &run->arms[BK_ARM_IDX_C];
        if (b->ran && cand->ran && b->world == cand->world &&
            !memcmp(b->lane, cand->lane, (size_t)b->world * sizeof *b->lane))
            run->shared_lanes = 1;
        const int L = run->plan.arena.tp * run->plan.arena.ep;
        for (int i = 0; i < BK_ARM_NAMES; i++) {
            const bk_arm_run *a = &run->arms[i];
            const char *want = i == BK_ARM_IDX_C || i == BK_ARM_IDX_A ? run->plan.candidate.name
                                                                       : run->plan.incumbent.name;
            if (a->ran && (strcmp(a->variant, want) != 0 || a->world != L)) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d] (%s): ran '%s' on %d rank(s); "
                             "the record's plan says '%s' on tp x ep = %d", record_path, i,
                             a->name, a->variant, a->world, want, L);
                goto out;
            }
        }
    }
    char dir[sizeof run->run_dir];
    /* a link to a record (a "latest" beside the runs): its samples and topology are the
     * ones beside the record it names, not beside the link */
    struct stat lst;
    char *real = lstat(record_path, &lst) == 0 && S_ISLNK(lst.st_mode)
                     ? realpath(record_path, NULL) : NULL;
    const char *rpath = real ? real : record_path;
    const char *last = strrchr(rpath, '/');
    if (last && (size_t)(last - rpath) >= sizeof dir) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: its folder's path is too long (%zu bytes at most)",
                     rpath, sizeof dir - 1);
        free(real);
        goto out;
    }
    bk_strlcpy(dir, rpath, sizeof dir);
    free(real);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        bk_strlcpy(dir, ".", sizeof dir);
    bk_strlcpy(run->run_dir, dir, sizeof run->run_dir);
    char spath[800];
    snprintf(spath, sizeof spath, "%s/samples.msgpack", dir);
    BK_TRY(read_samples(spath, run, err));
out:
    free(plan_text);
    free(text);
    json_decref(rec);
    return st;
}

void bk_run_free(bk_run *run)
{
    if (!run)
        return;
    for (int i = 0; i < BK_ARM_NAMES; i++) /* also what a failed read had filled */
        bk_arm_free(&run->arms[i], run->plan.workload.nshapes, run->noutputs);
    bk_plan_free(&run->plan);
    free(run->hosts);
    free(run->quality.per);
    run->hosts = NULL;
    run->quality.per = NULL;
}
