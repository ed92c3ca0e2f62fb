/* diagnostic.c - fault-injection variants (`slowed`, `crash`, `corrupt`) that wrap any real
 * variant of the same target, found in the catalog by name, on any backend the base runs on.
 * They exist to prove that the bracket notices: a slower candidate FAILs, a crash is a
 * NO_DECISION, corrupted outputs FAIL on quality, and so does a candidate that skips its
 * work when timed (lazy) or changes its input (mutate). Never real candidates (diagnostic = 1).
 *
 * Params: base (a real variant's name; default: the backend's incumbent, "shm_twopass"
 * on cpu, none yet on cuda), and one of
 *   slowed : fraction  number in [0, 10], default 0.2   (extra busy wait, x the base's
 *                                                        running median time at this
 *                                                        shape, at most twice its
 *                                                        fastest call there: the
 *                                                        candidate's median is about
 *                                                        (1 + fraction) x the base's,
 *                                                        and a busy box cannot stretch
 *                                                        the wait without bound)
 *            rank      integer >= 0, optional           (only this lane rank is slowed:
 *                                                        a straggler)
 *            On cuda the wait is a kernel on the stream (captured into graphs with
 *            the base), fraction x the median GPU time of the base over its first
 *            BK_DIAG_LEARN uncaptured calls at the shape (the warm-up), timed as
 *            the engine times (graph replay in graph mode).
 *   crash  : at_iter   integer >= 0, default 10         (abort() when call->iter == at_iter)
 *   corrupt: magnitude number > 0, default 1.0          (added to every 7th element of out)
 *   lazy   : (no param)                                 (the base in untimed calls, nothing
 *                                                        in timed ones: the engine's check
 *                                                        of the last timed call must notice)
 *   mutate : element   integer >= 0, default 0          (the base, then the first input's
 *                                                        element `element` set to 3.0: the
 *                                                        audit's input check must notice)
 * The base is created with empty params. Domain: the table entries carry every bf16
 * shape, since the catalog's domains are static, so the engine calls the wrapper for every
 * shape; a call outside the base's own domain is served by the default base (the
 * backend's incumbent), wrapped the same way - the routing the engine would do for the
 * base as a candidate. Without a default base (cuda, for now) such a call fails with the
 * base's error. What a plan's wrapper serves (its base's domain, widened by the default
 * base's where there is one) is bk__diag_bases' answer, which the catalog's plan check and
 * routing share use, so that `plan check` refuses a shape that would fail. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/catalog_internal.h"
#ifdef BK_HAVE_CUDA
#include <cuda_runtime.h>

#include "collectives/cuda_ipc.h"
#include "kernels/cuda_variants.h"
#endif

#define BK_DIAG_LEARN 16 /* slowed on cuda: uncaptured calls timed per shape for its unit */
#define BK_DIAG_AT_ITER 10 /* crash: the default at_iter */

typedef enum { DIAG_SLOWED, DIAG_CRASH, DIAG_CORRUPT, DIAG_LAZY, DIAG_MUTATE } diag_kind;

typedef struct diag_state {
    diag_kind kind;
    const bk_variant *base, *fallback; /* fallback: serves calls outside base's domain */
    void *base_state, *fallback_state;
    double fraction, magnitude;
    long at_iter;
    long long element; /* mutate: the element of the first input it overwrites */
    int rank, only_rank; /* slowed: only_rank >= 0 slows that lane rank alone */
    uint64_t last_base_ns, last_wait_ns;
    bk_diag_unit unit[BK_MAX_SHAPES]; /* slowed: the wait's unit per shape */
    bk_backend backend;
#ifdef BK_HAVE_CUDA
    /* slowed on cuda, per shape: the base's GPU times in its first BK_DIAG_LEARN
     * uncaptured calls (timed as the engine times), whose median is the unit from then on */
    uint64_t gpu_ns[BK_MAX_SHAPES][BK_DIAG_LEARN];
    uint64_t spin_ns[BK_MAX_SHAPES][BK_DIAG_LEARN]; /* what a spin(0) after it added */
    uint64_t spin_cost_ns[BK_MAX_SHAPES];            /* their median */
    int ngpu[BK_MAX_SHAPES];
    cudaEvent_t ev[2];
    int have_ev;
#endif
} diag_state;

