/* engine.c - `bracket engine`: one arm on one lane rank, started by an agent, never MPI.
 * Rendezvous, peer memory, per-shape work with routing, samples and a final status pushed
 * to the coordinator over ZeroMQ, then exit. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "runner/cli.h"
#include "runner/engine.h"
#include "runner/transport.h"
#include "runner/wire.h"

typedef struct engine {
    bk_engine_args a;
    bk_plan plan;
    const bk_target *target;
    const bk_variant *v_arm;   /* the arm's variant */
    const bk_variant *v_inc;   /* the incumbent, serving calls outside v_arm's domain */
    void *s_arm, *s_inc;
    const bk_engine_backend *be;
    bk_backend_ctx *ctx;
    void *zctx, *push;
    bk_curve_keys keys;        /* when a.keys_file: the tcp transport's CURVE keys */
    bk_wire_buf buf;
    bk_wire_hdr hdr;
    uint64_t sent_samples;
    /* tcp only (a connection that can break and be made again): the push socket's
     * disconnect events, and every sample sent, per shape (UINT64_MAX: none yet), or in an
     * audit every tensor message sent, to send again at the end when a connection broke
     * (resend_after_drops) */
    void *mon;
    uint64_t *kept[BK_MAX_SHAPES];
    bk_wire_buf kept_tensors[BK_MAX_SHAPES * BK_MAX_TENSORS];
    int nkept_tensors;
    uint64_t kept_tensor_bytes;
    int unsent; /* tcp: a kept message found no connection ready during the work (below) */
    uint64_t t_start_ns, t_first_ns;
    char settings[sizeof ((bk_msg *)0)->settings]; /* the backend's, at the end ("" if none) */
    uint64_t routed; /* bit i: shape i served by the incumbent (outside the arm's domain) */
} engine;

/* One message to rank 0 (zmq_send with `flags`, again on EINTR); *again set when it was not
 * taken (EAGAIN: no connection ready, or the queue full, within the send's bound). */
static bk_status send_once(engine *e, const void *data, size_t size, int flags, int *again,
                           bk_err *err)
{
    *again = 0;
    for (;;) {
        if (zmq_send(e->push, data, size, flags) >= 0)
            return BK_OK;
        if (zmq_errno() == EAGAIN) {
            *again = 1;
            return BK_OK;
        }
        if (zmq_errno() != EINTR)
            return BK_FAIL(err, BK_ERR_SYSTEM, "engine: push to %s: %s", e->a.samples,
                           zmq_strerror(zmq_errno()));
    }
}

static bk_status push_bytes(engine *e, const void *data, size_t size, bk_err *err)
{
    int again;
    bk_status st = send_once(e, data, size, 0, &again, err);
    if (st == BK_OK && again)
        st = BK_FAIL(err, BK_ERR_TIMEOUT, "engine: the coordinator at %s took nothing for 60 s "
                     "(gone, refusing this engine's key, or stopped with %d messages queued)",
                     e->a.samples, BK_PUSH_HWM);
    return st;
}

static bk_status push_msg(engine *e, bk_err *err)
{
    return push_bytes(e, e->buf.data, e->buf.size, err);
}

/* tcp, during the arm's work: a message kept to send again (kept) is sent without waiting.
 * While the connection to rank 0 is being made again (broken, its CURVE handshake not yet
 * done) a send would wait for it, up to 60 s, and this rank's lane peers, waiting for it at
 * their next barrier, gave up first (rendezvous_s), failing the arm for a link that had only
 * to be remade. Not taken now, the message is left to the resending before the status
 * (resend_after_drops: every kept message again), where a send may wait. A message not kept
 * (no monitor, no memory) is sent as before. */
static bk_status push_kept(engine *e, int kept, bk_err *err)
{
    if (!kept || !e->mon)
        return push_msg(e, err);
    int again;
    bk_status st = send_once(e, e->buf.data, e->buf.size, ZMQ_DONTWAIT, &again, err);
    e->unsent |= again;
    return st;
}

