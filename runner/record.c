/* record.c - the run's record: record.json (bracket.record/1) with the plan, identities,
 * lanes, arms, quality, score and verdict, and samples.msgpack with every raw sample. */
#include <hwloc.h>
#include <jansson.h>
#include <msgpack.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#ifdef BK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include "kernels/catalog.h"
#include "runner/digest.h"
#include "runner/record_io.h"
#include "runner/run.h"

#define BK_RECORD_SCHEMA "bracket.record/1"
#define BK_SAMPLES_SCHEMA "bracket.samples/1"

/* Free text as a JSON string: jansson makes none of text that is not UTF-8 (and the key or
 * the whole entry would then be missing from the record, which no reader takes), and a
 * record's text holds no control character but a tab (bk_control_at_tab_ok; `bracket score`
 * refuses one). Text from outside is made printable where it comes in (bk_text_clean); what
 * still is not is made so here, rather than lost. */
static json_t *json_text(const char *s)
{
    if (!s)
        return json_string("");
    json_t *j = bk_control_at_tab_ok(s) < 0 ? json_string(s) : NULL;
    if (j)
        return j;
    char *c = strdup(s);
    if (!c)
        return NULL;
    bk_text_clean(c);
    j = json_string(c);
    free(c);
    return j;
}

static json_t *versions(void)
{
    json_t *v = json_object();
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    char *nl = strchr(mpi, '\n');
    if (nl)
        *nl = '\0';
    char *comma = strchr(mpi, ',');
    if (comma)
        *comma = '\0';
    json_object_set_new(v, "mpi", json_text(mpi));
    unsigned hv = hwloc_get_api_version();
    char buf[64];
    snprintf(buf, sizeof buf, "%u.%u.%u", hv >> 16, (hv >> 8) & 0xff, hv & 0xff);
    json_object_set_new(v, "hwloc", json_string(buf));
    int a, b, c;
    zmq_version(&a, &b, &c);
    snprintf(buf, sizeof buf, "%d.%d.%d", a, b, c);
    json_object_set_new(v, "zeromq", json_string(buf));
    json_object_set_new(v, "msgpack_c", json_string(msgpack_version()));
    json_object_set_new(v, "jansson", json_string(JANSSON_VERSION));
#ifdef BK_HAVE_CUDA
    int d = 0, r = 0, n = 0;
    if (cudaDriverGetVersion(&d) == cudaSuccess && d > 0) { /* 0: no driver installed */
        snprintf(buf, sizeof buf, "%d.%d", d / 1000, (d % 1000) / 10);
        json_object_set_new(v, "cuda_driver", json_string(buf));
    }
    if (cudaRuntimeGetVersion(&r) == cudaSuccess) {
        snprintf(buf, sizeof buf, "%d.%d", r / 1000, (r % 1000) / 10);
        json_object_set_new(v, "cuda_runtime", json_string(buf));
    }
    if (ncclGetVersion(&n) == ncclSuccess) {
        snprintf(buf, sizeof buf, "%d.%d.%d", n / 10000, (n % 10000) / 100, n % 100);
        json_object_set_new(v, "nccl", json_string(buf));
    }
#endif
    return v;
}

