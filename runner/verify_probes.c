/* verify_probes.c - the shapes `bracket verify` checks: the plan's, then probes across the
 * candidate's domain (token and hidden edges, one past each), with a note for each left out.
 * A diagnostic candidate's domain is what it serves: its base's, widened by its default base. */
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/catalog.h"
#include "runner/verify_probes.h"

#define PROBE_BYTES (1ull << 30) /* a probe's tensors over the whole lane, at most */

static void note(bk__verify_probes *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(bk__verify_probes *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = c->used < sizeof c->notes ? vsnprintf(c->notes + c->used, sizeof c->notes - c->used,
                                                  fmt, ap) : 0;
    va_end(ap);
    c->used += k > 0 ? (size_t)k : 0;
}

/* 1 when `shapes` holds s (equal in tokens, hidden and the MoE fields; absent reads 0). */
static int has_shape(json_t *shapes, const bk_shape *s)
{
    size_t i;
    json_t *j;
    json_array_foreach(shapes, i, j)
    {
        if (json_integer_value(json_object_get(j, "tokens")) == s->tokens &&
            json_integer_value(json_object_get(j, "hidden")) == s->hidden &&
            json_integer_value(json_object_get(j, "experts")) == s->experts &&
            json_integer_value(json_object_get(j, "topk")) == s->topk &&
            json_integer_value(json_object_get(j, "intermediate")) == s->intermediate)
            return 1;
    }
    return 0;
}

static void add_shape(json_t *shapes, const bk_shape *s)
{
    json_t *j = json_pack("{s:I, s:I, s:f}", "tokens", (json_int_t)s->tokens, "hidden",
                          (json_int_t)s->hidden, "weight", 1.0);
    if (s->experts)
        json_object_set_new(j, "experts", json_integer(s->experts));
    if (s->topk)
        json_object_set_new(j, "topk", json_integer(s->topk));
    if (s->intermediate)
        json_object_set_new(j, "intermediate", json_integer(s->intermediate));
    json_array_append_new(shapes, j);
}

/* Bytes of every tensor of s on every rank of the lane (all its engines run on this host). */
static uint64_t lane_bytes(const bk_target *tg, const bk_shape *s, int world)
{
    uint64_t b = 0;
    for (int t = 0; t < tg->ntensors; t++)
        b += (uint64_t)tg->tensor_elems(s, world, t) * tg->tensor_elem_bytes(t);
    return b * (uint64_t)world;
}

/* 1 when the engine would call the diagnostic wrapper c->v for s (its table domain takes
 * s) but neither its base nor a default base serves s: the call would fail with the base's
 * error (`why`: the base's bound). Never for a real variant, nor where a default base takes
 * what the base does not (it serves s wrapped the same way). */
static int wrapper_fails(const bk__verify_probes *c, const bk_shape *s, char *why, size_t len)
{
    if (!c->base ||
        !bk_domain_contains(&c->v->domain, s, c->world, c->dtype, c->backend, 1, NULL, 0) ||
        bk_domain_contains(&c->base->domain, s, c->world, c->dtype, c->backend, 1, why, len))
        return 0;
    return !c->fallback || !bk_domain_contains(&c->fallback->domain, s, c->world, c->dtype,
                                               c->backend, 1, NULL, 0);
}

/* 1, with a note, when s would go to an incumbent that cannot run on this lane. */
static int routed_blocked(bk__verify_probes *c, const bk_shape *s, const char *what)
{
    if (!c->inc_blocked ||
        bk_domain_contains(&c->v->domain, s, c->world, c->dtype, c->backend, 1, NULL, 0))
        return 0;
    note(c, "%s tokens %lld, hidden %lld left out: outside the candidate's domain, so it would "
         "go to the incumbent %s, which %s\n", what, (long long)s->tokens,
         (long long)s->hidden, c->inc->name, c->inc_blocked);
    return 1;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The domain whose edges the probes take: c->v's; a diagnostic's (whose table domain takes
 * every shape) its base's, widened by its default base where it has one: the lower of the
 * lower edges, the higher of the upper ones (0: none), the step both hiddens share. */
static bk_domain probe_domain(const bk__verify_probes *c)
{
    if (!c->base)
        return c->v->domain;
    bk_domain d = c->base->domain;
    const bk_domain *f = c->fallback ? &c->fallback->domain : NULL;
    if (!f)
        return d;
    d.backends |= f->backends;
    d.worlds = d.worlds && f->worlds ? d.worlds | f->worlds : 0;
    d.min_tokens = d.min_tokens < f->min_tokens ? d.min_tokens : f->min_tokens;
    d.max_tokens = d.max_tokens && f->max_tokens
                   ? (d.max_tokens > f->max_tokens ? d.max_tokens : f->max_tokens) : 0;
    d.min_hidden = d.min_hidden < f->min_hidden ? d.min_hidden : f->min_hidden;
    d.max_hidden = d.max_hidden && f->max_hidden
                   ? (d.max_hidden > f->max_hidden ? d.max_hidden : f->max_hidden) : 0;
    d.hidden_multiple = gcd64(d.hidden_multiple > 1 ? d.hidden_multiple : 1,
                              f->hidden_multiple > 1 ? f->hidden_multiple : 1);
    d.needs_p2p = d.needs_p2p && f->needs_p2p;
    return d;
}

/* Add the probe (tokens, hidden) with the MoE fields of c->like. Left out, with a note: a
 * shape the target refuses, one outside the incumbent's domain as well as the candidate's
 * (nobody could serve it), one a diagnostic candidate would be called for and could not
 * serve (wrapper_fails), one past PROBE_BYTES; a token probe that is too big is first
 * tried at `small` (the domain's smallest hidden), which still probes its token edge. */
static void probe(bk__verify_probes *c, int64_t tokens, int64_t hidden, int64_t small)
{
    bk_shape s = c->like;
    char why[256];
    s.tokens = tokens;
    s.hidden = hidden;
    s.weight = 1.0;
    if (tokens < 1 || hidden < 1 || has_shape(c->shapes, &s))
        return;
    if (c->tg->check_shape(&s, c->world, why, sizeof why) != BK_OK) {
        note(c, "probe tokens %lld, hidden %lld left out: %s\n", (long long)tokens,
             (long long)hidden, why);
        return;
    }
    if (!bk_domain_contains(&c->v->domain, &s, c->world, c->dtype, c->backend, 1, NULL, 0) &&
        !bk_domain_contains(&c->inc->domain, &s, c->world, c->dtype, c->backend, 1, why,
                            sizeof why)) {
        note(c, "probe tokens %lld, hidden %lld left out: outside the incumbent %s's domain "
             "too (%s)\n", (long long)tokens, (long long)hidden, c->inc->name, why);
        return;
    }
    if (routed_blocked(c, &s, "probe"))
        return;
    if (wrapper_fails(c, &s, why, sizeof why)) {
        note(c, "probe tokens %lld, hidden %lld left out: outside the domain of "
             "candidate.params.base %s (%s), and %s has no default base on %s to call there "
             "instead, so its call would fail\n", (long long)tokens, (long long)hidden,
             c->base->name, why, c->v->name, bk_backend_name(c->backend));
        return;
    }
    uint64_t b = lane_bytes(c->tg, &s, c->world);
    if (b > PROBE_BYTES) {
        int retry = small > 0 && small < hidden;
        char instead[96] = "left out";
        if (retry)
            snprintf(instead, sizeof instead, "runs at hidden %lld (the domain's smallest) "
                     "instead", (long long)small);
        note(c, "probe tokens %lld, hidden %lld %s: its tensors would take %.1f MiB over the "
             "lane of %d, more than the %llu MiB a probe may take\n", (long long)tokens,
             (long long)hidden, instead, (double)b / (1 << 20), c->world, PROBE_BYTES >> 20);
        if (retry)
            probe(c, tokens, small, 0);
        return;
    }
    if (json_array_size(c->shapes) >= BK_MAX_SHAPES) {
        note(c, "probe tokens %lld, hidden %lld left out: a plan holds %d shapes at most\n",
             (long long)tokens, (long long)hidden, BK_MAX_SHAPES);
        return;
    }
    add_shape(c->shapes, &s);
}

/* The plan's shapes, then (domain_shapes) probes of the candidate's domain (probe_domain):
 * tokens 1, 7, 64, the token edges and one past each; the smallest and largest hidden, one
 * past each and one not a multiple of the domain's; all at a hidden the candidate serves
 * (the first workload shape it serves, else the domain's smallest), so one shape outside
 * the domain does not send every probe to the incumbent. A JSON array (caller frees); notes
 * in c. */
char *bk__verify_shapes_json(const bk_plan *p, bk__verify_probes *c, int domain_shapes)
{
    const bk_domain dom = probe_domain(c), *d = &dom;
    c->shapes = json_array();
    for (int i = 0; i < p->workload.nshapes; i++)
        if (!has_shape(c->shapes, &p->workload.shapes[i]) &&
            !routed_blocked(c, &p->workload.shapes[i], "shape"))
            add_shape(c->shapes, &p->workload.shapes[i]);
    if (domain_shapes) {
        int64_t step = d->hidden_multiple > 1 ? d->hidden_multiple : 1;
        int64_t lo = d->min_tokens > 0 ? d->min_tokens : 1;
        int64_t hmin = (d->min_hidden > 0 ? d->min_hidden : 1) + step - 1;
        hmin -= hmin % step;
        int64_t hmax = d->max_hidden / step * step; /* 0: no upper edge */
        c->like = p->workload.shapes[0];
        c->like.hidden = hmin;
        for (int i = 0; i < p->workload.nshapes; i++)
            if (bk_domain_contains(d, &p->workload.shapes[i], c->world, c->dtype, c->backend,
                                   1, NULL, 0)) {
                c->like = p->workload.shapes[i];
                break;
            }
        const int64_t tokens[] = { lo - 1, lo, 1, 7, 64, d->max_tokens,
                                   d->max_tokens ? d->max_tokens + 1 : 0 };
        /* one below the smallest hidden: a step below, or where that is no size (8 - 8)
         * one below (7); below 1 there is no edge to probe */
        const int64_t below = hmin - step >= 1 ? hmin - step : hmin - 1;
        const int64_t hidden[] = { below, hmin, step > 1 ? hmin + step / 2 : 0, hmax,
                                   hmax ? hmax + step : 0 };
        for (size_t k = 0; k < sizeof tokens / sizeof tokens[0]; k++)
            probe(c, tokens[k], c->like.hidden, hmin);
        for (size_t k = 0; k < sizeof hidden / sizeof hidden[0]; k++)
            probe(c, lo, hidden[k], 0);
    }
    char *text = json_dumps(c->shapes, JSON_COMPACT);
    json_decref(c->shapes);
    c->shapes = NULL;
    return text;
}

int bk__verify_default_world(const bk_variant *v)
{
    uint32_t w = v ? v->domain.worlds : 0;
    if (!w || (w & (1u << 2)))
        return 2;
    for (int k = 1; k < 32; k++)
        if (w & (1u << k))
            return k;
    return 2; /* a mask of bit 0 alone takes no lane: the domain check says so */
}

char *bk__verify_target_plan(const bk_target *tg, const char *variant, bk_backend backend,
                             int world)
{
    static const char zeros[] =
        "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    const char *inc = tg->incumbent[backend == BK_BACKEND_CUDA ? BK_BACKEND_CUDA
                                                                : BK_BACKEND_CPU];
    char name[128];
    if (!inc)
        return NULL;
    snprintf(name, sizeof name, "verify-%s", variant);
    for (char *q = name; *q; q++) /* the plan's name rule */
        if (!bk_plan_name_char(*q))
            *q = '_';
    json_t *shapes = json_array();
    if (shapes)
        add_shape(shapes, &tg->example);
    json_t *plan = json_pack(
        "{s:s, s:s, s:{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:i, s:s}, s:s, s:{s:s}, "
        "s:{s:s, s:s}, s:{s:s, s:o, s:i, s:i}, s:{s:f, s:f}, s:s}",
        "schema", "bracket.plan/1", "name", name,
        "arena", "stack_digest", zeros, "incumbent_generation", 0, "model", "none",
        "substrate", "none", "target_catalog", BK_CATALOG_SCHEMA, "architecture", "any",
        "tp", world, "ep", 1, "dtype", "bf16",
        "target", tg->name,
        "incumbent", "variant", inc,
        "candidate", "variant", variant, "source_digest", zeros,
        "workload", "phase", "decode", "shapes", shapes, "warmup_iters", 0, "iters", 1,
        "quality", "rtol", 1e-2, "atol", 1e-2, "backend", bk_backend_name(backend));
    char *text = plan ? json_dumps(plan, JSON_COMPACT) : NULL;
    json_decref(plan);
    return text;
}
