/* record_read.c - reading a record and its raw samples back, for `bracket score`. */
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/record_io.h"
#include "runner/run.h"

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

static bk_status read_arm(const char *path, json_t *ja, bk_run *run, int idx, bk_err *err)
{
    bk_arm_run *a = &run->arms[idx];
    json_t *lane, *procs;
    int ran = 0, audit = 0, ok = 0, rounds = 1;
    const char *variant = "", *reason = "";
    json_error_t je;
    if (json_unpack_ex(ja, &je, 0, "{s:b}", "ran", &ran) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d]: %s", path, idx, je.text);
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
                       je.text[0] ? je.text : "rounds 1..16 (1 for an audit), and processes "
                       "must hold rounds x lane entries");
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
        const char *host = "";
        int exit_code = 0, sig = 0, to = 0, killed = 0, rep = 0;
        if (json_unpack_ex(json_array_get(procs, (size_t)r), &je, 0,
                           "{s:i, s:s, s:i, s:i, s:b, s:b, s:b}", "mpi_rank", &d->mpi_rank, "host",
                           &host, "exit_code", &exit_code, "signal", &sig, "timed_out", &to,
                           "killed", &killed, "reported", &rep) != 0)
            return BK_FAIL(err, BK_ERR_INPUT, "%s: arms[%d].processes[%d]: %s", path, idx, r,
                           je.text);
        a->lane[r % a->world] = d->mpi_rank;
        bk_strlcpy(d->host, host, sizeof d->host);
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

static bk_status read_samples(const char *path, bk_run *run, bk_err *err)
{
    bk_status st = BK_OK;
    char *data = NULL;
    size_t len = 0, off = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    BK_TRY(bk_read_file(path, &data, &len, err));
    int first = 1, iters = run->plan.workload.iters, ns = run->plan.workload.nshapes;
    for (;;) {
        msgpack_unpack_return r = msgpack_unpack_next(&u, data, len, &off);
        if (r == MSGPACK_UNPACK_CONTINUE && off == len)
            break;
        if (r != MSGPACK_UNPACK_SUCCESS) {
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: malformed or truncated at byte %zu", path, off);
            goto out;
        }
        const msgpack_object *o = &u.data;
        if (first) {
            const msgpack_object *run_o = map_get(o, "run");
            if (!run_o || run_o->type != MSGPACK_OBJECT_STR ||
                run_o->via.str.size != strlen(run->run_id) ||
                memcmp(run_o->via.str.ptr, run->run_id, run_o->via.str.size)) {
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: not the samples of run %s", path, run->run_id);
                goto out;
            }
            first = 0;
            continue;
        }
        const msgpack_object *arm = map_get(o, "arm"), *rank = map_get(o, "rank"),
                             *shape = map_get(o, "shape"), *v = map_get(o, "ns"),
                             *round = map_get(o, "round"); /* absent: round 1 */
        char an[8] = "";
        if (arm && arm->type == MSGPACK_OBJECT_STR && arm->via.str.size < sizeof an)
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
            st = BK_FAIL(err, BK_ERR_INPUT, "%s: a sample block (arm '%s') does not fit the record",
                         path, an);
            goto out;
        }
        bk_rank_data *d = &run->arms[idx].r[(round ? round->via.u64 - 1 : 0) *
                                                (uint64_t)run->arms[idx].world + rank->via.u64];
        uint64_t *dst = malloc((size_t)iters * sizeof *dst);
        if (!dst) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
            goto out;
        }
        for (uint32_t i = 0; i < v->via.array.size; i++) {
            if (v->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
                free(dst);
                st = BK_FAIL(err, BK_ERR_INPUT, "%s: arm %s: a sample is not an unsigned integer",
                             path, an);
                goto out;
            }
            dst[i] = v->via.array.ptr[i].via.u64;
        }
        free(d->ns[shape->via.u64]);
        d->ns[shape->via.u64] = dst;
        d->ns_seen[shape->via.u64] = v->via.array.size;
    }
out:
    msgpack_unpacked_destroy(&u);
    free(data);
    return st;
}

bk_status bk_record_read(const char *record_path, bk_run *run, bk_err *err)
{
    bk_status st = BK_OK;
    char *text = NULL, *plan_text = NULL;
    size_t len = 0;
    json_t *rec = NULL;
    json_error_t je;
    BK_TRY(bk_read_file(record_path, &text, &len, err));
    rec = json_loadb(text, len, 0, &je);
    if (!rec) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s:%d:%d: %s", record_path, je.line, je.column, je.text);
        goto out;
    }
    const char *schema = "", *run_id = "", *backend = "", *qstate = "", *qreason = "";
    json_t *plan, *arms, *lanes, *quality;
    if (json_unpack_ex(rec, &je, 0, "{s:s, s:s, s:o, s:s, s:o, s:o, s:o}", "schema", &schema,
                       "run_id", &run_id, "plan", &plan, "backend", &backend, "arms", &arms,
                       "lanes", &lanes, "quality", &quality) != 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: %s", record_path, je.text);
        goto out;
    }
    if (strcmp(schema, "bracket.record/1") != 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: schema: '%s' is not bracket.record/1", record_path,
                     schema);
        goto out;
    }
    plan_text = json_dumps(plan, JSON_COMPACT);
    if (!plan_text) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: plan: not an object", record_path);
        goto out;
    }
    char label[600];
    snprintf(label, sizeof label, "%s (plan)", record_path);
    BK_TRY(bk_plan_parse(plan_text, label, NULL, 0, &run->plan, err));
    bk_strlcpy(run->run_id, run_id, sizeof run->run_id);
    run->backend = !strcmp(backend, "cuda") ? BK_BACKEND_CUDA : BK_BACKEND_CPU;
    if (json_unpack_ex(quality, &je, 0, "{s:s, s:s}", "state", &qstate, "reason", &qreason) != 0 ||
        quality_from_name(qstate, &run->quality.state) != 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: quality: %s", record_path,
                     je.text[0] ? je.text : "unknown state");
        goto out;
    }
    bk_strlcpy(run->quality.reason, qreason, sizeof run->quality.reason);
    if (!json_is_array(arms) || json_array_size(arms) != BK_ARM_NAMES) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: arms: must be an array of %d arms", record_path,
                     BK_ARM_NAMES);
        goto out;
    }
    for (int i = 0; i < BK_ARM_NAMES; i++)
        BK_TRY(read_arm(record_path, json_array_get(arms, (size_t)i), run, i, err));
    run->lane_size = (int)json_integer_value(json_object_get(lanes, "size"));
    char dir[700];
    bk_strlcpy(dir, record_path, sizeof dir);
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
    bk_plan_free(&run->plan);
    free(run->hosts);
    free(run->quality.per);
    run->hosts = NULL;
    run->quality.per = NULL;
}
