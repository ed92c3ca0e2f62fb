/* plan_check.c - the bracket.plan/1 schema: which fields exist, their types, ranges and
 * defaults, checked in document order so the first error is the one reported. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plans/plan_internal.h"
#include "runner/record_io.h"
#include "topology/topology.h" /* BK_LANE_MAX */

#define BK__CATALOG_SCHEMA "bracket.catalog/1" /* kernels/catalog.h BK_CATALOG_SCHEMA */
#define BK__MAX_ITERS 10000000
#define BK__MAX_ARM_S 604800.0     /* 7 days: an arm's deadline stays far inside uint64 ns */
#define BK__MAX_RENDEZVOUS_S 3600.0 /* 1 hour for engines to meet */
/* The shortest time-out: an arm spawns its engines, they meet, warm up and run (a timed
 * demo-cpu arm takes about 0.5 s on a 2-core VM, a CUDA engine's warm-up alone 0.5 s);
 * rendezvous_s also bounds every barrier of a timed shape, and an arm's time-out is
 * reported in whole seconds. A time-out only ends what overruns it, so the floor costs a
 * fast arm nothing; below it a deadline ends healthy arms (1e-300 s: all of them). */
#define BK__MIN_TIMEOUT_S 1.0

/* Try a step; the first failure leaves the function (nothing is held here:
 * everything written goes into the document, which the caller owns). */
#define CK(call)                                                       \
    do {                                                               \
        bk_status st_ = (call);                                        \
        if (st_ != BK_OK)                                              \
            return st_;                                                \
    } while (0)

static const char *const top_keys[] = { "schema", "name", "arena", "target", "incumbent",
                                        "candidate", "workload", "protocol", "quality",
                                        "lanes", "backend", "timeouts", NULL };
static const char *const arena_keys[] = { "stack_digest", "incumbent_generation", "model",
                                          "substrate", "target_catalog", "architecture", "tp",
                                          "ep", "dtype", "quantization", "graph_mode",
                                          "calibration", NULL };
static const char *const calib_keys[] = { "speed", "quality", NULL };
static const char *const incumbent_keys[] = { "variant", "params", NULL };
static const char *const candidate_keys[] = { "variant", "source_digest", "params", NULL };
static const char *const workload_keys[] = { "phase", "shapes", "warmup_iters", "iters",
                                             "seed", NULL };
static const char *const shape_keys[] = { "tokens", "hidden", "weight", "experts", "topk",
                                          "intermediate", NULL };
static const char *const protocol_keys[] = { "version", "confidence", "min_gain",
                                             "drift_limit", "drift_policy",
                                             "bootstrap_resamples", "repeats", NULL };
static const char *const quality_keys[] = { "rtol", "atol", NULL };
static const char *const lanes_keys[] = { "policy", NULL };
static const char *const timeouts_keys[] = { "arm_s", "rendezvous_s", NULL };

static const char *const dtypes[] = { "bf16", "fp16", "fp32", NULL };
static const char *const graph_modes[] = { "eager", "graph", NULL };
static const char *const phases[] = { "decode", "prefill", "chunked_prefill", NULL };
static const char *const versions[] = { "v7", "v8", NULL };
static const char *const drift_policies[] = { "exclude_later", "strict", NULL };
static const char *const lane_policies[] = { "disjoint", "shared", NULL };
static const char *const backends[] = { "auto", "cpu", "cuda", NULL };

static const bk__range at_least_0 = { 0, 0, 0, 0, 0 };
static const bk__range above_0 = { 0, 0, 1, 0, 0 };

/* ---- string rules ---- */

/* "sha256:" and 64 lowercase hex digits. Every way to miss it (absent, not a string, empty,
 * malformed) states that rule, not just "a non-empty string". */