static const char *const k_kind_name[] = { "slowed", "crash", "corrupt", "lazy", "mutate" };
static const char *const k_kind_param[] = { "fraction", "at_iter", "magnitude", NULL,
                                             "element" };

/* Default bases: the incumbent of each backend, per target (NULL: none yet, base required). */
#define AR_CPU_BASE "shm_twopass"
#define AR_CUDA_BASE NULL
static const struct {
    const char *target, *cpu_base, *cuda_base;
} k_default_base[] = {
    { BK_AR_TARGET, AR_CPU_BASE, AR_CUDA_BASE },
};

static const char *default_base(const char *target, bk_backend backend)
{
    for (size_t i = 0; i < sizeof k_default_base / sizeof k_default_base[0]; i++)
        if (strcmp(k_default_base[i].target, target) == 0)
            return backend == BK_BACKEND_CPU ? k_default_base[i].cpu_base
                   : backend == BK_BACKEND_CUDA ? k_default_base[i].cuda_base : NULL;
    return NULL;
}

/* ---- params ---- */

static bk_status parse_base(const char *target, const char *dflt, const json_t *v,
                            bk_backend backend, const bk_variant **base, bk_err *err)
{
    const char *name = dflt;
    if (!v && !dflt)
        return BK_FAIL(err, BK_ERR_INPUT, "params.base: required on backend %s (no default "
                       "base there yet)", backend == BK_BACKEND_CUDA ? "cuda" : "auto");
    if (v) {
        if (!json_is_string(v))
            return BK_FAIL(err, BK_ERR_INPUT, "params.base: must be a variant name (a string)");
        name = json_string_value(v);
    }
    *base = bk_catalog_variant(target, name);
    if (!*base)
        return BK_FAIL(err, BK_ERR_INPUT, "params.base: no variant '%s' for target '%s'", name,
                       target);
    if ((*base)->diagnostic)
        return BK_FAIL(err, BK_ERR_INPUT,
                       "params.base: '%s' is a diagnostic variant; the base must be a real one",
                       name);
    if (backend == BK_BACKEND_AUTO || !((*base)->backends & (1u << backend)))
        return BK_FAIL(err, BK_ERR_UNSUPPORTED,
                       "params.base: variant '%s' does not support backend %s", name,
                       backend == BK_BACKEND_CUDA ? "cuda" : backend == BK_BACKEND_CPU ? "cpu"
                                                                                        : "auto");
    return BK_OK;
}

static bk_status parse_kind_param(diag_state *s, const json_t *v, bk_err *err)
{
    char g[72];
    if (!v)
        return BK_OK;
    switch (s->kind) {
    case DIAG_SLOWED:
        if (!json_is_number(v) || !(json_number_value(v) >= 0.0 && json_number_value(v) <= 10.0))
            return BK_FAIL(err, BK_ERR_INPUT, "params.fraction: must be a number in [0, 10], "
                           "got %s", bk_plan_value_text(v, g, sizeof g));
        s->fraction = json_number_value(v);
        break;
    case DIAG_CRASH:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return BK_FAIL(err, BK_ERR_INPUT, "params.at_iter: must be an integer >= 0, got %s",
                           bk_plan_value_text(v, g, sizeof g));
        s->at_iter = (long)json_integer_value(v);
        break;
    case DIAG_CORRUPT:
        if (!json_is_number(v) || !(json_number_value(v) > 0.0) ||
            !isfinite(json_number_value(v)))
            return BK_FAIL(err, BK_ERR_INPUT, "params.magnitude: must be a finite number > 0, "
                           "got %s", bk_plan_value_text(v, g, sizeof g));
        s->magnitude = json_number_value(v);
        break;
    case DIAG_MUTATE:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return BK_FAIL(err, BK_ERR_INPUT, "params.element: must be an integer >= 0, got %s",
                           bk_plan_value_text(v, g, sizeof g));
        s->element = (long long)json_integer_value(v);
        break;
    case DIAG_LAZY:
        break;
    }
    return BK_OK;
}

