/* catalog.c - the target catalog: the tables of targets and variants, lookups, capability
 * domains, plan checks against the catalog, and the candidate's routing share.
 *
 * Registration: a target adds one line to k_targets; a file of variants adds its
 * table (terminated by a NULL name) to k_tables, under #ifdef BK_HAVE_CUDA when it
 * needs the toolkit. Nothing else changes. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "collectives/collectives.h"
#include "kernels/catalog_internal.h"
#include "kernels/cuda_variants.h"

static const bk_target *const k_targets[] = {
    &bk__ar_rmsnorm_target,
    &bk__moe_target,
};

static const bk_variant *const k_tables[] = {
    bk__ar_rmsnorm_cpu_variants,
    bk__ar_rmsnorm_diag_variants,
    bk__moe_cpu_variants,
#ifdef BK_HAVE_CUDA
    bk__moe_cuda_variants,
#endif
};

/* Variants defined one by one (the cuda files export each variant by name). */
static const bk_variant *const k_singles[] = {
#ifdef BK_HAVE_CUDA
    &bk_variant_nccl_then_rmsnorm,
    &bk_variant_ipc_oneshot_fused,
    &bk_variant_ipc_twoshot_fused,
#endif
    NULL,
};

#define NTARGETS ((int)(sizeof k_targets / sizeof k_targets[0]))
#define NTABLES ((int)(sizeof k_tables / sizeof k_tables[0]))
#define NSINGLES ((int)(sizeof k_singles / sizeof k_singles[0]) - 1)

/* ---- lookups and iteration ---- */

const bk_target *bk_catalog_target(const char *name)
{
    for (int i = 0; name && i < NTARGETS; i++)
        if (strcmp(k_targets[i]->name, name) == 0)
            return k_targets[i];
    return NULL;
}

int bk_catalog_ntargets(void) { return NTARGETS; }

const bk_target *bk_catalog_target_at(int i)
{
    return i >= 0 && i < NTARGETS ? k_targets[i] : NULL;
}

int bk_catalog_nvariants(void)
{
    int n = NSINGLES;
    for (int t = 0; t < NTABLES; t++)
        for (const bk_variant *v = k_tables[t]; v->name; v++)
            n++;
    return n;
}

const bk_variant *bk_catalog_variant_at(int i)
{
    for (int t = 0; t < NTABLES && i >= 0; t++)
        for (const bk_variant *v = k_tables[t]; v->name; v++)
            if (i-- == 0)
                return v;
    return i >= 0 && i < NSINGLES ? k_singles[i] : NULL;
}

const bk_variant *bk_catalog_variant(const char *target, const char *name)
{
    for (int i = 0; target && name && i < bk_catalog_nvariants(); i++) {
        const bk_variant *v = bk_catalog_variant_at(i);
        if (strcmp(v->target, target) == 0 && strcmp(v->name, name) == 0)
            return v;
    }
    return NULL;
}

/* ---- domains ---- */

static const char *backend_name(bk_backend b)
{
    return b == BK_BACKEND_CPU ? "cpu" : b == BK_BACKEND_CUDA ? "cuda" : "auto";
}

/* 1 when `dtype` is an item of the comma list. */
static int list_has(const char *list, const char *dtype)
{
    size_t n = strlen(dtype);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, dtype, n) == 0)
            return 1;
        p = end ? end + 1 : p + len;
    }
    return 0;
}

/* "1-8" or "1,2,4" from a worlds mask. */
static void worlds_text(uint32_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int w = 0; w < 32 && used < len; w++) {
        if (!(mask & (1u << w)))
            continue;
        int e = w;
        while (e + 1 < 32 && (mask & (1u << (e + 1))))
            e++;
        int k = e > w ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", w, e)
                      : snprintf(buf + used, len - used, "%s%d", used ? "," : "", w);
        used += k > 0 ? (size_t)k : 0;
        w = e;
    }
}

/* snprintf at buf + *used, moving *used (never past len). */
static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    *used = k < 0 ? len : *used + (size_t)k < len ? *used + (size_t)k : len;
}