/* tcp: keep a copy of what was sent (the shape's row made at its first samples; without
 * memory, nothing is kept and a loss stays what it was: the arm fails, naming it) */
static int keep_samples(engine *e, uint32_t shape, uint64_t first, const uint64_t *ns,
                        size_t n)
{
    const uint64_t iters = (uint64_t)e->plan.workload.iters;
    if (!e->mon || shape >= BK_MAX_SHAPES || first > iters || n > iters - first)
        return 0;
    if (!e->kept[shape]) {
        if (!(e->kept[shape] = malloc(iters * sizeof(uint64_t))))
            return 0;
        memset(e->kept[shape], 0xff, iters * sizeof(uint64_t));
    }
    memcpy(e->kept[shape] + first, ns, n * sizeof(uint64_t));
    return 1;
}

static bk_status emit_samples(void *user, uint32_t shape, uint64_t first, const uint64_t *ns,
                              size_t n, bk_err *err)
{
    engine *e = user;
    bk_status st = bk_wire_samples(&e->buf, &e->hdr, shape, first, ns, n, err);
    if (st != BK_OK)
        return st;
    e->sent_samples += n;
    return push_kept(e, keep_samples(e, shape, first, ns, n), err);
}

/* tcp, an audit: the tensor message just sent (e->buf) kept to send again, its buffer
 * taken over (the next message gets a new one). Up to KEEP_TENSOR_BYTES in all (rank 0
 * holds every rank's tensors anyway); a tensor past that is not kept, and its loss stays
 * what it was: the arm fails, naming it. */
#define KEEP_TENSOR_BYTES (2ull << 30)
static int tensor_keepable(const engine *e)
{
    return e->mon && e->nkept_tensors < BK_MAX_SHAPES * BK_MAX_TENSORS &&
           e->buf.size <= KEEP_TENSOR_BYTES - e->kept_tensor_bytes;
}

static void keep_tensor(engine *e)
{
    if (!tensor_keepable(e))
        return;
    e->kept_tensor_bytes += e->buf.size;
    e->kept_tensors[e->nkept_tensors++] = e->buf;
    memset(&e->buf, 0, sizeof e->buf);
}

/* tcp: a connection to rank 0 that broke during the arm is made again by ZeroMQ, but what
 * was in flight on it is lost. So while one broke since the last look (waiting up to
 * wait_ms for the news), or a message of the work found no connection ready (push_kept),
 * every sample of the arm (an audit: every output tensor kept) is sent again, and the status
 * after them when one is given, a few rounds at most; rank 0 takes each sample and tensor
 * once (a repeat is counted, not stored: coordinator.c). Called before the status (no
 * status) and after it (the status: it may have been in flight). A connection that breaks
 * past the last round still loses what it carried: the arm then fails as before, saying
 * what is missing. */
#define RESEND_ROUNDS 4
#define RESEND_BATCH 256
static bk_status resend_after_drops(engine *e, int wait_ms, const bk_wire_buf *status,
                                    bk_err *err)
{
    bk_status st = BK_OK;
    for (int round = 0; round < RESEND_ROUNDS; round++) {
        if (bk_monitor_drops(e->mon, wait_ms) == 0 && !e->unsent)
            break;
        e->unsent = 0;
        for (int s = 0; s < e->plan.workload.nshapes; s++) {
            const uint64_t *k = e->kept[s];
            const uint64_t iters = (uint64_t)e->plan.workload.iters;
            for (uint64_t i = 0; k && i < iters;) {
                if (k[i] == UINT64_MAX) {
                    i++;
                    continue;
                }
                size_t n = 0;
                while (n < RESEND_BATCH && i + n < iters && k[i + n] != UINT64_MAX)
                    n++;
                BK_TRY(bk_wire_samples(&e->buf, &e->hdr, (uint32_t)s, i, k + i, n, err));
                BK_TRY(push_msg(e, err));
                i += n;
            }
        }
        for (int t = 0; t < e->nkept_tensors; t++)
            BK_TRY(push_bytes(e, e->kept_tensors[t].data, e->kept_tensors[t].size, err));
        if (status)
            BK_TRY(push_bytes(e, status->data, status->size, err));
    }
out:
    return st;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bracket engine --plan FILE --run ID --arm ARM --variant NAME\n"
            "                      --rendezvous EP --samples EP --rank R --world N\n"
            "                      [--device D] [--backend cpu|cuda] [--audit]\n"
            "                      [--seed N] [--check-inputs] [--graph]\n"
            "                      [--keys-file FILE]  (CURVE keys, mode 0600, for tcp://)\n"
            "Started by the runner's agents, one per lane rank and arm; not for direct use.\n"
            "Exit status 0 when the arm's work finished, 2 bad arguments, 1 otherwise (the\n"
            "reason is pushed to the coordinator as a status message and printed on stderr).\n");
}