static json_t *int_array(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *bk_record_arm_json(const bk_run *run, const bk_score *sc, int idx)
{
    const bk_arm_run *a = &run->arms[idx];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(bk_arm_names[idx]));
    json_object_set_new(o, "ran", json_boolean(a->ran));
    if (!a->ran)
        return o;
    json_object_set_new(o, "variant", json_string(a->variant));
    json_object_set_new(o, "audit", json_boolean(a->audit));
    json_object_set_new(o, "ok", json_boolean(a->ok));
    json_object_set_new(o, "reason", json_text(a->reason));
    json_object_set_new(o, "wall_s", json_real((double)(a->t_end_ns - a->t_start_ns) / 1e9));
    json_object_set_new(o, "lane", int_array(a->lane, a->world));
    /* rounds (protocol.repeats): every round's processes, round by round */
    const int rounds = bk_arm_rounds(a);
    json_object_set_new(o, "rounds", json_integer(rounds));
    json_t *procs = json_array();
    for (int i = 0; i < rounds * a->world; i++) {
        const bk_rank_data *d = &a->r[i];
        const int r = i % a->world;
        char desc[96];
        bk_proc_describe(&d->proc, desc, sizeof desc);
        json_t *p = json_pack("{s:i, s:i, s:i, s:o, s:I, s:b, s:b, s:i, s:i, s:b, s:b, s:s, s:b, "
                              "s:b, s:o, s:b, s:I, s:I, s:f, s:f, s:f, s:o}",
                              "round", i / a->world + 1,
                              "lane_rank", r, "mpi_rank", d->mpi_rank, "host", json_text(d->host),
                              "pid", (json_int_t)d->pid, "hello", d->hello,
                              "reported", d->reported,
                              "exit_code", d->proc.exit_code, "signal", d->proc.signal,
                              "timed_out", d->proc.timed_out, "killed", d->proc.killed,
                              "ended", desc, "status_seen", d->status_seen,
                              "status_ok", d->status_ok, "status_message", json_text(d->status_msg),
                              "broke_contract", d->broke_contract,
                              "samples_sent", (json_int_t)d->samples_claimed,
                              "samples_received", (json_int_t)d->samples_got,
                              "engine_start_to_first_iter_s", (double)d->t_first_ns / 1e9,
                              "arm_start_to_first_sample_s", (double)d->t_first_sample_ns / 1e9,
                              "spawn_to_exit_s", d->spawn_s, "engine_settings", json_text(d->settings));
        if (d->routed_known) { /* its status's: the shapes it served with the incumbent */
            json_t *routed = json_array();
            for (int s = 0; s < 64; s++)
                if (d->routed & ((uint64_t)1 << s))
                    json_array_append_new(routed, json_integer(s));
            json_object_set_new(p, "routed_shapes", routed);
        }
        json_array_append_new(procs, p);
    }
    json_object_set_new(o, "processes", procs);
    int k = idx <= BK_ARM_IDX_BP ? idx : -1;
    if (k >= 0 && sc->arms[k].scored) {
        const bk_arm_summary *s = &sc->arms[k];
        json_t *sum = json_object(), *med = json_array(), *n = json_array();
        json_t *alg = json_array(), *bus = json_array();
        const bk_target *tg = bk_catalog_target(run->plan.target);
        for (int i = 0; i < run->plan.workload.nshapes; i++) {
            const bk_shape *sh = &run->plan.workload.shapes[i];
            json_array_append_new(med, json_real(s->median_ns[i]));
            json_array_append_new(n, json_integer((json_int_t)s->n[i]));
            double gbps = bk_target_algbw(tg, sh, a->world, s->median_ns[i]);
            json_array_append_new(alg, json_real(gbps));
            json_array_append_new(bus, json_real(tg ? gbps * tg->busbw_factor(a->world) : 0));
        }
        json_object_set_new(sum, "algbw_GBps", alg);
        json_object_set_new(sum, "busbw_GBps", bus);
        json_object_set_new(sum, "n", n);
        json_object_set_new(sum, "median_ns", med);
        json_object_set_new(sum, "cost_ns", json_real(s->cost_ns));
        json_object_set_new(sum, "cost_interval_ns", json_pack("[f,f]", s->cost_lo_ns, s->cost_hi_ns));
        json_object_set_new(o, "summary", sum);
    }
    return o;
}

static json_t *quality_json(const bk_run *run)
{
    const bk_quality *q = &run->quality;
    json_t *o = json_pack("{s:s, s:o, s:f, s:f}", "state", bk_quality_name(q->state), "reason",
                          json_text(q->reason), "rtol", run->plan.quality.rtol, "atol", run->plan.quality.atol);
    json_t *per = json_array();
    for (int s = 0; q->per && s < q->nshapes; s++)
        for (int k = 0; k < q->noutputs; k++) {
            const bk_quality_shape *x = &q->per[s * q->noutputs + k];
            json_array_append_new(per, json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:s, s:s}",
                "shape", s, "tensor", run->output_names[k], "elements", (json_int_t)x->elems,
                "mismatches", (json_int_t)x->mismatches, "nan_a", (json_int_t)x->nan_a,
                "nan_t", (json_int_t)x->nan_t, "max_abs_err", x->max_abs, "max_rel_err", x->max_rel,
                "digest_a", x->digest_a, "digest_t", x->digest_t));
        }
    json_object_set_new(o, "tensors", per);
    return o;
}

json_t *bk_record_score_json(const bk_score *sc)
{
    json_t *o = json_object();
    json_object_set_new(o, "baseline", json_string(sc->baseline));
    json_object_set_new(o, "bp_excluded", json_boolean(sc->bp_excluded));
    if (sc->have_speedup) {
        json_object_set_new(o, "speedup", json_real(sc->speedup));
        json_object_set_new(o, "speedup_interval", json_pack("[f,f]", sc->speedup_lo, sc->speedup_hi));
    }
    if (sc->have_baseline)
        json_object_set_new(o, "baseline_cost_ns", json_real(sc->base_cost_ns));
    if (sc->have_drift) {
        json_object_set_new(o, "drift", json_real(sc->drift));
        json_object_set_new(o, "drift_exceeded", json_boolean(sc->drift_exceeded));
    }
    json_object_set_new(o, "thresholds",
        json_pack("{s:f, s:f, s:f, s:s, s:i, s:I, s:b}", "confidence", sc->confidence,
                  "min_gain", sc->min_gain, "drift_limit", sc->drift_limit, "drift_policy",
                  bk_drift_policy_name(sc->drift_policy), "bootstrap_resamples", sc->resamples,
                  "seed", (json_int_t)sc->seed, "bc_only", sc->bc_only));
    return o;
}