void bk_domain_text(const bk_domain *d, char *buf, size_t len)
{
    size_t used = 0;
    char ws[96];
    if (!len)
        return;
    buf[0] = '\0';
    append(buf, len, &used, "%s%s%s", d->backends & BK_BK_CPU ? "cpu" : "",
           (d->backends & BK_BK_CPU) && (d->backends & BK_BK_CUDA) ? "," : "",
           d->backends & BK_BK_CUDA ? "cuda" : "");
    if (d->dtypes)
        append(buf, len, &used, "; %s", d->dtypes);
    if (d->max_tokens)
        append(buf, len, &used, "; tokens %lld..%lld", (long long)d->min_tokens,
               (long long)d->max_tokens);
    else
        append(buf, len, &used, "; tokens >= %lld", (long long)d->min_tokens);
    if (d->max_hidden)
        append(buf, len, &used, "; hidden %lld..%lld", (long long)d->min_hidden,
               (long long)d->max_hidden);
    else
        append(buf, len, &used, "; hidden >= %lld", (long long)d->min_hidden);
    if (d->hidden_multiple > 1)
        append(buf, len, &used, ", a multiple of %lld", (long long)d->hidden_multiple);
    if (d->worlds) {
        worlds_text(d->worlds, ws, sizeof ws);
        append(buf, len, &used, "; worlds %s", ws);
    }
    if (d->needs_p2p)
        append(buf, len, &used, "; peer access");
}

/* What a domain says of the whole lane rather than of one shape: 0 when the backend,
 * dtype and world size lie inside it, else which of them does not (and why says it). */
enum { LANE_OK, LANE_BACKEND, LANE_DTYPE, LANE_WORLD };
static int lane_outside(const bk_domain *d, int world, const char *dtype, bk_backend backend,
                        char *why, size_t why_len)
{
    char ws[96];
    if (backend != BK_BACKEND_AUTO && !(d->backends & (1u << backend))) {
        snprintf(why, why_len, "backend %s not supported", backend_name(backend));
        return LANE_BACKEND;
    }
    if (dtype && d->dtypes && !list_has(d->dtypes, dtype)) {
        snprintf(why, why_len, "dtype %s not in {%s}", dtype, d->dtypes);
        return LANE_DTYPE;
    }
    if (d->worlds && (world < 0 || world > 31 || !(d->worlds & (1u << world)))) {
        worlds_text(d->worlds, ws, sizeof ws);
        snprintf(why, why_len, "world %d not in {%s}", world, ws);
        return LANE_WORLD;
    }
    return LANE_OK;
}

int bk_domain_contains(const bk_domain *d, const bk_shape *s, int world, const char *dtype,
                       bk_backend backend, int have_p2p, char *why, size_t why_len)
{
    if (lane_outside(d, world, dtype, backend, why, why_len) != LANE_OK)
        return 0;
    if (s->tokens < d->min_tokens || (d->max_tokens && s->tokens > d->max_tokens)) {
        int low = s->tokens < d->min_tokens;
        snprintf(why, why_len, "tokens %lld %s %lld", (long long)s->tokens,
                 low ? "< min" : "> max", (long long)(low ? d->min_tokens : d->max_tokens));
        return 0;
    }
    if (s->hidden < d->min_hidden || (d->max_hidden && s->hidden > d->max_hidden)) {
        int low = s->hidden < d->min_hidden;
        snprintf(why, why_len, "hidden %lld %s %lld", (long long)s->hidden,
                 low ? "< min" : "> max", (long long)(low ? d->min_hidden : d->max_hidden));
        return 0;
    }
    if (d->hidden_multiple > 1 && s->hidden % d->hidden_multiple != 0) {
        snprintf(why, why_len, "hidden %lld not a multiple of %lld", (long long)s->hidden,
                 (long long)d->hidden_multiple);
        return 0;
    }
    if (d->needs_p2p && !have_p2p) {
        snprintf(why, why_len, "needs peer-to-peer access, which the lane lacks");
        return 0;
    }
    if (why_len)
        why[0] = '\0';
    return 1;
}

