/* catalog.c - the target catalog: the tables of targets and variants, lookups and capability
 * domains (plan checks against the catalog and the routing share: catalog_plan.c).
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

/* The cuda variants by name, in every build: a build without the cuda backend says that a
 * plan's variant is one of them rather than unknown (test_catalog holds this list to the
 * catalog in a cuda build). */
static const struct {
    const char *target, *name;
} k_cuda_names[] = {
    { "collective.allreduce_residual_rmsnorm", "nccl_then_rmsnorm" },
    { "collective.allreduce_residual_rmsnorm", "ipc_oneshot_fused" },
    { "collective.allreduce_residual_rmsnorm", "ipc_twoshot_fused" },
    { "moe.fused_experts_reduce", "moe_serial_cuda" },
    { "moe.fused_experts_reduce", "moe_fused_combine_cuda" },
    { "moe.fused_experts_reduce", "moe_chunked_overlap_cuda" },
};

int bk_catalog_cuda_name(const char *target, const char *name)
{
    for (size_t i = 0; target && name && i < sizeof k_cuda_names / sizeof k_cuda_names[0]; i++)
        if (!strcmp(k_cuda_names[i].target, target) && !strcmp(k_cuda_names[i].name, name))
            return 1;
    return 0;
}

int bk_catalog_ncuda_names(void) { return (int)(sizeof k_cuda_names / sizeof k_cuda_names[0]); }

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

const char *bk__backend_name(bk_backend b)
{
    return b == BK_BACKEND_CPU ? "cpu" : b == BK_BACKEND_CUDA ? "cuda" : "auto";
}

int bk__list_has(const char *list, const char *dtype)
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

void bk__worlds_text(uint32_t mask, char *buf, size_t len)
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

void bk_catalog_targets_text(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < bk_catalog_ntargets(); i++)
        append(buf, len, &used, "%s%s", i ? ", " : "", bk_catalog_target_at(i)->name);
}

void bk_target_incumbents_text(const bk_target *t, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int b = BK_BACKEND_CPU; b <= BK_BACKEND_CUDA; b++)
        if (t->incumbent[b] && bk_catalog_variant(t->name, t->incumbent[b]))
            append(buf, len, &used, "%s%s (%s)", used ? ", " : "", t->incumbent[b],
                   bk_backend_name((bk_backend)b));
    if (!used)
        append(buf, len, &used, "none in this build");
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
        bk__worlds_text(d->worlds, ws, sizeof ws);
        append(buf, len, &used, "; worlds %s", ws);
    }
    if (d->needs_p2p)
        append(buf, len, &used, "; peer access");
}

/* (catalog_internal.h) */
int bk__lane_outside(const bk_domain *d, int world, const char *dtype, bk_backend backend,
                        char *why, size_t why_len)
{
    char ws[96];
    if (backend != BK_BACKEND_AUTO && !(d->backends & (1u << backend))) {
        snprintf(why, why_len, "backend %s not supported", bk__backend_name(backend));
        return LANE_BACKEND;
    }
    if (dtype && d->dtypes && !bk__list_has(d->dtypes, dtype)) {
        snprintf(why, why_len, "dtype %s not in {%s}", dtype, d->dtypes);
        return LANE_DTYPE;
    }
    if (d->worlds && (world < 0 || world > 31 || !(d->worlds & (1u << world)))) {
        bk__worlds_text(d->worlds, ws, sizeof ws);
        snprintf(why, why_len, "world %d not in {%s}", world, ws);
        return LANE_WORLD;
    }
    return LANE_OK;
}

int bk_domain_contains(const bk_domain *d, const bk_shape *s, int world, const char *dtype,
                       bk_backend backend, int have_p2p, char *why, size_t why_len)
{
    if (bk__lane_outside(d, world, dtype, backend, why, why_len) != LANE_OK)
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
                   bk__backend_name(on[k]), dflt[k] ? dflt[k] : "");
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
