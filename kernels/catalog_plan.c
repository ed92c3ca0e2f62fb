/* catalog_plan.c - a plan against the target catalog: its target, dtype and variants, each
 * shape inside the domain of the variant that serves it (the candidate's, or the incumbent's
 * where the candidate routes it), and the candidate's routing share. */
#include <stdio.h>
#include <string.h>

#include "kernels/catalog_internal.h"

/* A target takes a dtype when one of its variants' domains lists it. */
static int target_takes_dtype(const char *target, const char *dtype, char *list, size_t len)
{
    int found = 0;
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < bk_catalog_nvariants(); i++) {
        const bk_variant *v = bk_catalog_variant_at(i);
        if (strcmp(v->target, target) != 0 || !v->domain.dtypes)
            continue;
        found |= bk__list_has(v->domain.dtypes, dtype);
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
#ifndef BK_HAVE_CUDA
        if (bk_catalog_cuda_name(plan->target, ref->name))
            return BK_FAIL(err, BK_ERR_INPUT, "%s.variant: '%s' is a cuda variant of target "
                           "'%s', and this bracket was built without its cuda backend (the "
                           "variants it has: %s)", which, ref->name, plan->target, known);
#endif
        return BK_FAIL(err, BK_ERR_INPUT, "%s.variant: no variant '%s' for target '%s' "
                       "(known: %s)", which, ref->name, plan->target, known);
    }
    if (backend != BK_BACKEND_AUTO && !(v->backends & (1u << backend)))
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s.variant: '%s' does not support backend %s",
                       which, v->name, bk__backend_name(backend));
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
    int k = bk__lane_outside(d, sv.world, plan->arena.dtype, backend, inner, sizeof inner);
    if (k == LANE_OK && sv.base != sv.v) {
        d = &sv.base->domain;
        k = bk__lane_outside(d, sv.world, plan->arena.dtype, backend, inner, sizeof inner);
        if (k != LANE_OK && sv.fallback &&
            bk__lane_outside(&sv.fallback->domain, sv.world, plan->arena.dtype, backend, NULL,
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
        bk__worlds_text(d->worlds, dom, sizeof dom);
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
                 bk__backend_name(sv.backend));
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
        bk_catalog_targets_text(buf, sizeof buf);
        return BK_FAIL(err, BK_ERR_INPUT, "target: unknown target '%s' (known: %s)",
                       plan->target, buf);
    }
#ifndef BK_HAVE_CUDA
    if (backend == BK_BACKEND_CUDA)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "backend: cuda, but this bracket was built "
                       "without its cuda backend (no CUDA toolkit and NCCL at build time, or "
                       "-DBK_CUDA=OFF): build it where they are (README), or run a cpu plan");
#endif
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
        snprintf(err->msg, sizeof err->msg, "%.*s: %.*s", bk_utf8_cut(plan->path, 200),
                 plan->path, bk_utf8_cut(msg, 800), msg);
        bk_text_clean(err->msg); /* the path, as BK_FAIL's messages are */
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

size_t bk_catalog_bf16_sum_budget(int n)
{
    const size_t shape = (size_t)1 << 22, plan = (size_t)1 << 24, floor = (size_t)1 << 16;
    if (n <= 4)
        return shape;
    const size_t b = plan / (size_t)n;
    return b < floor ? floor : b;
}

double bk_catalog_bf16_sum_worst(const bk_plan *plan, const bk_variant *const *by, int world,
                                 uint64_t seed, int *at)
{
    return bk__bf16_sum_worst(bk_catalog_target(plan->target), plan, by, world, seed, at);
}

double bk__bf16_sum_worst(const bk_target *t, const bk_plan *plan, const bk_variant *const *by,
                          int world, uint64_t seed, int *at)
{
    double worst = 0.0;
    int n = 0;
    *at = -1;
    if (!t || !t->bf16_sum_excess || world < 2)
        return 0.0;
    for (int i = 0; i < plan->workload.nshapes; i++)
        n += by[i] && by[i]->bf16_sum;
    const size_t budget = bk_catalog_bf16_sum_budget(n);
    for (int i = 0; i < plan->workload.nshapes; i++) {
        if (!by[i] || !by[i]->bf16_sum)
            continue;
        const double e = t->bf16_sum_excess(&plan->workload.shapes[i], seed, i, world,
                                            plan->quality.rtol, plan->quality.atol, budget);
        if (e > worst || *at < 0) {
            worst = e;
            *at = i;
        }
    }
    return worst;
}

double bk_catalog_bf16_sum_note(const bk_plan *plan, bk_backend backend, char *note, size_t len)
{
    const int world = plan->arena.tp * plan->arena.ep;
    const bk_variant *by[BK_MAX_SHAPES] = { NULL };
    int is_inc[BK_MAX_SHAPES] = { 0 }, at = -1;
    char why[256];
    if (len)
        note[0] = '\0';
    for (int i = 0; i < plan->workload.nshapes && i < BK_MAX_SHAPES; i++) {
        const bk_variant *inc = bk_catalog_served_by(plan, &plan->incumbent, i, backend, 1, why,
                                                     sizeof why);
        const bk_variant *cand = bk_catalog_served_by(plan, &plan->candidate, i, backend, 1,
                                                      why, sizeof why);
        if (!cand)
            cand = inc; /* routed to the incumbent: A is the incumbent's call there */
        /* A against T: only one of them summing in bf16 puts that sum's rounding between
         * them (two of the same variant round alike) */
        const int ib = inc && inc->bf16_sum, cb = cand && cand->bf16_sum;
        by[i] = ib && !cb ? inc : cb && !ib ? cand : NULL;
        is_inc[i] = ib && !cb;
    }
    const double worst = bk_catalog_bf16_sum_worst(plan, by, world, plan->workload.seed, &at);
    if (at >= 0 && worst >= 0.75 && len)
        snprintf(note, len, "the %s %s sums the ranks' x in bf16 (a bf16 allreduce); "
                 "replayed on the CPU on a sample of this plan's inputs at %d ranks, its "
                 "residual_out strays from the exact sum by %.2f x the quality tolerance or "
                 "more (rtol %g, atol %g; the worst sampled element in shape %d, %lld x %lld), "
                 "so A against T may fail a %s that is right to one rounding",
                 is_inc[at] ? "incumbent" : "candidate", by[at]->name,
                 world, worst, plan->quality.rtol, plan->quality.atol, at,
                 (long long)plan->workload.shapes[at].tokens,
                 (long long)plan->workload.shapes[at].hidden,
                 is_inc[at] ? "candidate" : "incumbent");
    return worst;
}
