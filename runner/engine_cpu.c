/* engine_cpu.c - the cpu backend of the engine: host tensors, POSIX shared-memory peers,
 * monotonic-clock timing. Never presented as a GPU result. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runner/engine.h"

#define BK_CPU_BATCH 256 /* samples per pushed message */

/* Barrier waiters of a lane whose ranks each have a core spin this long before they
 * yield: longer than a scheduler slice (0.75-3 ms on Linux 6.x), for which a busy
 * process beside a peer on its core can deschedule that peer. */
#define BK_CPU_OWN_CORE_SPIN_NS 5000000ull

struct bk_backend_ctx {
    int rank, world;
    int own_core; /* every rank of the lane got a core of its own (pin_to_core) */
    bk_shm *shm;
};

/* Pin lane rank r to the (r mod n)-th core this process may use: every arm's
 * engines then sit on the same cores in the same lane order, so the arms are
 * placed alike and two engines of one lane never share a core while another
 * is free (the scheduler's own placement changed the 2-core timings by 2x).
 * 1 when the lane's `world` ranks each got a core of their own. */
static int pin_to_core(int rank, int world)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return 0;
    int n = CPU_COUNT(&allowed);
    if (n <= 1)
        return 0;
    int want = rank % n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || want-- != 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        /* best effort: unpinned still runs */
        return sched_setaffinity(0, sizeof one, &one) == 0 && world <= n;
    }
    return 0;
}

static bk_status cpu_open(bk_backend_ctx **out, int rank, int world, int device, bk_err *err)
{
    (void)device;
    bk_backend_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return BK_FAIL(err, BK_ERR_SYSTEM, "cpu backend: out of memory");
    c->rank = rank;
    c->world = world;
    c->own_core = pin_to_core(rank, world);
    *out = c;
    return BK_OK;
}

/* The blob: our segment's name, then our node (bk_node_self), each NUL-terminated. */
static bk_status cpu_comm_create(bk_backend_ctx *c, const char *run_id, const char *arm,
                                 size_t peer_bytes, void *blob, size_t *blob_len, bk_err *err)
{
    char name[BK_SHM_NAME_LEN], node[BK_NODE_LEN];
    bk_status st = bk_shm_create(run_id, arm, c->rank, c->world, peer_bytes, &c->shm, name, err);
    if (st != BK_OK)
        return st;
    if (c->own_core)
        bk_shm_set_spin(c->shm, BK_CPU_OWN_CORE_SPIN_NS);
    bk_node_self(node);
    size_t n = strlen(name) + 1, m = strlen(node) + 1;
    memcpy(blob, name, n);
    memcpy((char *)blob + n, node, m);
    *blob_len = n + m;
    return BK_OK;
}

static bk_status cpu_comm_connect(bk_backend_ctx *c, unsigned char (*blobs)[BK_BLOB_MAX],
                                  const size_t *lens, double timeout_s, bk_err *err)
{
    const char **names = calloc((size_t)c->world, sizeof *names);
    char(*nodes)[BK_NODE_LEN] = calloc((size_t)c->world, sizeof *nodes);
    bk_status st = BK_OK;
    if (!names || !nodes) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "cpu backend: out of memory");
        goto out;
    }
    for (int r = 0; r < c->world; r++) {
        const char *b = (const char *)blobs[r];
        size_t n = lens[r] && lens[r] <= BK_BLOB_MAX ? strnlen(b, lens[r]) + 1 : 0;
        if (n < 2 || n > BK_SHM_NAME_LEN || n >= lens[r] || b[lens[r] - 1] != '\0' ||
            lens[r] - n > BK_NODE_LEN || strlen(b + n) + 1 != lens[r] - n) {
            st = BK_FAIL(err, BK_ERR_PEER, "cpu backend: rank %d sent a malformed blob (%zu "
                         "bytes; want a segment name and a node, each NUL-terminated)", r,
                         lens[r]);
            goto out;
        }
        names[r] = b;
        memcpy(nodes[r], b + n, lens[r] - n);
    }
    bk_lane_where_t where;
    bk_lane_where((const char(*)[BK_NODE_LEN])nodes, NULL, c->world, c->rank, &where);
    if (where.other >= 0) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "cpu backend: rank %d is on %s, rank %d on %s; "
                     "its shared memory needs every rank of a lane on one host", c->rank,
                     nodes[c->rank], where.other, nodes[where.other]);
        goto out;
    }
    st = bk_shm_connect(c->shm, names, timeout_s, err);