#define DIGEST_RULE "\"sha256:\" followed by 64 lowercase hex digits"
static bk_status check_digest(const bk__chk *c, json_t *obj, const char *base, const char *key,
                              char *dst, size_t n)
{
    char path[256];
    json_t *v = json_object_get(obj, key);
    bk__join(path, sizeof path, base, key);
    if (!v)
        return bk__bad(c, path, NULL, "missing (" DIGEST_RULE ")");
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t len = json_is_string(v) ? json_string_length(v) : 0;
    int ok = len == 7 + 64 && len < n && strlen(s) == len && strncmp(s, "sha256:", 7) == 0;
    for (size_t i = 7; ok && i < len; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (!ok)
        return bk__bad(c, path, v, "must be " DIGEST_RULE);
    bk_strlcpy(dst, s, n);
    return BK_OK;
}

/* A string that must equal `want` exactly (schema names). */
static bk_status check_exact(const bk__chk *c, json_t *obj, const char *base, const char *key,
                             const char *want)
{
    char path[256];
    json_t *v = json_object_get(obj, key);
    bk__join(path, sizeof path, base, key);
    if (!v)
        return bk__bad(c, path, NULL, "missing (\"%s\")", want);
    char other[96];
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
        return bk__bad(c, path, v, "must be \"%s\"%s", want,
                       bk_schema_other(json_string_value(v), "a plan", other, sizeof other));
    return BK_OK;
}

int bk_plan_name_char(char ch)
{
    return ch && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", ch);
}

static bk_status check_name(const bk__chk *c, json_t *root, bk_plan *p)
{
    CK(bk__get_str(c, root, "", "name", NULL, p->name, sizeof p->name));
    for (const char *s = p->name; *s; s++) {
        if (!bk_plan_name_char(*s))
            return bk__bad(c, "name", json_object_get(root, "name"),
                           "may hold only letters, digits, '.', '_' and '-'");
    }
    return BK_OK;
}

/* ---- sections ---- */

static bk_status check_arena(const bk__chk *c, json_t *root, bk_arena *a)
{
    json_t *o, *cal;
    json_int_t i;
    int e;
    CK(bk__get_obj(c, root, "", "arena", 0, arena_keys, &o));
    CK(check_digest(c, o, "arena", "stack_digest", a->stack_digest, sizeof a->stack_digest));
    CK(bk__get_int(c, o, "arena", "incumbent_generation", NULL, 0, INT64_MAX, &i));
    a->incumbent_generation = i;
    CK(bk__get_str(c, o, "arena", "model", NULL, a->model, sizeof a->model));
    CK(bk__get_str(c, o, "arena", "substrate", NULL, a->substrate, sizeof a->substrate));
    CK(check_exact(c, o, "arena", "target_catalog", BK__CATALOG_SCHEMA));
    bk_strlcpy(a->target_catalog, BK__CATALOG_SCHEMA, sizeof a->target_catalog);
    CK(bk__get_str(c, o, "arena", "architecture", NULL, a->architecture,
                   sizeof a->architecture));
    CK(bk__get_int(c, o, "arena", "tp", NULL, 1, 1024, &i));
    a->tp = (int)i;
    CK(bk__get_int(c, o, "arena", "ep", &(json_int_t){ 1 }, 1, 1024, &i));
    a->ep = (int)i;
    if (a->tp * a->ep > BK_LANE_MAX) /* both <= 1024: no overflow */
        return bk__bad(c, "arena.tp x arena.ep", NULL,
                       "%d x %d = %d exceeds %d ranks a lane (tp x ep must be in 1..%d)",
                       a->tp, a->ep, a->tp * a->ep, BK_LANE_MAX, BK_LANE_MAX);
    CK(bk__get_enum(c, o, "arena", "dtype", NULL, dtypes, &e));
    bk_strlcpy(a->dtype, dtypes[e], sizeof a->dtype);
    CK(bk__get_str(c, o, "arena", "quantization", "none", a->quantization,
                   sizeof a->quantization));
    CK(bk__get_enum(c, o, "arena", "graph_mode", "eager", graph_modes, &e));
    bk_strlcpy(a->graph_mode, graph_modes[e], sizeof a->graph_mode);
    CK(bk__get_obj(c, o, "arena", "calibration", 1, calib_keys, &cal));
    CK(bk__get_str(c, cal, "arena.calibration", "speed", "uncalibrated", a->calib_speed,
                   sizeof a->calib_speed));
    CK(bk__get_str(c, cal, "arena.calibration", "quality", "uncalibrated", a->calib_quality,
                   sizeof a->calib_quality));
    return BK_OK;
}

/* incumbent {variant, params} or candidate {variant, source_digest, params} */
static bk_status check_variant(const bk__chk *c, json_t *root, const char *key, int candidate,
                               bk_variant_ref *v)
{
    json_t *o, *params;
    CK(bk__get_obj(c, root, "", key, 0, candidate ? candidate_keys : incumbent_keys, &o));
    CK(bk__get_str(c, o, key, "variant", NULL, v->name, sizeof v->name));
    if (candidate)
        CK(check_digest(c, o, key, "source_digest", v->source_digest,
                        sizeof v->source_digest));
    CK(bk__get_obj(c, o, key, "params", 1, NULL, &params));
    return BK_OK;
}

static bk_status check_shape(const bk__chk *c, json_t *el, const char *path, bk_shape *s)
{
    json_int_t i;
    if (!json_is_object(el))
        return bk__bad(c, path, el, "must be an object");
    CK(bk__check_keys(c, el, path, shape_keys));
    CK(bk__get_int(c, el, path, "tokens", NULL, 1, INT64_MAX, &i));
    s->tokens = i;
    CK(bk__get_int(c, el, path, "hidden", NULL, 1, INT64_MAX, &i));
    s->hidden = i;
    CK(bk__get_num(c, el, path, "weight", NULL, above_0, &s->weight));
    /* MoE fields stay absent in the document when absent: 0 means "unused". */
    const char *moe[] = { "experts", "topk", "intermediate" };
    int64_t *dst[] = { &s->experts, &s->topk, &s->intermediate };
    for (int k = 0; k < 3; k++) {
        if (!json_object_get(el, moe[k]))
            continue;
        CK(bk__get_int(c, el, path, moe[k], NULL, 1, INT64_MAX, &i));
        *dst[k] = i;
    }
    return BK_OK;
}

static bk_status check_workload(const bk__chk *c, json_t *root, bk_plan *p)
{
    json_t *o, *arr;
    json_int_t i;
    int e;
    double sum = 0;
    CK(bk__get_obj(c, root, "", "workload", 0, workload_keys, &o));
    CK(bk__get_enum(c, o, "workload", "phase", NULL, phases, &e));
    p->workload.phase = (bk_phase)e;
    arr = json_object_get(o, "shapes");
    if (!arr)
        return bk__bad(c, "workload.shapes", NULL,
                       "missing (a non-empty array of shapes)");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return bk__bad(c, "workload.shapes", arr, "must be a non-empty array of shapes");
    if (json_array_size(arr) > BK_MAX_SHAPES)
        return bk__bad(c, "workload.shapes", NULL, "must hold at most %d shapes, got %zu",
                       BK_MAX_SHAPES, json_array_size(arr));
    for (size_t k = 0; k < json_array_size(arr); k++) {
        char path[64];
        bk_shape *s = &p->workload.shapes[k];
        snprintf(path, sizeof path, "workload.shapes[%zu]", k);
        CK(check_shape(c, json_array_get(arr, k), path, s));
        for (size_t j = 0; j < k; j++) {
            const bk_shape *t = &p->workload.shapes[j];
            if (t->tokens == s->tokens && t->hidden == s->hidden && t->experts == s->experts &&
                t->topk == s->topk && t->intermediate == s->intermediate)
                return bk__bad(c, path, NULL, "duplicate of workload.shapes[%zu] (same sizes)",
                               j);
        }
        sum += s->weight;
        p->workload.nshapes = (int)k + 1;
    }
    if (!isfinite(sum))
        return bk__bad(c, "workload.shapes", NULL, "the weights sum to more than a double "
                       "holds; they are relative, scale them down (e.g. to sum to 1)");
    for (int k = 0; k < p->workload.nshapes; k++) {
        p->workload.shapes[k].weight /= sum; /* the document keeps what the user wrote */
        if (p->workload.shapes[k].weight == 0) {
            char path[64];
            snprintf(path, sizeof path, "workload.shapes[%d].weight", k);
            return bk__bad(c, path, NULL, "negligible against the other weights (its share "
                           "of the workload rounds to 0)");
        }
    }
    CK(bk__get_int(c, o, "workload", "warmup_iters", &(json_int_t){ 20 }, 0, BK__MAX_ITERS,
                   &i));
    p->workload.warmup_iters = (int)i;
    CK(bk__get_int(c, o, "workload", "iters", NULL, 1, BK__MAX_ITERS, &i));
    p->workload.iters = (int)i;
    CK(bk__get_int(c, o, "workload", "seed", &(json_int_t){ 1 }, 0, INT64_MAX, &i));
    p->workload.seed = (uint64_t)i;
    return BK_OK;
}

static bk_status check_protocol(const bk__chk *c, json_t *root, bk_plan *p)
{
    json_t *o;
    json_int_t i;
    int e;
    const bk__range confidence = { 0.5, 1, 1, 1, 1 }, gain = { 0, 1, 0, 1, 1 };
    CK(bk__get_obj(c, root, "", "protocol", 1, protocol_keys, &o));
    CK(bk__get_enum(c, o, "protocol", "version", "v8", versions, &e));
    p->protocol.version = e == 0 ? BK_PROTO_V7 : BK_PROTO_V8;
    CK(bk__get_num(c, o, "protocol", "confidence", &(double){ 0.95 }, confidence,
                   &p->protocol.confidence));
    CK(bk__get_num(c, o, "protocol", "min_gain", &(double){ 0.01 }, gain,
                   &p->protocol.min_gain));
    CK(bk__get_num(c, o, "protocol", "drift_limit", &(double){ 0.02 }, at_least_0,
                   &p->protocol.drift_limit));
    CK(bk__get_enum(c, o, "protocol", "drift_policy", "exclude_later", drift_policies, &e));
    p->protocol.drift_policy = (bk_drift_policy)e;
    CK(bk__get_int(c, o, "protocol", "bootstrap_resamples", &(json_int_t){ 2000 }, 100, 1000000,
                   &i));
    p->protocol.bootstrap_resamples = (int)i;
    CK(bk__get_int(c, o, "protocol", "repeats", &(json_int_t){ 1 }, 1, 16, &i));
    p->protocol.repeats = (int)i;
    return BK_OK;
}

/* A timeout in seconds: in [BK__MIN_TIMEOUT_S, max] (a tiny positive one, 1e-300, is a
 * deadline no arm can meet, not a plan; the most keeps a deadline in nanoseconds in range). */
static bk_status check_timeout(const bk__chk *c, json_t *o, const char *key, double def,
                               double max, double *out)
{
    const bk__range r = { BK__MIN_TIMEOUT_S, max, 0, 0, 1 };
    return bk__get_num(c, o, "timeouts", key, &def, r, out);
}

/* quality, lanes, backend, timeouts: all optional with defaults */
static bk_status check_rest(const bk__chk *c, json_t *root, bk_plan *p)
{
    json_t *o;
    int e;
    CK(bk__get_obj(c, root, "", "quality", 1, quality_keys, &o));
    CK(bk__get_num(c, o, "quality", "rtol", &(double){ 1e-2 }, at_least_0, &p->quality.rtol));
    /* moe.fused_experts_reduce's outputs near 0 carry bf16 rounding of up to about 0.01
     * absolute (kernels/moe.c, its error bound): 1e-3 failed its own incumbent */
    const double atol = strcmp(p->target, "moe.fused_experts_reduce") == 0 ? 1e-2 : 1e-3;
    CK(bk__get_num(c, o, "quality", "atol", &atol, at_least_0, &p->quality.atol));
    CK(bk__get_obj(c, root, "", "lanes", 1, lanes_keys, &o));
    CK(bk__get_enum(c, o, "lanes", "policy", "disjoint", lane_policies, &e));
    p->lane_policy = (bk_lane_policy)e;
    CK(bk__get_enum(c, root, "", "backend", "auto", backends, &e));
    p->backend = (bk_backend)e;
    CK(bk__get_obj(c, root, "", "timeouts", 1, timeouts_keys, &o));
    CK(check_timeout(c, o, "arm_s", 120, BK__MAX_ARM_S, &p->timeouts.arm_s));
    CK(check_timeout(c, o, "rendezvous_s", 30, BK__MAX_RENDEZVOUS_S, &p->timeouts.rendezvous_s));
    return BK_OK;
}

bk_status bk__plan_check(json_t *root, const char *label, bk_plan *p, bk_err *err)
{
    const bk__chk c = { label, err };
    if (!json_is_object(root))
        return bk__bad(&c, "", root, "the plan must be a JSON object");
    /* the schema first: a record or a snapshot given as a plan is said to be one */
    CK(check_exact(&c, root, "", "schema", BK_PLAN_SCHEMA));
    CK(bk__check_keys(&c, root, "", top_keys));
    CK(check_name(&c, root, p));
    CK(check_arena(&c, root, &p->arena));
    CK(bk__get_str(&c, root, "", "target", NULL, p->target, sizeof p->target));
    CK(check_variant(&c, root, "incumbent", 0, &p->incumbent));
    CK(check_variant(&c, root, "candidate", 1, &p->candidate));
    CK(check_workload(&c, root, p));
    CK(check_protocol(&c, root, p));
    CK(check_rest(&c, root, p));
    return BK_OK;
}