static void diag_destroy(void *state)
{
    diag_state *s = state;
    if (s && s->base && s->base_state)
        s->base->destroy(s->base_state);
    if (s && s->fallback && s->fallback_state)
        s->fallback->destroy(s->fallback_state);
#ifdef BK_HAVE_CUDA
    if (s && s->have_ev) {
        (void)cudaEventDestroy(s->ev[0]);
        (void)cudaEventDestroy(s->ev[1]);
    }
#endif
    free(s);
}

static bk_status diag_create(const char *target, diag_kind kind, const json_t *params,
                             bk_backend backend, int rank, int world, void **state, bk_err *err)
{
    bk_status st = BK_OK;
    const char *key;
    json_t *val, *empty = NULL;
    diag_state *s = calloc(1, sizeof *s);
    *state = NULL;
    if (!s)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", k_kind_name[kind]);
    s->kind = kind;
    s->fraction = 0.2;
    s->at_iter = BK_DIAG_AT_ITER;
    s->magnitude = 1.0;
    s->rank = rank;
    s->only_rank = -1;
    s->backend = backend;
    json_object_foreach((json_t *)params, key, val) {
        (void)val;
        if (kind == DIAG_SLOWED && !strcmp(key, "rank")) {
            if (!json_is_integer(val) || json_integer_value(val) < 0 ||
                json_integer_value(val) >= world) {
                /* a rank outside the lane would slow nothing: the bracket would test nothing */
                st = BK_FAIL(err, BK_ERR_INPUT, "params.rank: must be a rank of the lane, an "
                             "integer in 0..%d (the lane has %d rank%s)", world - 1, world,
                             world == 1 ? "" : "s");
                goto out;
            }
            s->only_rank = (int)json_integer_value(val);
            continue;
        }
        if (strcmp(key, "base") != 0 &&
            (!k_kind_param[kind] || strcmp(key, k_kind_param[kind]) != 0)) {
            st = BK_FAIL(err, BK_ERR_INPUT, "params.%s: unknown parameter (%s takes base%s%s%s)",
                         key, k_kind_name[kind], k_kind_param[kind] ? ", " : " only",
                         k_kind_param[kind] ? k_kind_param[kind] : "",
                         kind == DIAG_SLOWED ? ", rank" : "");
            goto out;
        }
    }
    const char *dflt = default_base(target, backend);
    BK_TRY(parse_base(target, dflt, json_object_get(params, "base"), backend, &s->base, err));
    if (k_kind_param[kind])
        BK_TRY(parse_kind_param(s, json_object_get(params, k_kind_param[kind]), err));
    if (kind == DIAG_CORRUPT && backend != BK_BACKEND_CPU) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED,
                     "corrupt: outputs outside host memory (backend cuda) are not supported yet");
        goto out;
    }
    empty = json_object();
    if (!empty) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", k_kind_name[kind]);
        goto out;
    }
    BK_TRY(s->base->create(empty, backend, rank, world, &s->base_state, err));
    if (dflt && strcmp(dflt, s->base->name) != 0) {
        s->fallback = bk_catalog_variant(target, dflt);
        if (!s->fallback) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: default base '%s' is not in the catalog",
                         k_kind_name[kind], dflt);
            goto out;
        }
        BK_TRY(s->fallback->create(empty, backend, rank, world, &s->fallback_state, err));
    }
    *state = s;
    s = NULL;
out:
    json_decref(empty);
    diag_destroy(s);
    return st;
}

/* ---- run ---- */

/* The target's first output tensor (`out` for allreduce_residual_rmsnorm). */
static bk_tensor *first_output(const diag_state *s, bk_call *call)
{
    const bk_target *t = bk_catalog_target(s->base->target);
    for (int i = 0; t && i < t->ntensors && i < call->nt; i++)
        if (t->tensor_is_output[i])
            return &call->t[i];
    return NULL;
}