void bk_variant_domain_text(const bk_variant *v, char *buf, size_t len)
{
    const bk_variant *base, *fallback;
    const char *dflt[2] = { NULL, NULL };
    const bk_backend on[2] = { BK_BACKEND_CPU, BK_BACKEND_CUDA };
    size_t used = 0;
    if (!len)
        return;
    if (!v->diagnostic) {
        bk_domain_text(&v->domain, buf, len);
        return;
    }
    buf[0] = '\0';
    append(buf, len, &used, "its base's (params.base");
    for (int k = 0; k < 2; k++)
        if (v->backends & (1u << on[k])) {
            bk__diag_bases(v, NULL, on[k], &base, &fallback, &dflt[k]);
            append(buf, len, &used, dflt[k] ? "; on %s default %s" : "; on %s required",
                   backend_name(on[k]), dflt[k] ? dflt[k] : "");
        }
    append(buf, len, &used, ")");
    if (dflt[0] || dflt[1])
        append(buf, len, &used, "; where a default base exists, a call outside a named base's "
               "domain runs it, wrapped the same way");
}

int bk_catalog_diag_bases(const bk_variant *v, const json_t *params, bk_backend backend,
                          const bk_variant **base, const bk_variant **fallback)
{
    const char *dflt;
    return bk__diag_bases(v, params, backend, base, fallback, &dflt);
}

/* ---- plan checks ---- */

/* A target takes a dtype when one of its variants' domains lists it. */
static int target_takes_dtype(const char *target, const char *dtype, char *list, size_t len)
{
    int found = 0;
    size_t used = 0;
    list[0] = '\0';
    for (int t = 0; t < NTABLES; t++)
        for (const bk_variant *v = k_tables[t]; v->name; v++) {
            if (strcmp(v->target, target) != 0 || !v->domain.dtypes)
                continue;
            found |= list_has(v->domain.dtypes, dtype);
            if (!strstr(list, v->domain.dtypes) && used < len) {
                int k = snprintf(list + used, len - used, "%s%s", used ? "," : "",
                                 v->domain.dtypes);
                used += k > 0 ? (size_t)k : 0;
            }
        }
    return found;
}

/* `which` is "incumbent" or "candidate". */
static bk_status check_variant(const bk_plan *plan, const char *which, const bk_variant_ref *ref,
                               bk_backend backend, bk_err *err)
{
    const bk_variant *v = bk_catalog_variant(plan->target, ref->name);
    if (!v) {
        char known[512] = "";
        size_t used = 0;
        for (int i = 0; i < bk_catalog_nvariants(); i++) {
            const bk_variant *k = bk_catalog_variant_at(i);
            if (strcmp(k->target, plan->target) == 0 && used < sizeof known) {
                int n = snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "",
                                 k->name);
                used += n > 0 ? (size_t)n : 0;
            }
        }
        return BK_FAIL(err, BK_ERR_INPUT, "%s.variant: no variant '%s' for target '%s' "
                       "(known: %s)", which, ref->name, plan->target, known);
    }
    if (backend != BK_BACKEND_AUTO && !(v->backends & (1u << backend)))
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s.variant: '%s' does not support backend %s",
                       which, v->name, backend_name(backend));
    /* Params parse where they will run: rank 0 of a lane of the arena's size. */
    bk_err inner = { 0 };
    void *state = NULL;
    json_t *empty = ref->params ? NULL : json_object();
    bk_backend b = backend != BK_BACKEND_AUTO ? backend
                   : (v->backends & BK_BK_CPU) ? BK_BACKEND_CPU : BK_BACKEND_CUDA;
    bk_status st = v->create(ref->params ? ref->params : empty, b, 0,
                             plan->arena.tp * (plan->arena.ep > 0 ? plan->arena.ep : 1), &state,
                             &inner);
    json_decref(empty);
    if (st != BK_OK) /* "params.x: ..." names its own path; anything else is the variant's */
        return BK_FAIL(err, st, "%s.%s%s", which,
                       strncmp(inner.msg, "params.", 7) != 0 ? "variant: " : "", inner.msg);
    v->destroy(state);
    /* a diagnostic's crash past the last timed iteration would never happen: the bracket
     * would report on a candidate that did nothing (the default at_iter as much as one
     * written out) */
    long long at = 0;
    const int crash = bk__diag_crash_at(v, ref->params, &at);
    if (crash == 1 && at >= plan->workload.iters)
        return BK_FAIL(err, BK_ERR_INPUT, "%s.params.at_iter: %lld is past the last timed "
                       "iteration (workload.iters is %d: 0..%d), so nothing would crash", which,
                       at, plan->workload.iters, plan->workload.iters - 1);
    if (crash == 2 && at >= plan->workload.iters)
        return BK_FAIL(err, BK_ERR_INPUT, "%s.params.at_iter: not given, and the default, %lld, "
                       "is past the last timed iteration (workload.iters is %d: 0..%d), so "
                       "nothing would crash; set %s.params.at_iter to 0..%d or workload.iters "
                       "above %lld", which, at, plan->workload.iters, plan->workload.iters - 1,
                       which, plan->workload.iters - 1, at);
    return BK_OK;
}