static bk_status parse_args(int argc, char **argv, bk_engine_args *a, bk_err *err)
{
    static const struct option opts[] = {
        { "plan", required_argument, 0, 'p' },  { "run", required_argument, 0, 'r' },
        { "arm", required_argument, 0, 'a' },   { "variant", required_argument, 0, 'v' },
        { "rendezvous", required_argument, 0, 'z' }, { "samples", required_argument, 0, 's' },
        { "rank", required_argument, 0, 'k' },  { "world", required_argument, 0, 'w' },
        { "device", required_argument, 0, 'd' }, { "backend", required_argument, 0, 'b' },
        { "audit", no_argument, 0, 'A' },       { "help", no_argument, 0, 'h' },
        { "seed", required_argument, 0, 'S' },  { "check-inputs", no_argument, 0, 'I' },
        { "graph", no_argument, 0, 'G' },
        { "keys-file", required_argument, 0, 'K' },
        { 0, 0, 0, 0 }
    };
    memset(a, 0, sizeof *a);
    a->rank = a->world = -1;
    a->device = -1;
    a->backend = BK_BACKEND_CPU;
    a->seed = -1;
    optind = 1;
    opterr = 0; /* the message below names the option; getopt's own would come twice */
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': a->plan_path = optarg; break;
        case 'r': a->run_id = optarg; break;
        case 'a': a->arm = optarg; break;
        case 'v': a->variant = optarg; break;
        case 'z': a->rendezvous = optarg; break;
        case 's': a->samples = optarg; break;
        case 'k':
        case 'w':
        case 'd':
        case 'S': {
            /* whole numbers only: "--rank 1x" or "--world ''" is not a rank */
            const char *flag = c == 'k' ? "--rank" : c == 'w' ? "--world"
                               : c == 'd' ? "--device" : "--seed";
            long long v = 0;
            char msg[192];
            if (bk_cli_int(flag, optarg, c == 'w' ? 1 : c == 'd' ? -1 : 0,
                           c == 'S' ? INT64_MAX : INT_MAX, &v, msg, sizeof msg) != 0)
                return BK_FAIL(err, BK_ERR_INPUT, "%s", msg);
            if (c == 'k')
                a->rank = (int)v;
            else if (c == 'w')
                a->world = (int)v;
            else if (c == 'd')
                a->device = (int)v;
            else
                a->seed = v;
            break;
        }
        case 'b':
            if (!strcmp(optarg, "cpu"))
                a->backend = BK_BACKEND_CPU;
            else if (!strcmp(optarg, "cuda"))
                a->backend = BK_BACKEND_CUDA;
            else
                return BK_FAIL(err, BK_ERR_INPUT, "--backend: '%s' is not cpu or cuda", optarg);
            break;
        case 'A': a->audit = 1; break;
        case 'I': a->check_inputs = 1; break;
        case 'G': a->audit_graph = 1; break;
        case 'K': a->keys_file = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: {
            char msg[160];
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            return BK_FAIL(err, BK_ERR_INPUT, "%s (see --help)", msg);
        }
        }
    }
    if (!a->plan_path || !a->run_id || !a->arm || !a->variant || !a->rendezvous || !a->samples)
        return BK_FAIL(err, BK_ERR_INPUT, "--plan, --run, --arm, --variant, --rendezvous "
                                         "and --samples are required");
    if (a->world < 1 || a->rank < 0 || a->rank >= a->world)
        return BK_FAIL(err, BK_ERR_INPUT, "--rank %d / --world %d out of range", a->rank,
                       a->world);
    return BK_OK;
}