/* samples.msgpack: a header map, then one map per (timed arm, round, lane rank, shape). */
static bk_status write_samples(const bk_run *run, char *digest, char *tmp, size_t tmplen,
                               bk_err *err)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
#define PSTR(s) do { size_t l_ = strlen(s); msgpack_pack_str(&pk, l_); msgpack_pack_str_body(&pk, s, l_); } while (0)
    msgpack_pack_map(&pk, 4);
    PSTR("schema"); PSTR(BK_SAMPLES_SCHEMA);
    PSTR("run"); PSTR(run->run_id);
    PSTR("nshapes"); msgpack_pack_int(&pk, run->plan.workload.nshapes);
    PSTR("iters"); msgpack_pack_int(&pk, run->plan.workload.iters);
    for (int idx = BK_ARM_IDX_B; idx <= BK_ARM_IDX_BP; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        if (!a->ran)
            continue;
        const int rounds = bk_arm_rounds(a);
        for (int i = 0; i < rounds * a->world; i++)
            for (int s = 0; s < run->plan.workload.nshapes; s++) {
                const bk_rank_data *d = &a->r[i];
                /* up to the last slot that arrived: in a failed arm, batches that came out
                 * of order (sent again after a broken connection) leave marks before it */
                const size_t iters = (size_t)run->plan.workload.iters;
                size_t n = 0;
                for (size_t j = 0; d->ns_seen && d->ns_seen[s] && j < iters; j++)
                    if (d->ns[s][j] != UINT64_MAX)
                        n = j + 1;
                msgpack_pack_map(&pk, 5);
                PSTR("arm"); PSTR(a->name);
                PSTR("round"); msgpack_pack_int(&pk, i / a->world + 1);
                PSTR("rank"); msgpack_pack_int(&pk, i % a->world);
                PSTR("shape"); msgpack_pack_int(&pk, s);
                PSTR("ns"); msgpack_pack_array(&pk, n);
                for (size_t i = 0; i < n; i++)
                    msgpack_pack_uint64(&pk, d->ns[s][i]);
            }
    }
#undef PSTR
    char path[800];
    snprintf(path, sizeof path, "%s/samples.msgpack", run->run_dir);
    bk_sha256_hex(sb.data, sb.size, digest);
    bk_status st = bk_write_temp(path, sb.data, sb.size, tmp, tmplen, err);
    msgpack_sbuffer_destroy(&sb);
    return st;
}