static bk_status corrupt_outputs(const diag_state *s, bk_call *call, bk_err *err)
{
    bk_tensor *t = first_output(s, call);
    if (!t || !t->data)
        return BK_FAIL(err, BK_ERR_INTERNAL, "corrupt: the call has no output tensor");
    for (size_t i = 0; i < t->elems; i += 7) {
        if (t->elem_bytes == 2) {
            uint16_t *p = (uint16_t *)t->data + i;
            *p = bk_bf16_from_f32(bk_bf16_to_f32(*p) + (float)s->magnitude);
        } else if (t->elem_bytes == 4) {
            ((float *)t->data)[i] += (float)s->magnitude;
        } else {
            return BK_FAIL(err, BK_ERR_UNSUPPORTED, "corrupt: %zu-byte elements of '%s'",
                           t->elem_bytes, t->name ? t->name : "?");
        }
    }
    return BK_OK;
}

/* mutate: element `element` (mod its length) of the call's first input becomes the bytes
 * 0x40 0x40 (bf16 3.0): the same value every call, so the timed calls see one input; the
 * audit's input check (--check-inputs) is what must notice. */
static bk_status mutate_input(const diag_state *s, bk_call *call, bk_err *err)
{
    const bk_target *tg = bk_catalog_target(s->base->target);
    bk_tensor *t = NULL;
    for (int i = 0; tg && i < tg->ntensors && i < call->nt && !t; i++)
        if (!tg->tensor_is_output[i])
            t = &call->t[i];
    if (!t || !t->data || !t->elems || t->elem_bytes != 2)
        return BK_FAIL(err, BK_ERR_INTERNAL, "mutate: the call has no bf16 input tensor");
    char *p = (char *)t->data + (size_t)(s->element % (long long)t->elems) * 2;
#ifdef BK_HAVE_CUDA
    if (s->backend == BK_BACKEND_CUDA) {
        cudaError_t e = cudaMemsetAsync(p, 0x40, 2, (cudaStream_t)call->stream);
        return e == cudaSuccess ? BK_OK : BK_FAIL(err, BK_ERR_SYSTEM, "mutate: %s",
                                                  cudaGetErrorString(e));
    }
#endif
    memset(p, 0x40, 2);
    return BK_OK;
}

double bk__diag_unit_step(bk_diag_unit *u, uint64_t base_ns)
{
    const double b = (double)base_ns, m = u->median_ns;
    if (!u->fastest_ns || base_ns < u->fastest_ns)
        u->fastest_ns = base_ns;
    u->median_ns = m <= 0 ? b : b > m ? m + m / 32 : b < m ? m - m / 32 : m;
    return fmin(u->median_ns, 2.0 * (double)u->fastest_ns);
}

#ifdef BK_HAVE_CUDA
static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The GPU time between ev[0] and ev[1] recorded on the call's stream, in ns, waited for
 * with the lane's bound: the base's call may wait for a peer (an NCCL allreduce never
 * ends when one is gone) */
static bk_status elapsed_ns(cudaEvent_t *ev, const bk_call *call, uint64_t *ns, bk_err *err)
{
    float ms = 0;
    if (cudaEventRecord(ev[1], (cudaStream_t)call->stream) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaEventRecord failed");
    if (call->comm) {
        bk_status st = bk_cuda_comm_wait((bk_cuda_comm *)call->comm, ev[1],
                                         3 * bk__call_timeout(call) + 1, err);
        if (st != BK_OK)
            return bk__relay_at(err, st, __FILE__, __LINE__);
    } else if (cudaEventSynchronize(ev[1]) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): waiting for the base failed");
    if (cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): timing the base with events failed");
    *ns = (uint64_t)((double)ms * 1e6);
    return BK_OK;
}

/* One timed run of the base's call, followed by a zero-length spin kernel when `spin`, the
 * way the engine times: eagerly between ev[0] and ev[1]; or (call->graph) captured, replayed
 * once to settle, then a second replay between the events. Every rank of the lane runs the
 * same learning calls, so the extra collective calls stay matched. */
static bk_status time_base(const bk_variant *v, void *vs, bk_call *call, cudaEvent_t *ev,
                           int spin, uint64_t *ns, bk_err *err)
{
    bk_status st = BK_OK, run_st;
    const cudaStream_t stream = (cudaStream_t)call->stream;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    int deferred = 0;
    if (!call->graph) {
        if (cudaEventRecord(ev[0], stream) != cudaSuccess)
            return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaEventRecord failed");
        BK_TRY(v->run(vs, call, err));
        if (spin)
            BK_TRY(bk_cuda_spin_ns(0, call->stream, err));
        return elapsed_ns(ev, call, ns, err);
    }
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaStreamBeginCapture failed");
    /* the graph may hold the base's NCCL calls: no abort of NCCL until it is destroyed */
    bk_cuda_comm_defer_abort((bk_cuda_comm *)call->comm, 1);
    deferred = 1;
    run_st = v->run(vs, call, err);
    if (run_st == BK_OK && spin)
        run_st = bk_cuda_spin_ns(0, call->stream, err);
    const cudaError_t e = cudaStreamEndCapture(stream, &g);
    if (run_st != BK_OK) {
        st = bk__relay_at(err, run_st, __FILE__, __LINE__);
        goto out;
    }
    if (e != cudaSuccess || cudaGraphInstantiate(&ex, g, 0) != cudaSuccess ||
        cudaGraphLaunch(ex, stream) != cudaSuccess || cudaEventRecord(ev[0], stream) != cudaSuccess ||
        cudaGraphLaunch(ex, stream) != cudaSuccess) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): timing the base as a graph: %s",
                     cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    st = elapsed_ns(ev, call, ns, err);
out:
    if (ex)
        (void)cudaGraphExecDestroy(ex);
    if (g)
        (void)cudaGraphDestroy(g);
    if (deferred)
        bk_cuda_comm_defer_abort((bk_cuda_comm *)call->comm, 0);
    return st;
}