static const bk_engine_backend *backend_for(bk_backend b)
{
#ifdef BK_HAVE_CUDA
    if (b == BK_BACKEND_CUDA)
        return &bk_engine_cuda;
#endif
    return b == BK_BACKEND_CPU ? &bk_engine_cpu : NULL;
}

/* Build the variants: the arm's, and the incumbent for routing (the same
 * state when the arm runs the incumbent). */
static bk_status make_variants(engine *e, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_plan *p = &e->plan;
    e->target = bk_catalog_target(p->target);
    if (!e->target)
        return BK_FAIL(err, BK_ERR_INPUT, "engine: unknown target '%s'", p->target);
    e->v_arm = bk_catalog_variant(p->target, e->a.variant);
    e->v_inc = bk_catalog_variant(p->target, p->incumbent.name);
    if (!e->v_arm || !e->v_inc)
        return BK_FAIL(err, BK_ERR_INPUT, "engine: unknown variant '%s' or '%s' for %s",
                       e->a.variant, p->incumbent.name, p->target);
    int arm_is_candidate = !strcmp(e->a.variant, p->candidate.name) &&
                           strcmp(e->a.variant, p->incumbent.name) != 0;
    const json_t *params = arm_is_candidate ? p->candidate.params : p->incumbent.params;
    BK_TRY(e->v_inc->create(p->incumbent.params, e->a.backend, e->a.rank, e->a.world,
                            &e->s_inc, err));
    if (e->v_arm == e->v_inc && !arm_is_candidate) {
        e->s_arm = e->s_inc;
    } else {
        BK_TRY(e->v_arm->create(params, e->a.backend, e->a.rank, e->a.world, &e->s_arm, err));
    }
out:
    return st;
}

/* A broken contract (BK_ERR_CONTRACT) stays one only when the variant that broke it, v, is
 * the arm's own: the runner holds it against the candidate in arms C and A, and the
 * incumbent serving a shape outside the candidate's domain is not the candidate. */
static bk_status own_contract(const engine *e, const bk_variant *v, bk_status st, bk_err *err)
{
    if (st == BK_ERR_CONTRACT && v != e->v_arm)
        st = err->code = BK_ERR_INTERNAL;
    return st;
}

/* Our agent stops us timeouts.arm_s after it started us, and our reason is lost with us:
 * our waits on peers end earlier, by a fifth of arm_s or BK_REPORT_S, whichever is less, so
 * the arm fails naming the peer waited for, with time left to say so. */
#define BK_REPORT_S 10.0
static uint64_t waits_end(const engine *e)
{
    double arm_s = e->plan.timeouts.arm_s, keep = arm_s / 5 < BK_REPORT_S ? arm_s / 5 : BK_REPORT_S;
    return e->t_start_ns + (uint64_t)((arm_s - keep) * 1e9);
}

/* The set-up's waits on peers (the rendezvous, then the backend's connect: the peers'
 * memory, NCCL's init) end at waits_end too, as the timed work's do, each cut there by
 * bk_wait_bound: with arm_s under about 2 x rendezvous_s plus the time kept to report, a
 * peer lost in set-up would otherwise outlast the agent's time-out, and the engine be
 * killed saying nothing. A wait so cut that timed out says so. */