bk_status bk_record_write(const bk_run *run, const bk_score *sc, bk_err *err)
{
    bk_status st = BK_OK;
    char samples_digest[BK_SHA256_HEX_LEN] = "";
    char *text = NULL, samples_tmp[1024] = "", record_tmp[1024] = "", samples_path[800];
    json_t *rec = NULL;
    /* both files are written whole to temporary files first, then renamed, samples first:
     * a failure before the renames (a full disk, most likely in the larger samples) leaves
     * the pair that was there (the unfinished record before the last arm, and its samples)
     * as it was, so it still rescores */
    snprintf(samples_path, sizeof samples_path, "%s/samples.msgpack", run->run_dir);
    BK_TRY(write_samples(run, samples_digest, samples_tmp, sizeof samples_tmp, err));
    const bk_plan *p = &run->plan;
    json_error_t jerr;
    char *plan_text = bk_plan_dump(p);
    json_t *plan = plan_text ? json_loads(plan_text, 0, &jerr) : NULL;
    free(plan_text);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char created[32];
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *hosts = json_array();
    for (int i = 0; run->hosts && i < run->world_size; i++)
        json_array_append_new(hosts, json_text(run->hosts[i]));
    json_t *wire = json_object(), *rej = json_object();
    for (int i = 0; i < BK_REJ_COUNT; i++)
        json_object_set_new(rej, bk_wire_reject_name((bk_wire_reject)i),
                            json_integer((json_int_t)run->wire.rejected[i]));
    json_object_set_new(wire, "accepted", json_integer((json_int_t)run->wire.accepted));
    json_object_set_new(wire, "rejected", rej);
    json_object_set_new(wire, "repeated", json_integer((json_int_t)run->wire.repeated));
    json_object_set_new(wire, "repeated_tensors",
                        json_integer((json_int_t)run->wire.repeated_tensors));
    json_object_set_new(wire, "repeated_hellos",
                        json_integer((json_int_t)run->wire.repeated_hellos));
    json_t *rshapes = json_array();
    const bk_variant *cv = bk_catalog_variant(p->target, p->candidate.name);
    for (int i = 0; i < p->workload.nshapes; i++) {
        const bk_shape *sh = &p->workload.shapes[i];
        char why[160] = "";
        int in = cv && bk_domain_contains(&cv->domain, sh, run->lane_size, p->arena.dtype,
                                          run->backend, 1, why, sizeof why);
        json_array_append_new(rshapes, json_pack("{s:i, s:I, s:I, s:f, s:s, s:o}", "shape", i,
            "tokens", (json_int_t)sh->tokens, "hidden", (json_int_t)sh->hidden, "weight",
            sh->weight, "served_by", in ? p->candidate.name : p->incumbent.name, "why",
            json_text(why)));
    }
    json_t *routing = json_pack("{s:f, s:o}", "candidate_share", run->routing_share, "shapes",
                                rshapes);
    json_t *arms = json_array();
    for (int i = 0; i < BK_ARM_NAMES; i++)
        json_array_append_new(arms, bk_record_arm_json(run, sc, i));
    rec = json_object();
    json_object_set_new(rec, "schema", json_string(BK_RECORD_SCHEMA));
    json_object_set_new(rec, "run_id", json_string(run->run_id));
    json_object_set_new(rec, "created", json_string(created));
    json_object_set_new(rec, "bracket_version", json_string(BK_VERSION));
    json_object_set_new(rec, "plan", plan ? plan : json_null());
    json_object_set_new(rec, "plan_digest", json_string(run->plan_digest));
    json_object_set_new(rec, "identity",
        json_pack("{s:s, s:I, s:s, s:s, s:o, s:s, s:o, s:o}", "stack_digest", p->arena.stack_digest,
                  "incumbent_generation", (json_int_t)p->arena.incumbent_generation,
                  "candidate_source_digest", p->candidate.source_digest, "binary_digest",
                  run->binary_digest, "topology_signature", json_text(run->lane_signature),
                  "topology_digest", run->topo_digest, "versions",
                  versions(), "hosts", hosts));
    if (p->source_digest_note[0])
        json_object_set_new(json_object_get(rec, "identity"), "source_digest_note",
                            json_text(p->source_digest_note));
    json_object_set_new(rec, "backend", json_string(bk_backend_name(run->backend)));
    json_object_set_new(rec, "rehearsal", json_boolean(run->backend == BK_BACKEND_CPU ||
                                                       run->shared_lanes));
    json_object_set_new(rec, "lanes",
        json_pack("{s:s, s:i, s:o, s:o, s:o, s:o}", "policy", bk_lane_policy_name(p->lane_policy),
                  "size", run->lane_size, "baseline", int_array(run->baseline, run->lane_size),
                  "candidate", int_array(run->candidate, run->lane_size), "signature",
                  json_text(run->lane_signature), "note", json_text(run->lane_note)));
    json_object_set_new(rec, "routing", routing);
    json_object_set_new(rec, "arms", arms);
    json_object_set_new(rec, "stopped", json_text(run->stopped));
    json_object_set_new(rec, "unfinished", json_boolean(run->unfinished));
    json_object_set_new(rec, "quality", quality_json(run));
    json_object_set_new(rec, "score", bk_record_score_json(sc));
    json_object_set_new(rec, "verdict", json_string(bk_verdict_name(sc->verdict)));
    json_object_set_new(rec, "status", json_text(sc->status));
    json_object_set_new(rec, "reasons", json_text(sc->reasons));
    json_object_set_new(rec, "wire", wire);
    json_object_set_new(rec, "samples", json_pack("{s:s, s:s}", "file", "samples.msgpack",
                                                  "digest", samples_digest));
    text = json_dumps(rec, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "cannot serialise the record");
        goto out;
    }
    char path[800];
    snprintf(path, sizeof path, "%s/record.json", run->run_dir);
    size_t len = strlen(text);
    BK_TRY(bk_write_temp(path, text, len, record_tmp, sizeof record_tmp, err));
    BK_TRY(bk_commit_temp(samples_tmp, samples_path, err));
    BK_TRY(bk_commit_temp(record_tmp, path, err));
out:
    if (samples_tmp[0])
        unlink(samples_tmp);
    if (record_tmp[0])
        unlink(record_tmp);
    free(text);
    json_decref(rec);
    return st;
}