static uint64_t median_u64(const uint64_t *v, int n)
{
    uint64_t w[BK_DIAG_LEARN];
    memcpy(w, v, (size_t)n * sizeof *w);
    qsort(w, (size_t)n, sizeof *w, cmp_u64);
    return w[(n - 1) / 2];
}

/* `slowed` on cuda. The base's kernels are asynchronous (its call returns at launch) and
 * in graph mode the call is only captured, so a host-side wait would be timed in neither:
 * the wait is a spin kernel on the stream after the base (bk_cuda_spin_ns), captured with
 * it. Its unit is the median GPU time of the base in its first BK_DIAG_LEARN uncaptured
 * calls at the shape (the warm-up; only those stall the host), timed the way the engine
 * times (call->graph: a replay of the call captured; else the eager call between events),
 * fixed from then on: an eager nccl_then_rmsnorm took twice its graph's time on the H200.
 * What a zero-length spin kernel adds after the base (its launch on the stream, about 1 us
 * there) is timed alike and comes off the wait. */
static bk_status slowed_cuda(diag_state *s, const bk_variant *v, void *vs, bk_call *call,
                             bk_err *err)
{
    bk_status st = BK_OK;
    const int si = call->shape_index;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (si < 0 || si >= BK_MAX_SHAPES)
        return BK_FAIL(err, BK_ERR_INTERNAL, "slowed (cuda): call without a shape index (%d)",
                       si);
    if (cudaStreamIsCapturing((cudaStream_t)call->stream, &cs) != cudaSuccess)
        return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaStreamIsCapturing failed");
    const int learn = cs == cudaStreamCaptureStatusNone && s->ngpu[si] < BK_DIAG_LEARN;
    if (learn && !s->have_ev) {
        if (cudaEventCreate(&s->ev[0]) != cudaSuccess)
            return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaEventCreate failed");
        if (cudaEventCreate(&s->ev[1]) != cudaSuccess) {
            (void)cudaEventDestroy(s->ev[0]);
            return BK_FAIL(err, BK_ERR_SYSTEM, "slowed (cuda): cudaEventCreate failed");
        }
        s->have_ev = 1;
    }
    BK_TRY(v->run(vs, call, err));
    if (learn) {
        uint64_t with_spin = 0;
        BK_TRY(time_base(v, vs, call, s->ev, 0, &s->last_base_ns, err));
        BK_TRY(time_base(v, vs, call, s->ev, 1, &with_spin, err));
        s->gpu_ns[si][s->ngpu[si]] = s->last_base_ns;
        s->spin_ns[si][s->ngpu[si]++] = with_spin > s->last_base_ns ? with_spin - s->last_base_ns
                                                                    : 0;
        s->unit[si].median_ns = (double)median_u64(s->gpu_ns[si], s->ngpu[si]);
        s->spin_cost_ns[si] = median_u64(s->spin_ns[si], s->ngpu[si]);
    } else {
        s->last_base_ns = 0; /* not timed: the stream runs on */
    }
    if (s->ngpu[si] == 0)
        return BK_FAIL(err, BK_ERR_INPUT, "slowed (cuda): its wait is the base's GPU time, "
                       "learnt from its first uncaptured calls at the shape (the warm-up), "
                       "and this shape's first call was captured into a graph "
                       "(workload.warmup_iters must be at least 1)");
    /* the spin kernel's own cost on the stream comes off its wait: the call takes about
     * (1 + fraction) x the base, and at least the base plus one kernel */
    const double want = s->fraction * s->unit[si].median_ns - (double)s->spin_cost_ns[si];
    s->last_wait_ns = want > 0 ? (uint64_t)want : 0;
    if (s->fraction > 0 && !(s->only_rank >= 0 && s->only_rank != s->rank))
        BK_TRY(bk_cuda_spin_ns(s->last_wait_ns, call->stream, err));
    else
        s->last_wait_ns = 0;
out:
    return st;
}
#endif