/* ---- what a plan's variants serve ---- */

/* The variants behind one of a plan's variants: the variant itself when it is real; for a
 * diagnostic wrapper, the base it calls and the default base it calls where the base's
 * domain excludes the call (bk__diag_bases). The engine routes by v's own domain (a
 * wrapper's table domain takes every bf16 shape); base and fallback then decide. */
typedef struct served {
    const char *which; /* "incumbent" or "candidate" */
    const bk_variant *v, *base, *fallback;
    bk_backend backend;
    int world;
} served;

static int plan_world(const bk_plan *plan)
{
    return plan->arena.tp * (plan->arena.ep > 0 ? plan->arena.ep : 1);
}

/* 0 when the plan names no such variant. */
static int served_of(const bk_plan *plan, const bk_variant_ref *ref, bk_backend backend,
                     served *sv)
{
    memset(sv, 0, sizeof *sv);
    sv->which = ref == &plan->incumbent ? "incumbent" : "candidate";
    sv->v = bk_catalog_variant(plan->target, ref->name);
    sv->backend = backend;
    sv->world = plan_world(plan);
    if (!sv->v)
        return 0;
    sv->base = sv->v;
    const bk_variant *base, *fallback;
    const char *dflt;
    /* a wrapper's bases on "auto" are those of the backend check_variant creates it on */
    const bk_backend b = backend != BK_BACKEND_AUTO ? backend
                         : (sv->v->backends & BK_BK_CPU) ? BK_BACKEND_CPU : BK_BACKEND_CUDA;
    if (bk__diag_bases(sv->v, ref->params, b, &base, &fallback, &dflt)) {
        sv->base = base;
        sv->fallback = fallback;
    }
    return 1;
}

/* "the candidate shm_oneshot_fused" or "the candidate slowed's base ipc_oneshot_fused" */
static void who(const served *sv, char *buf, size_t len)
{
    if (sv->base == sv->v)
        snprintf(buf, len, "the %s %s", sv->which, sv->v->name);
    else
        snprintf(buf, len, "the %s %s's base %s", sv->which, sv->v->name, sv->base->name);
}

enum { SERVED, ROUTED, FAILS };

/* Whether the calls of shape s are served by sv (SERVED: *by, when not NULL, is the real
 * variant computing them), routed to the incumbent by the engine (ROUTED: outside v's own
 * domain), or made and failing (FAILS: a wrapper whose base's domain excludes them, with
 * no default base that takes them). `why` says what excluded the call: on SERVED through
 * a wrapper's default base, why its base did not take it; else empty. */
static int serving(const served *sv, const bk_plan *plan, const bk_shape *s, int have_p2p,
                   const bk_variant **by, char *why, size_t why_len)
{
    char fwhy[256];
    const char *dt = plan->arena.dtype;
    if (by)
        *by = NULL;
    if (!bk_domain_contains(&sv->v->domain, s, sv->world, dt, sv->backend, have_p2p, why,
                            why_len))
        return ROUTED;
    if (sv->base == sv->v ||
        bk_domain_contains(&sv->base->domain, s, sv->world, dt, sv->backend, have_p2p, why,
                           why_len)) {
        if (by)
            *by = sv->base;
        return SERVED;
    }
    if (!sv->fallback || !bk_domain_contains(&sv->fallback->domain, s, sv->world, dt,
                                             sv->backend, have_p2p, fwhy, sizeof fwhy))
        return FAILS;
    if (by)
        *by = sv->fallback;
    return SERVED;
}