static bk_status said_cut(bk_status st, int cut, bk_err *err)
{
    if (st == BK_ERR_TIMEOUT && cut && err) {
        const size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (" BK_ARM_END_SAID ")");
    }
    return st;
}

static bk_status run_engine(engine *e, bk_err *err)
{
    bk_status st = BK_OK;
    const bk_plan *p = &e->plan;
    unsigned char (*blobs)[BK_BLOB_MAX] = NULL;
    size_t *lens = NULL;
    void *outs[BK_MAX_TENSORS] = { 0 };
    size_t out_bytes[BK_MAX_TENSORS] = { 0 };

    BK_TRY(bk_plan_load(e->a.plan_path, NULL, 0, &e->plan, err));
    BK_TRY(make_variants(e, err));
    e->be = backend_for(e->a.backend);
    if (!e->be) {
        st = BK_FAIL(err, BK_ERR_UNSUPPORTED, "engine: backend %s is not in this build",
                     bk_backend_name(e->a.backend));
        goto out;
    }
    /* peer memory is mapped once: the most any shape needs, by the target's
     * layout or by either variant's own */
    size_t peer_bytes = 0;
    const bk_variant *vs[2] = { e->v_arm, e->v_inc };
    for (int i = 0; i < p->workload.nshapes; i++) {
        const bk_shape *s = &p->workload.shapes[i];
        size_t b = e->target->peer_bytes(s, e->a.world);
        for (int k = 0; k < 2; k++)
            if (vs[k]->peer_bytes && vs[k]->peer_bytes(s, e->a.world) > b)
                b = vs[k]->peer_bytes(s, e->a.world);
        if (b > peer_bytes)
            peer_bytes = b;
    }
    BK_TRY(e->be->open(&e->ctx, e->a.rank, e->a.world, e->a.device, err));
    unsigned char blob[BK_BLOB_MAX];
    size_t blob_len = 0;
    BK_TRY(e->be->comm_create(e->ctx, e->a.run_id, e->a.arm, peer_bytes, blob, &blob_len, err));
    blobs = calloc((size_t)e->a.world, sizeof *blobs);
    lens = calloc((size_t)e->a.world, sizeof *lens);
    if (!blobs || !lens) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "engine: out of memory");
        goto out;
    }
    int cut;
    double wait_s = bk_wait_bound(waits_end(e), p->timeouts.rendezvous_s, &cut);
    BK_TRY(said_cut(bk_rendezvous_secure(e->zctx, e->a.rendezvous,
                                         e->a.keys_file ? &e->keys : NULL, e->a.run_id,
                                         e->a.arm, e->a.rank, e->a.world, blob, blob_len,
                                         blobs, lens, wait_s, err),
                    cut, err));
    wait_s = bk_wait_bound(waits_end(e), p->timeouts.rendezvous_s, &cut);
    BK_TRY(said_cut(e->be->comm_connect(e->ctx, blobs, lens, wait_s, err), cut, err));

    for (int i = 0; i < p->workload.nshapes; i++) {
        const bk_shape *s = &p->workload.shapes[i];
        const bk_variant *v = e->v_arm;
        void *vs = e->s_arm;
        if (v != e->v_inc &&
            !bk_domain_contains(&v->domain, s, e->a.world, p->arena.dtype, e->a.backend, 1, NULL, 0)) {
            v = e->v_inc; /* routing: outside the candidate's domain the incumbent serves */
            vs = e->s_inc;
            if (i < 64)
                e->routed |= (uint64_t)1 << i; /* said in the status: the run checks it */
        }
        bk_shape_job job = {
            .target = e->target, .variant = v, .vstate = vs, .shape = s, .shape_index = i,
            .seed = e->a.seed >= 0 ? (uint64_t)e->a.seed : p->workload.seed,
            .rank = e->a.rank, .world = e->a.world,
            .warmup = p->workload.warmup_iters, .iters = p->workload.iters,
            .graph = e->a.audit ? e->a.audit_graph : !strcmp(p->arena.graph_mode, "graph"),
            .check_inputs = e->a.check_inputs,
            .rtol = p->quality.rtol, .atol = p->quality.atol,
            .timeout_s = p->timeouts.rendezvous_s, .end_ns = waits_end(e),
            .emit = emit_samples, .emit_user = e,
            .t_first_ns = &e->t_first_ns,
        };
        if (!e->a.audit) {
            BK_TRY(own_contract(e, v, e->be->time_shape(e->ctx, &job, err), err));
            continue;
        }
        BK_TRY(own_contract(e, v, e->be->audit_shape(e->ctx, &job, outs, out_bytes, err), err));
        int k = 0;
        for (int t = 0; t < e->target->ntensors; t++) {
            if (!e->target->tensor_is_output[t])
                continue;
            BK_TRY(bk_wire_tensor(&e->buf, &e->hdr, (uint32_t)i, e->target->tensor_names[t],
                                  p->arena.dtype, outs[k], out_bytes[k], err));
            BK_TRY(push_kept(e, tensor_keepable(e), err));
            keep_tensor(e);
            free(outs[k]);
            outs[k] = NULL;
            k++;
        }
    }