out:
    free(names);
    free(nodes);
    return st;
}

/* Outputs poisoned with a bf16 NaN pattern (0xFFFF): an unwritten element shows. */
static void poison_outputs(bk_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i].output)
            memset(t[i].data, 0xFF, t[i].elems * t[i].elem_bytes);
}

/* Allocate and fill one shape's tensors; outputs poisoned with a bf16 NaN
 * pattern (0xFFFF) so an unwritten element can never pass a comparison. */
static bk_status make_tensors(const bk_shape_job *job, bk_tensor *t, bk_err *err)
{
    const bk_target *tg = job->target;
    for (int i = 0; i < tg->ntensors; i++) {
        t[i].name = tg->tensor_names[i];
        t[i].output = tg->tensor_is_output[i];
        t[i].elems = tg->tensor_elems(job->shape, job->world, i);
        t[i].elem_bytes = tg->tensor_elem_bytes(i);
        size_t bytes = t[i].elems * t[i].elem_bytes;
        t[i].data = malloc(bytes ? bytes : 1);
        if (!t[i].data)
            return BK_FAIL(err, BK_ERR_SYSTEM, "cpu backend: cannot allocate %zu bytes for %s",
                           bytes, t[i].name);
    }
    poison_outputs(t, tg->ntensors);
    tg->init_inputs(t, job->shape, job->seed, job->shape_index, job->rank, job->world);
    return BK_OK;
}

static void free_tensors(bk_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        free(t[i].data);
        t[i].data = NULL;
    }
}

/* The outputs the last timed call left (poisoned before it) against an untimed call's on
 * the same inputs: bk_engine_check_timed. Every rank of the lane takes part. */
static bk_status check_last(bk_backend_ctx *c, const bk_shape_job *job, bk_tensor *t,
                            bk_call *call, bk_err *err)
{
    bk_status st = BK_OK;
    void *timed[BK_MAX_TENSORS] = { 0 };
    const void *untimed[BK_MAX_TENSORS] = { 0 };
    for (int i = 0; i < job->target->ntensors; i++) {
        size_t bytes = t[i].elems * t[i].elem_bytes;
        if (!t[i].output)
            continue;
        timed[i] = malloc(bytes ? bytes : 1);
        if (!timed[i]) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "cpu backend: cannot allocate %zu bytes", bytes);
            goto out;
        }
        memcpy(timed[i], t[i].data, bytes);
        untimed[i] = t[i].data;
    }
    poison_outputs(t, job->target->ntensors);
    call->iter = -1;
    BK_TRY(bk_shm_barrier(c->shm, job->timeout_s, err));
    BK_TRY(job->variant->run(job->vstate, call, err));
    st = bk_engine_check_timed(job, t, (const void *const *)timed, untimed, err);
out:
    for (int i = 0; i < BK_MAX_TENSORS; i++)
        free(timed[i]);
    return st;
}

static void init_call(bk_backend_ctx *c, const bk_shape_job *job, bk_tensor *t, bk_call *call)
{
    if (c->shm)
        bk_shm_set_end(c->shm, job->end_ns);
    *call = (bk_call){ .shape = job->shape, .shape_index = job->shape_index, .iter = -1,
                       .rank = job->rank, .world = job->world, .t = t,
                       .nt = job->target->ntensors, .comm = c->shm, .stream = NULL,
                       .timeout_s = job->timeout_s };
}

/* Warm-up then timed iterations; each iteration starts after a lane barrier,
 * so the slowest rank's time is the iteration's critical path. Inputs are
 * not rotated on the cpu backend: the working sets of the demo shapes are far
 * larger than the per-core caches would hold across iterations of 4 ranks. */