static bk_status diag_run(void *state, bk_call *call, bk_err *err)
{
    bk_status st = BK_OK;
    diag_state *s = state;
    const bk_variant *v = s->base;
    void *vs = s->base_state;
    if (s->fallback && !bk_domain_contains(&v->domain, call->shape, call->world, NULL,
                                           BK_BACKEND_AUTO, 1, NULL, 0)) {
        v = s->fallback;
        vs = s->fallback_state;
    }
#ifdef BK_HAVE_CUDA
    if (s->kind == DIAG_SLOWED && s->backend == BK_BACKEND_CUDA)
        return slowed_cuda(s, v, vs, call, err);
#endif
    if (s->kind == DIAG_LAZY && call->iter >= 0)
        return BK_OK; /* a timed call: nothing done */
    uint64_t t0 = bk_now_ns();
    BK_TRY(v->run(vs, call, err));
    uint64_t t1 = bk_now_ns();
    switch (s->kind) {
    case DIAG_SLOWED:
        /* a busy wait: the delay must count as the call's time on any clock. Its unit
         * is the base's running median at this shape, at most twice the fastest call
         * there (bk__diag_unit_step). Not this call's own time: a call the scheduler
         * preempted (a busy box) would stretch the wait by fraction x the preemption,
         * and a 10x candidate's arm ran for minutes. Not the fastest call alone (the
         * twelfth session): that sits below the median the scorer compares (fraction 10
         * gave 8.4-9.2x, not 11x). The bound: beside busy processes most calls include
         * waiting on a peer rank's wait, which fed back into an unbounded median (one
         * arm at 630x). */
        s->last_base_ns = t1 - t0;
        double unit = (double)s->last_base_ns;
        if (call->shape_index >= 0 && call->shape_index < BK_MAX_SHAPES)
            unit = bk__diag_unit_step(&s->unit[call->shape_index], s->last_base_ns);
        s->last_wait_ns = s->only_rank >= 0 && s->only_rank != s->rank
                              ? 0 : (uint64_t)(s->fraction * unit);
        while (bk_now_ns() - t1 < s->last_wait_ns) {
        }
        break;
    case DIAG_CRASH:
        if (call->iter == s->at_iter)
            abort();
        break;
    case DIAG_CORRUPT:
        BK_TRY(corrupt_outputs(s, call, err));
        break;
    case DIAG_MUTATE:
        BK_TRY(mutate_input(s, call, err));
        break;
    case DIAG_LAZY:
        break;
    }
out:
    return st;
}

void bk__diag_last_times(const void *state, uint64_t *base_ns, uint64_t *wait_ns)
{
    const diag_state *s = state;
    *base_ns = s->last_base_ns;
    *wait_ns = s->last_wait_ns;
}

/* ---- what a plan's wrapper serves ---- */

/* The kind of a diagnostic variant, or -1 for a real one. */
static int kind_of(const bk_variant *v)
{
    for (int k = 0; v && v->diagnostic && k < (int)(sizeof k_kind_name / sizeof *k_kind_name);
         k++)
        if (strcmp(v->name, k_kind_name[k]) == 0)
            return k;
    return -1;
}