out:
    for (int k = 0; k < BK_MAX_TENSORS; k++)
        free(outs[k]);
    free(blobs);
    free(lens);
    return st;
}

int bk_cmd_engine(int argc, char **argv)
{
    engine e;
    memset(&e, 0, sizeof e);
    bk_err err = { 0 };
    e.t_start_ns = bk_now_ns();
    if (parse_args(argc, argv, &e.a, &err) != BK_OK) {
        fprintf(stderr, "bracket engine: %s\n", err.msg);
        return BK_EXIT_USAGE;
    }
    setpgid(0, 0); /* harmless if the agent already made us a group leader */
    /* an agent killed outright (SIGKILL after a job's time limit) takes its engine along */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1) {
        fprintf(stderr, "bracket engine: the agent that started us is gone\n");
        return BK_EXIT_INTERNAL;
    }
    e.hdr = (bk_wire_hdr){ e.a.run_id, e.a.arm, (uint32_t)e.a.rank };
    e.zctx = zmq_ctx_new();
    e.push = e.zctx ? zmq_socket(e.zctx, ZMQ_PUSH) : NULL;
    int linger = 10000; /* at close, how long queued messages may wait; after the work, the
                         * arm's time-out if longer (done well) or 2 s (a failure): below */
    /* A send waits only while no connection has completed its handshake (a refused CURVE
     * key, a coordinator gone): 60 s at most. Over a completed one it queues without waiting
     * (bk_push_opts), so a rank 0 that reads nothing for longer than that (stopped, a debugger
     * on it) gets every sample when it reads again. Over tcp the work's own sends do not wait
     * even then (push_kept): what is kept is sent again before the status. */
    int sndtimeo = 60000;
    if ((e.a.keys_file && (bk_keys_read(e.a.keys_file, &e.keys, &err) != BK_OK ||
                           (e.push && bk_curve_client(e.push, &e.keys, &err) != BK_OK))) ||
        (e.push && bk_push_opts(e.push, sndtimeo, linger, &err) != BK_OK)) {
        fprintf(stderr, "bracket engine: %s\n", err.msg);
        if (e.push)
            zmq_close(e.push);
        if (e.zctx)
            zmq_ctx_term(e.zctx);
        return BK_EXIT_INTERNAL;
    }
    /* tcp: watch for connections that break (resend_after_drops); without the monitor, a
     * loss stays one (the arm fails, naming it) */
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://bk-engine-drops-%d", (int)getpid());
    if (e.push && e.a.keys_file)
        bk_monitor_open(e.zctx, e.push, mon_ep, ZMQ_EVENT_DISCONNECTED, &e.mon);
    if (!e.push || zmq_connect(e.push, e.a.samples) != 0) {
        fprintf(stderr, "bracket engine: cannot connect to %s: %s\n", e.a.samples,
                zmq_strerror(zmq_errno()));
        if (e.mon)
            zmq_close(e.mon);
        if (e.push)
            zmq_close(e.push);
        if (e.zctx)
            zmq_ctx_term(e.zctx);
        return BK_EXIT_INTERNAL;
    }
    bk_status st = run_engine(&e, &err);
    const int resend = e.mon != NULL;
    if (st == BK_OK && resend)
        st = resend_after_drops(&e, 0, NULL, &err); /* a late event: after the status */
    uint64_t t_first = e.t_first_ns ? e.t_first_ns - e.t_start_ns : 0;
    bk_err serr = { 0 };
    if (st != BK_OK)
        fprintf(stderr, "bracket engine [arm %s rank %d pid %d]: %s (%s)\n", e.a.arm, e.a.rank,
                (int)getpid(), err.msg, err.trail);
    if (st == BK_OK) {
        /* Every sample is queued, and the status follows. A coordinator that reads nothing
         * for a while (its process stopped or descheduled, a debugger on rank 0) must still
         * get them all: wait for their delivery as long as the arm may last. The agent kills
         * us at timeouts.arm_s, and we die with it (PR_SET_PDEATHSIG), so this stays bounded
         * when the coordinator is gone; 10 s dropped the tail of a stalled rank 0's queue, and
         * the arm failed for want of statuses that had been sent. */
        int arm_ms = (int)(e.plan.timeouts.arm_s * 1000.0); /* <= 7 days: fits an int */
        if (arm_ms > linger)
            zmq_setsockopt(e.push, ZMQ_LINGER, &arm_ms, sizeof arm_ms);
    } else {
        /* the status of a failure may have nowhere to go: wait for it briefly */
        int brief = 2000;
        zmq_setsockopt(e.push, ZMQ_SNDTIMEO, &brief, sizeof brief);
        zmq_setsockopt(e.push, ZMQ_LINGER, &brief, sizeof brief);
    }
    /* described at the end: the environment NCCL ran with (NCCL_NVLS_ENABLE=0 is set for it) */
    if (e.be && e.ctx)
        e.be->describe(e.ctx, e.settings, sizeof e.settings);
    /* the status in a buffer of its own: it is sent again after samples sent again */
    bk_wire_buf status = { 0 };
    if (bk_wire_status(&status, &e.hdr, st == BK_OK, (int64_t)st, st == BK_OK ? "" : err.msg,
                       e.sent_samples, t_first, e.settings, e.routed, &serr) == BK_OK &&
        push_bytes(&e, status.data, status.size, &serr) == BK_OK && st == BK_OK && resend)
        /* the status, and samples or tensors before it, may have been in flight on a
         * connection that broke: 100 ms for news of that (a loopback or LAN delivers it well
         * within) */
        resend_after_drops(&e, 100, &status, &serr);
    bk_wire_buf_free(&status);
    if (e.v_arm && e.s_arm && e.s_arm != e.s_inc)
        e.v_arm->destroy(e.s_arm);
    if (e.v_inc && e.s_inc)
        e.v_inc->destroy(e.s_inc);
    if (e.be && e.ctx)
        e.be->close(e.ctx);
    bk_wire_buf_free(&e.buf);
    for (int i = 0; i < BK_MAX_SHAPES; i++)
        free(e.kept[i]);
    for (int i = 0; i < e.nkept_tensors; i++)
        bk_wire_buf_free(&e.kept_tensors[i]);
    if (e.mon) {
        zmq_socket_monitor(e.push, NULL, 0);
        zmq_close(e.mon);
    }
    zmq_close(e.push);
    zmq_ctx_term(e.zctx);
    bk_plan_free(&e.plan);
    memset(&e.keys, 0, sizeof e.keys);
    return st == BK_OK ? 0 : BK_EXIT_INTERNAL;
}