static bk_status cpu_time_shape(bk_backend_ctx *c, const bk_shape_job *job, bk_err *err)
{
    bk_status st = BK_OK;
    bk_tensor t[BK_MAX_TENSORS];
    memset(t, 0, sizeof t);
    uint64_t batch[BK_CPU_BATCH];
    size_t nb = 0;
    uint64_t first = 0;
    bk_call call;
    BK_TRY(make_tensors(job, t, err));
    init_call(c, job, t, &call);
    for (long it = 0; it < (long)job->warmup + job->iters; it++) {
        int timed = it >= job->warmup;
        call.iter = timed ? it - job->warmup : -1;
        if (it == (long)job->warmup + job->iters - 1) /* the checked call (check_last) */
            poison_outputs(t, job->target->ntensors);
        BK_TRY(bk_shm_barrier(c->shm, job->timeout_s, err));
        if (timed && job->t_first_ns && *job->t_first_ns == 0)
            *job->t_first_ns = bk_now_ns();
        uint64_t t0 = bk_now_ns();
        BK_TRY(job->variant->run(job->vstate, &call, err));
        uint64_t t1 = bk_now_ns();
        if (!timed)
            continue;
        batch[nb++] = t1 - t0;
        /* the very first sample goes alone: the coordinator sees the arm start */
        if (nb == BK_CPU_BATCH || (first == 0 && nb == 1 && job->shape_index == 0)) {
            BK_TRY(job->emit(job->emit_user, (uint32_t)job->shape_index, first, batch, nb, err));
            first += nb;
            nb = 0;
        }
    }
    if (nb)
        BK_TRY(job->emit(job->emit_user, (uint32_t)job->shape_index, first, batch, nb, err));
    BK_TRY(check_last(c, job, t, &call, err));
    /* the next shape's first write must not race with a peer still reading */
    BK_TRY(bk_shm_barrier(c->shm, job->timeout_s, err));
out:
    free_tensors(t, BK_MAX_TENSORS);
    return st;
}

/* The inputs after a call must equal freshly seeded ones, bit for bit. */
static bk_status check_inputs(const bk_shape_job *job, bk_tensor *t, bk_err *err)
{
    bk_status st = BK_OK;
    bk_tensor fresh[BK_MAX_TENSORS];
    memset(fresh, 0, sizeof fresh);
    const void *now[BK_MAX_TENSORS], *seeded[BK_MAX_TENSORS];
    BK_TRY(make_tensors(job, fresh, err));
    for (int i = 0; i < job->target->ntensors; i++) {
        now[i] = t[i].data;
        seeded[i] = fresh[i].data;
    }
    st = bk_engine_check_inputs(job, t, now, seeded, err);
out:
    free_tensors(fresh, BK_MAX_TENSORS);
    return st;
}

static bk_status cpu_audit_shape(bk_backend_ctx *c, const bk_shape_job *job, void **outs,
                                 size_t *bytes, bk_err *err)
{
    bk_status st = BK_OK;
    bk_tensor t[BK_MAX_TENSORS];
    memset(t, 0, sizeof t);
    bk_call call;
    BK_TRY(make_tensors(job, t, err));
    init_call(c, job, t, &call);
    BK_TRY(bk_shm_barrier(c->shm, job->timeout_s, err));
    BK_TRY(job->variant->run(job->vstate, &call, err));
    BK_TRY(bk_shm_barrier(c->shm, job->timeout_s, err));
    if (job->check_inputs)
        BK_TRY(check_inputs(job, t, err));
    int k = 0;
    for (int i = 0; i < job->target->ntensors; i++) {
        if (!t[i].output)
            continue;
        bytes[k] = t[i].elems * t[i].elem_bytes;
        outs[k] = t[i].data; /* ownership passes to the caller */
        t[i].data = NULL;
        k++;
    }
out:
    free_tensors(t, BK_MAX_TENSORS);
    return st;
}

static void cpu_close(bk_backend_ctx *c)
{
    if (!c)
        return;
    bk_shm_destroy(c->shm);
    free(c);
}

static void cpu_describe(const bk_backend_ctx *ctx, char *buf, size_t len)
{
    (void)ctx;
    if (len)
        buf[0] = '\0'; /* the cpu engine has no settings of its own */
}

const bk_engine_backend bk_engine_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .comm_create = cpu_comm_create,
    .comm_connect = cpu_comm_connect,
    .time_shape = cpu_time_shape,
    .audit_shape = cpu_audit_shape,
    .close = cpu_close,
    .describe = cpu_describe,
};