int bk_catalog_lane_outside(const bk_plan *plan, const bk_variant_ref *ref, bk_backend backend,
                            char *why, size_t why_len)
{
    served sv;
    char w[160], inner[256], dom[96] = "";
    if (why_len)
        why[0] = '\0';
    if (!served_of(plan, ref, backend, &sv))
        return 0;
    const bk_domain *d = &sv.v->domain;
    int k = lane_outside(d, sv.world, plan->arena.dtype, backend, inner, sizeof inner);
    if (k == LANE_OK && sv.base != sv.v) {
        d = &sv.base->domain;
        k = lane_outside(d, sv.world, plan->arena.dtype, backend, inner, sizeof inner);
        if (k != LANE_OK && sv.fallback &&
            lane_outside(&sv.fallback->domain, sv.world, plan->arena.dtype, backend, NULL,
                         0) == LANE_OK)
            k = LANE_OK; /* the wrapper calls its default base there */
    }
    if (k == LANE_OK)
        return 0;
    if (d != &sv.v->domain)
        who(&sv, w, sizeof w);
    else
        snprintf(w, sizeof w, "the %s %s", sv.which, sv.v->name);
    if (k == LANE_WORLD) {
        worlds_text(d->worlds, dom, sizeof dom);
        snprintf(why, why_len, "arena.tp x arena.ep: the lane size is outside the domain of "
                 "%s (worlds %s), got %d x %d = %d", w, dom, plan->arena.tp,
                 plan->arena.ep > 0 ? plan->arena.ep : 1, sv.world);
    } else if (k == LANE_DTYPE) {
        snprintf(why, why_len, "arena.dtype: outside the domain of %s (%s), got %s", w,
                 d->dtypes ? d->dtypes : "?", plan->arena.dtype);
    } else {
        snprintf(why, why_len, "backend: outside the domain of %s (%s)", w, inner);
    }
    return 1;
}

const bk_variant *bk_catalog_served_by(const bk_plan *plan, const bk_variant_ref *ref,
                                       int shape, bk_backend backend, int have_p2p, char *why,
                                       size_t why_len)
{
    served sv;
    const bk_variant *by = NULL;
    if (why_len)
        why[0] = '\0';
    if (shape < 0 || shape >= plan->workload.nshapes || !served_of(plan, ref, backend, &sv))
        return NULL;
    serving(&sv, plan, &plan->workload.shapes[shape], have_p2p, &by, why, why_len);
    return by;
}

/* The incumbent is the serving stack: it runs arms B and B' whole and every call routed away
 * from the candidate, so the lane and every shape must lie inside its domain. A wrapper is
 * called for every shape (its table domain takes them all), so as the candidate too it must
 * serve each one: where neither its base nor a default base can, its calls would fail. */
static bk_status check_served(const bk_plan *plan, const bk_variant_ref *ref, bk_backend backend,
                              bk_err *err)
{
    served sv;
    char why[256], w[160], tail[320];
    if (!served_of(plan, ref, backend, &sv))
        return BK_OK; /* check_variant has said so */
    const int inc = ref == &plan->incumbent;
    if (!inc && sv.base == sv.v)
        return BK_OK; /* a real candidate: the incumbent serves what it does not */
    who(&sv, w, sizeof w);
    if (inc)
        snprintf(tail, sizeof tail, "the incumbent is the serving stack and must serve every "
                 "call of the workload, so the plan is refused");
    else if (sv.fallback)
        snprintf(tail, sizeof tail, "%s wraps its base for every shape and its default base %s "
                 "does not serve it either, so its calls would fail and the plan is refused "
                 "(name a candidate.params.base that serves every shape)", sv.v->name,
                 sv.fallback->name);
    else
        snprintf(tail, sizeof tail, "%s wraps its base for every shape and has no default base "
                 "on %s to serve it instead, so its calls would fail and the plan is refused "
                 "(name a candidate.params.base that serves every shape)", sv.v->name,
                 backend_name(sv.backend));
    if (bk_catalog_lane_outside(plan, ref, backend, why, sizeof why))
        return BK_FAIL(err, BK_ERR_INPUT, "%s; %s", why, tail);
    for (int i = 0; i < plan->workload.nshapes; i++) {
        const bk_shape *s = &plan->workload.shapes[i];
        const int how = serving(&sv, plan, s, 1, NULL, why, sizeof why);
        if (how == SERVED || (!inc && how == ROUTED))
            continue;
        return BK_FAIL(err, BK_ERR_INPUT, "workload.shapes[%d]: outside the domain of %s (%s), "
                       "got tokens %lld, hidden %lld; %s", i, w, why, (long long)s->tokens,
                       (long long)s->hidden, tail);
    }
    return BK_OK;
}