int bk__diag_bases(const bk_variant *v, const json_t *params, bk_backend backend,
                   const bk_variant **base, const bk_variant **fallback, const char **dflt)
{
    bk_err err = { 0 };
    *base = *fallback = NULL;
    *dflt = NULL;
    if (kind_of(v) < 0)
        return 0;
    const char *d = default_base(v->target, backend);
    if (parse_base(v->target, d, params ? json_object_get(params, "base") : NULL, backend, base,
                   &err) != BK_OK) {
        *base = NULL;
        return 0;
    }
    if (d && strcmp(d, (*base)->name) != 0)
        *fallback = bk_catalog_variant(v->target, d);
    *dflt = d;
    return 1;
}

int bk__diag_crash_at(const bk_variant *v, const json_t *params, long long *at_iter)
{
    const json_t *at = params ? json_object_get(params, "at_iter") : NULL;
    if (kind_of(v) != DIAG_CRASH)
        return 0;
    if (!at) {
        *at_iter = BK_DIAG_AT_ITER;
        return 2;
    }
    *at_iter = json_is_integer(at) ? (long long)json_integer_value(at) : -1;
    return 1;
}

/* ---- tables: one block per target (create needs to know its target) ---- */

#define BK__DIAG_CREATE(tag, target, kind)                                                    \
    static bk_status tag(const json_t *p, bk_backend b, int r, int w, void **st, bk_err *e)   \
    {                                                                                         \
        return diag_create(target, kind, p, b, r, w, st, e);                                  \
    }
#define BK__DIAG_ENTRY(vname, tgt, create_fn, text, bks)                                      \
    { .name = vname, .target = tgt, .backends = bks, .diagnostic = 1, .summary = text,          \
      .domain = { .backends = bks, .dtypes = "bf16", .min_tokens = 1, .min_hidden = 1 },        \
      .create = create_fn, .run = diag_run, .destroy = diag_destroy }

BK__DIAG_CREATE(ar_slowed_create, BK_AR_TARGET, DIAG_SLOWED)
BK__DIAG_CREATE(ar_crash_create, BK_AR_TARGET, DIAG_CRASH)
BK__DIAG_CREATE(ar_corrupt_create, BK_AR_TARGET, DIAG_CORRUPT)
BK__DIAG_CREATE(ar_lazy_create, BK_AR_TARGET, DIAG_LAZY)
BK__DIAG_CREATE(ar_mutate_create, BK_AR_TARGET, DIAG_MUTATE)

const bk_variant bk__ar_rmsnorm_diag_variants[] = {
    BK__DIAG_ENTRY("slowed", BK_AR_TARGET, ar_slowed_create,
                   "DIAGNOSTIC: the base variant plus a wait of fraction x its typical time "
                   "(params: base, fraction 0..10 default 0.2, rank)", BK_BK_CPU | BK_BK_CUDA),
    BK__DIAG_ENTRY("crash", BK_AR_TARGET, ar_crash_create,
                   "DIAGNOSTIC: the base variant, then abort() at timed iteration at_iter "
                   "(params: base, at_iter default 10)", BK_BK_CPU | BK_BK_CUDA),
    BK__DIAG_ENTRY("corrupt", BK_AR_TARGET, ar_corrupt_create,
                   "DIAGNOSTIC: the base variant, then magnitude added to every 7th element "
                   "of out, cpu only (params: base, magnitude default 1.0)",
                   BK_BK_CPU), /* outputs in host memory only, so far */
    BK__DIAG_ENTRY("lazy", BK_AR_TARGET, ar_lazy_create,
                   "DIAGNOSTIC: the base variant in untimed calls, nothing in timed ones (a "
                   "candidate that skips its work when timed; params: base)",
                   BK_BK_CPU | BK_BK_CUDA),
    BK__DIAG_ENTRY("mutate", BK_AR_TARGET, ar_mutate_create,
                   "DIAGNOSTIC: the base variant, then its first input's element `element` "
                   "set to 3.0 (a candidate that changes its input; params: base, element "
                   "default 0)", BK_BK_CPU | BK_BK_CUDA),
    { .name = NULL },
};