static bk_status check_plan(const bk_plan *plan, bk_backend backend, bk_err *err)
{
    bk_status st = BK_OK;
    char buf[512];
    const bk_target *t = bk_catalog_target(plan->target);
    if (!t) {
        size_t used = 0;
        buf[0] = '\0';
        for (int i = 0; i < NTARGETS && used < sizeof buf; i++) {
            int n = snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "",
                             k_targets[i]->name);
            used += n > 0 ? (size_t)n : 0;
        }
        return BK_FAIL(err, BK_ERR_INPUT, "target: unknown target '%s' (known: %s)",
                       plan->target, buf);
    }
    if (!target_takes_dtype(t->name, plan->arena.dtype, buf, sizeof buf))
        return BK_FAIL(err, BK_ERR_INPUT, "arena.dtype: target '%s' does not take dtype '%s' "
                       "(it takes: %s)", t->name, plan->arena.dtype, buf);
    BK_TRY(check_variant(plan, "incumbent", &plan->incumbent, backend, err));
    BK_TRY(check_variant(plan, "candidate", &plan->candidate, backend, err));
    const int world = plan_world(plan);
    for (int i = 0; i < plan->workload.nshapes; i++) {
        char why[256];
        if (t->check_shape(&plan->workload.shapes[i], world, why, sizeof why) != BK_OK) {
            st = BK_FAIL(err, BK_ERR_INPUT, "workload.shapes[%d]: %s", i, why);
            goto out;
        }
    }
    BK_TRY(check_served(plan, &plan->incumbent, backend, err));
    BK_TRY(check_served(plan, &plan->candidate, backend, err));
out:
    return st;
}
bk_status bk_catalog_check_plan(const bk_plan *plan, bk_backend backend, bk_err *err)
{
    const bk_status st = check_plan(plan, backend, err);
    if (st != BK_OK && err && plan->path[0]) { /* the file first, as the loader's messages */
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        snprintf(err->msg, sizeof err->msg, "%.200s: %.800s", plan->path, msg);
    }
    return st;
}

double bk_routing_share(const bk_plan *plan, bk_backend backend, int have_p2p)
{
    double in = 0.0, all = 0.0;
    char why[256];
    for (int i = 0; i < plan->workload.nshapes; i++) {
        all += plan->workload.shapes[i].weight;
        if (bk_catalog_served_by(plan, &plan->candidate, i, backend, have_p2p, why, sizeof why))
            in += plan->workload.shapes[i].weight;
    }
    return all > 0.0 ? in / all : 0.0;
}

double bk_target_algbw(const bk_target *t, const bk_shape *s, int world, double ns)
{
    return t && ns > 0 ? t->algo_bytes(s, world) / ns : 0;
}

/* ---- shared by the targets that end in an allreduce ---- */

double bk__allreduce_algo_bytes(const bk_shape *s, int world)
{
    (void)world;
    return (double)s->tokens * (double)s->hidden * 2.0;
}

double bk__allreduce_busbw_factor(int world)
{
    return world > 0 ? 2.0 * (world - 1) / world : 0.0;
}

/* ---- shared by the cpu variants ---- */

double bk__call_timeout(const bk_call *call)
{
    return call->timeout_s > 0 ? call->timeout_s : 30.0;
}

bk_status bk__cpu_lane_shm(const char *variant, const bk_call *call, size_t need, bk_shm **shm,
                           bk_err *err)
{
    *shm = call->comm;
    if (!*shm || bk_shm_world(*shm) != call->world || bk_shm_rank(*shm) != call->rank)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: call has no shm communicator of rank %d/%d",
                       variant, call->rank, call->world);
    if (bk_shm_bytes(*shm) < need)
        return BK_FAIL(err, BK_ERR_INTERNAL,
                       "%s: peer memory holds %zu bytes, tokens %lld x hidden %lld needs %zu",
                       variant, bk_shm_bytes(*shm), (long long)call->shape->tokens,
                       (long long)call->shape->hidden, need);
    return BK_OK;
}
