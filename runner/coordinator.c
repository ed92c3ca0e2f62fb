/* coordinator.c - rank 0's rendezvous and sample sink over ZeroMQ. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "collectives/collectives.h"
#include "kernels/catalog.h"
#include "runner/coord_secure.h"
#include "runner/coordinator.h"
#include "runner/janitor.h"

const char *const bk_arm_names[BK_ARM_NAMES] = { "B", "C", "B'", "A", "T" };

/* the ipc:// sockets' files in the coordinator's folder (its endpoints below) */
static const char *const k_coord_files[] = { "rv", "samples", NULL };

typedef struct rv_slot {
    unsigned char id[256];
    size_t id_len;
    unsigned char blob[BK_BLOB_MAX];
    size_t blob_len;
} rv_slot;

struct bk_coord {
    void *zctx, *router, *pull;
    bk_coord_sec *sec;           /* tcp only: CURVE, ZAP, handshake monitors */
    char dir[256];
    char ep_rv[320], ep_samples[320];
    bk_wire_decoder *dec;
    bk_wire_stats stats;
    char run_id[BK_RUN_ID_LEN];
    int nshapes, iters, noutputs;
    /* what an audit's tensors must be (bk_coord_set_outputs): none set, none accepted */
    const bk_target *tg;
    bk_shape *shapes;                /* [nshapes] */
    int out_idx[BK_MAX_TENSORS];     /* the target's index of output o */
    char dtype[16];
    bk_arm_run *cur;
    rv_slot *slots;
    int nhello;
    int answered;
    bk_wire_buf buf;
};

bk_status bk_coord_open(bk_coord **out, const char *run_id, int nshapes, int iters, int noutputs,
                        bk_err *err)
{
    return bk_coord_open_ex(out, run_id, nshapes, iters, noutputs, NULL, err);
}

static const bk_transport_stats k_no_tstats;

const bk_transport_stats *bk_coord_transport_stats(const bk_coord *c)
{
    return c->sec ? bk_coord_sec_stats(c->sec) : &k_no_tstats;
}

bk_status bk_coord_open_ex(bk_coord **out, const char *run_id, int nshapes, int iters,
                           int noutputs, const bk_transport *t, bk_err *err)
{
    int tcp = t && t->tcp;
    bk_status st = BK_OK;
    bk_coord *c = calloc(1, sizeof *c);
    if (!c)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory");
    bk_strlcpy(c->run_id, run_id, sizeof c->run_id);
    c->nshapes = nshapes;
    c->iters = iters;
    c->noutputs = noutputs;
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/bracket-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (tcp) {
        c->dir[0] = '\0';
    } else if (strlen(c->dir) > 80 || bk_janitor_mkdtemp(c->dir, k_coord_files) != 0) {
        /* ipc paths must stay short; the folder and its sockets are the janitor's before
         * the folder exists */
        snprintf(c->dir, sizeof c->dir, "/tmp/bracket-XXXXXX");
        if (bk_janitor_mkdtemp(c->dir, k_coord_files) != 0) {
            st = BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: cannot make a private folder "
                         "%s: %s", c->dir, strerror(errno));
            c->dir[0] = '\0';
            goto out;
        }
    }
    if (!tcp)
        chmod(c->dir, 0700);
    snprintf(c->ep_rv, sizeof c->ep_rv, "ipc://%s/rv", c->dir);
    snprintf(c->ep_samples, sizeof c->ep_samples, "ipc://%s/samples", c->dir);
    c->zctx = zmq_ctx_new();
    if (!c->zctx) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
        goto out;
    }
    c->router = zmq_socket(c->zctx, ZMQ_ROUTER);
    c->pull = zmq_socket(c->zctx, ZMQ_PULL);
    int zero = 0, hwm = 100000;
    int64_t maxmsg = (int64_t)BK_WIRE_MSG_MAX; /* the largest tensor message we accept */
    if (!c->router || !c->pull ||
        zmq_setsockopt(c->router, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(c->pull, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(c->pull, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(c->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
        zmq_setsockopt(c->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: sockets: %s", zmq_strerror(zmq_errno()));
        goto out;
    }
    if (tcp) {
        BK_TRY(bk_coord_sec_open(&c->sec, c->zctx, c->router, c->pull, t, err));
        BK_TRY(bk_coord_sec_bind(c->router, t, t->port, c->ep_rv, sizeof c->ep_rv, err));
        BK_TRY(bk_coord_sec_bind(c->pull, t, t->port + 1, c->ep_samples, sizeof c->ep_samples,
                                 err));
    } else if (zmq_bind(c->router, c->ep_rv) != 0 || zmq_bind(c->pull, c->ep_samples) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: cannot bind %s / %s: %s", c->ep_rv,
                     c->ep_samples, zmq_strerror(zmq_errno()));
        goto out;
    }
    BK_TRY(bk_wire_decoder_new(&c->dec, err));
out:
    if (st != BK_OK) {
        bk_coord_close(c);
        c = NULL;
    }
    *out = c;
    return st;
}

bk_status bk_coord_set_outputs(bk_coord *c, const bk_target *tg, const bk_shape *shapes,
                               const char *dtype, bk_err *err)
{
    int no = 0;
    for (int t = 0; t < tg->ntensors; t++)
        if (tg->tensor_is_output[t] && no < BK_MAX_TENSORS)
            c->out_idx[no++] = t;
    if (no != c->noutputs)
        return BK_FAIL(err, BK_ERR_INPUT, "coordinator: %s has %d output(s), opened for %d",
                       tg->name, no, c->noutputs);
    if (bk_strlcpy(c->dtype, dtype, sizeof c->dtype) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "coordinator: dtype '%s': at most %zu characters",
                       dtype, sizeof c->dtype - 1);
    free(c->shapes);
    c->shapes = malloc((size_t)c->nshapes * sizeof *c->shapes + 1);
    if (!c->shapes)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory");
    memcpy(c->shapes, shapes, (size_t)c->nshapes * sizeof *c->shapes);
    c->tg = tg;
    return BK_OK;
}

/* The slot of an audit tensor: the output its name names, of the plan's dtype and of the
 * bytes the target gives its shape on this arm's world; else -1. The slot may be filled
 * already (a tensor sent again): the caller looks. */
static int tensor_slot(const bk_coord *c, const bk_arm_run *a, const bk_msg *m)
{
    if (!c->tg || !a->audit || strcmp(m->dtype, c->dtype) != 0)
        return -1;
    for (int o = 0; o < c->noutputs; o++) {
        const int t = c->out_idx[o];
        if (strcmp(m->name, c->tg->tensor_names[t]) != 0)
            continue;
        const bk_shape *sh = &c->shapes[m->shape];
        if (m->data_len != c->tg->tensor_elems(sh, a->world, t) * c->tg->tensor_elem_bytes(t))
            return -1;
        return (int)((size_t)m->shape * (size_t)c->noutputs + (size_t)o);
    }
    return -1;
}

/* every output tensor of every shape arrived from this rank */
static int all_tensors_in(const bk_coord *c, const bk_rank_data *d)
{
    for (int k = 0; k < c->nshapes * c->noutputs; k++)
        if (!d->tensors[k])
            return 0;
    return 1;
}

const char *bk_coord_rendezvous_ep(const bk_coord *c) { return c->ep_rv; }
const char *bk_coord_samples_ep(const bk_coord *c) { return c->ep_samples; }
const bk_wire_stats *bk_coord_stats(const bk_coord *c) { return &c->stats; }

bk_status bk_coord_begin_arm(bk_coord *c, bk_arm_run *arm, bk_err *err)
{
    free(c->slots);
    c->slots = calloc((size_t)arm->world, sizeof *c->slots);
    if (!c->slots)
        return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory");
    c->nhello = 0;
    c->answered = 0;
    for (int r = 0; r < arm->world; r++) {
        bk_rank_data *d = &arm->r[r];
        d->ns = calloc((size_t)c->nshapes, sizeof *d->ns);
        d->ns_seen = calloc((size_t)c->nshapes, sizeof *d->ns_seen);
        d->tensors = calloc((size_t)(c->nshapes * c->noutputs), sizeof *d->tensors);
        d->tensor_len = calloc((size_t)(c->nshapes * c->noutputs), sizeof *d->tensor_len);
        if (!d->ns || !d->ns_seen || !d->tensors || !d->tensor_len)
            return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory");
        if (arm->audit)
            continue;
        for (int s = 0; s < c->nshapes; s++) {
            d->ns[s] = malloc((size_t)c->iters * sizeof(uint64_t));
            if (!d->ns[s])
                return BK_FAIL(err, BK_ERR_SYSTEM, "coordinator: out of memory for samples");
            memset(d->ns[s], 0xFF, (size_t)c->iters * sizeof(uint64_t));
        }
    }
    c->cur = arm;
    return BK_OK;
}

void bk_coord_end_arm(bk_coord *c)
{
    c->cur = NULL;
}

const char *bk_arm_round_name(int idx, int round, char buf[BK_ARM_LEN])
{
    if (idx < 0 || idx >= BK_ARM_NAMES)
        return "?";
    if (round <= 0)
        return bk_arm_names[idx];
    const unsigned k = (unsigned)(round + 1) % 100u; /* rounds <= 16 (BK_MAX_ROUNDS) */
    snprintf(buf, BK_ARM_LEN, "%s#%u", bk_arm_names[idx], k);
    return buf;
}

void bk_arm_free(bk_arm_run *arm, int nshapes, int noutputs)
{
    if (!arm)
        return;
    const int rounds = bk_arm_rounds(arm);
    for (int r = 0; arm->r && r < rounds * arm->world; r++) {
        bk_rank_data *d = &arm->r[r];
        for (int s = 0; d->ns && s < nshapes; s++)
            free(d->ns[s]);
        for (int k = 0; d->tensors && k < nshapes * noutputs; k++)
            free(d->tensors[k]);
        free(d->ns);
        free(d->ns_seen);
        free(d->tensors);
        free(d->tensor_len);
    }
    free(arm->r);
    free(arm->lane);
    arm->r = NULL;
    arm->lane = NULL;
}

/* Every lane rank's blob to lane rank `only` (-1: to each rank). */
static void answer_rendezvous(bk_coord *c, int only)
{
    bk_arm_run *a = c->cur;
    const void **blobs = calloc((size_t)a->world, sizeof *blobs);
    size_t *lens = calloc((size_t)a->world, sizeof *lens);
    if (!blobs || !lens)
        goto out;
    for (int r = 0; r < a->world; r++) {
        blobs[r] = c->slots[r].blob;
        lens[r] = c->slots[r].blob_len;
    }
    for (int r = 0; r < a->world; r++) {
        if (only >= 0 && r != only)
            continue;
        bk_wire_hdr h = { c->run_id, a->name, (uint32_t)r };
        if (bk_wire_peers(&c->buf, &h, (uint32_t)a->world, blobs, lens, NULL) != BK_OK)
            goto out;
        zmq_send(c->router, c->slots[r].id, c->slots[r].id_len, ZMQ_SNDMORE);
        zmq_send(c->router, c->buf.data, c->buf.size, 0);
    }
    c->answered = 1;
out:
    free(blobs);
    free(lens);
}

static void on_router(bk_coord *c)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, c->router, 0) < 0)
        goto out;
    if (!zmq_msg_more(&id) || zmq_msg_recv(&body, c->router, 0) < 0) {
        c->stats.rejected[BK_REJ_MALFORMED]++;
        goto out;
    }
    while (zmq_msg_more(&body)) { /* extra frames: drain and reject */
        zmq_msg_close(&body);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&body, c->router, 0) < 0)
            break;
    }
    bk_arm_run *a = c->cur;
    if (!a) {
        c->stats.rejected[BK_REJ_WRONG_ARM]++;
        goto out;
    }
    bk_wire_expect ex = { c->run_id, a->name, (uint32_t)a->world, 0 };
    bk_msg m;
    bk_wire_reject why;
    if (bk_wire_decode(c->dec, zmq_msg_data(&body), zmq_msg_size(&body), &ex, &m, &c->stats, &why,
                       NULL) != BK_OK)
        goto out;
    rv_slot *s = &c->slots[m.rank]; /* the decoder saw the rank below the arm's world */
    /* a hello again from the same process with the same blob (an engine over tcp says hello
     * again after its connection broke: its first, or the answer, may have been lost, and
     * the answer must go to its new connection) is a repeat: the rank's connection is the
     * new one, and an answer already given is given again on it; else a second hello is
     * rejected */
    const int again = m.type == BK_MSG_HELLO && a->r[m.rank].hello &&
                      a->r[m.rank].pid == m.pid && s->blob_len == m.blob_len &&
                      memcmp(s->blob, m.blob, m.blob_len) == 0;
    if (m.type != BK_MSG_HELLO || m.world != (uint32_t)a->world || m.blob_len > BK_BLOB_MAX ||
        zmq_msg_size(&id) > sizeof c->slots[0].id || (a->r[m.rank].hello && !again)) {
        c->stats.accepted--;
        c->stats.rejected[BK_REJ_BAD_FIELD]++;
        goto out;
    }
    memcpy(s->id, zmq_msg_data(&id), zmq_msg_size(&id));
    s->id_len = zmq_msg_size(&id);
    if (again) {
        c->stats.repeated_hellos++;
        if (c->answered)
            answer_rendezvous(c, (int)m.rank);
        goto out;
    }
    memcpy(s->blob, m.blob, m.blob_len);
    s->blob_len = m.blob_len;
    a->r[m.rank].hello = 1;
    a->r[m.rank].pid = m.pid;
    if (++c->nhello == a->world)
        answer_rendezvous(c, -1);
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}

static void on_pull(bk_coord *c)
{
    zmq_msg_t body;
    zmq_msg_init(&body);
    if (zmq_msg_recv(&body, c->pull, 0) < 0)
        goto out;
    bk_arm_run *a = c->cur;
    if (!a) {
        c->stats.rejected[BK_REJ_WRONG_ARM]++;
        goto out;
    }
    bk_wire_expect ex = { c->run_id, a->name, (uint32_t)a->world, (uint32_t)c->nshapes };
    bk_msg m;
    bk_wire_reject why;
    if (bk_wire_decode(c->dec, zmq_msg_data(&body), zmq_msg_size(&body), &ex, &m, &c->stats, &why,
                       NULL) != BK_OK)
        goto out;
    bk_rank_data *d = &a->r[m.rank];
    switch (m.type) {
    case BK_MSG_SAMPLES:
        if (a->audit || m.first > (uint64_t)c->iters || m.n > (uint64_t)c->iters - m.first) {
            c->stats.accepted--;
            c->stats.rejected[BK_REJ_BAD_FIELD]++;
            break;
        }
        {
            /* an iteration already received may come again with the same time (an engine
             * over tcp sends its samples again after a connection broke: engine.c), and is
             * counted as a repeat; with another time, or the "missing" marker, the batch is
             * rejected whole */
            uint64_t *dst = d->ns[m.shape] + m.first, fresh = 0;
            size_t i = 0;
            while (i < m.n && m.ns[i] != UINT64_MAX && (dst[i] == UINT64_MAX || dst[i] == m.ns[i]))
                fresh += dst[i++] == UINT64_MAX;
            if (i < m.n) {
                c->stats.accepted--;
                c->stats.rejected[BK_REJ_BAD_FIELD]++;
                break;
            }
            if (!d->t_first_sample_ns && a->t_start_ns && fresh)
                d->t_first_sample_ns = bk_now_ns() - a->t_start_ns;
            memcpy(dst, m.ns, m.n * sizeof(uint64_t));
            d->ns_seen[m.shape] += fresh;
            d->samples_got += fresh;
            c->stats.repeated += m.n - fresh;
        }
        break;
    case BK_MSG_TENSOR: {
        /* a tensor may come again, whole and the same (an engine over tcp sends its tensors
         * again after a connection broke), and is counted as a repeat; different, it is
         * rejected and the first kept */
        const int k = tensor_slot(c, a, &m);
        if (k >= 0 && d->tensors[k] && d->tensor_len[k] == m.data_len &&
            memcmp(d->tensors[k], m.data, m.data_len) == 0) {
            c->stats.repeated_tensors++;
            break;
        }
        if (k < 0 || d->tensors[k]) {
            c->stats.accepted--;
            c->stats.rejected[BK_REJ_BAD_FIELD]++;
            break;
        }
        d->tensors[k] = malloc(m.data_len ? m.data_len : 1);
        if (d->tensors[k]) {
            memcpy(d->tensors[k], m.data, m.data_len);
            d->tensor_len[k] = m.data_len;
        }
        break;
    }
    case BK_MSG_STATUS:
        /* a shape past the plan's cannot have been routed: the message is not the run's */
        if (c->nshapes < 64 && (m.routed >> c->nshapes) != 0) {
            c->stats.accepted--;
            c->stats.rejected[BK_REJ_BAD_FIELD]++;
            break;
        }
        d->status_seen = 1;
        d->status_ok = m.ok;
        d->broke_contract = !m.ok && m.code == BK_ERR_CONTRACT;
        /* free text from inside the engine (a library's error, a path): judged, printed and
         * recorded, so made printable UTF-8 first (a newline, an escape sequence or a byte
         * that is not UTF-8 would reach the terminal, or leave jansson unable to record it) */
        bk_strlcpy(d->status_msg, m.message, sizeof d->status_msg);
        bk_text_clean(d->status_msg);
        d->samples_claimed = m.samples;
        d->t_first_ns = m.t_first_ns;
        bk_strlcpy(d->settings, m.settings, sizeof d->settings);
        bk_text_clean(d->settings);
        d->routed = m.routed;
        d->routed_known = 1;
        break;
    default:
        c->stats.accepted--;
        c->stats.rejected[BK_REJ_UNKNOWN_TYPE]++;
        break;
    }
out:
    zmq_msg_close(&body);
}

int bk_coord_poll(bk_coord *c, int timeout_ms)
{
    int handled = 0;
    zmq_pollitem_t items[5] = { { c->router, 0, ZMQ_POLLIN, 0 }, { c->pull, 0, ZMQ_POLLIN, 0 } };
    if (c->sec)
        bk_coord_sec_pollitems(c->sec, &items[2]);
    int rc = zmq_poll(items, c->sec ? 5 : 2, timeout_ms);
    if (rc <= 0)
        return 0;
    if (c->sec) /* handshakes first: a client waits on its ZAP answer */
        bk_coord_sec_serve(c->sec, &c->stats);
    /* drain what is queued without waiting again */
    for (int round = 0; round < 4096; round++) {
        int any = 0;
        int ev = 0;
        size_t sz = sizeof ev;
        if (zmq_getsockopt(c->router, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN)) {
            on_router(c);
            any = 1;
        }
        sz = sizeof ev;
        if (zmq_getsockopt(c->pull, ZMQ_EVENTS, &ev, &sz) == 0 && (ev & ZMQ_POLLIN)) {
            on_pull(c);
            any = 1;
        }
        if (!any)
            break;
        handled += any;
    }
    /* a connection's handshake event is queued before its first message is readable:
     * counting events after the messages keeps the refused count exact at an arm's end */
    if (c->sec)
        bk_coord_sec_serve(c->sec, &c->stats);
    return handled;
}

int bk_coord_all_status(const bk_coord *c)
{
    if (!c->cur)
        return 0;
    for (int r = 0; r < c->cur->world; r++)
        if (!c->cur->r[r].status_seen)
            return 0;
    return 1;
}

int bk_coord_all_in(const bk_coord *c)
{
    if (!bk_coord_all_status(c))
        return 0;
    for (int r = 0; r < c->cur->world; r++) {
        const bk_rank_data *d = &c->cur->r[r];
        if (c->cur->audit ? d->status_ok && !all_tensors_in(c, d)
                          : d->samples_got != d->samples_claimed)
            return 0;
    }
    return 1;
}

uint64_t bk_coord_progress(const bk_coord *c, int *shape_out)
{
    *shape_out = 0;
    if (!c->cur || c->cur->audit)
        return 0;
    const bk_rank_data *d = &c->cur->r[0];
    uint64_t total = 0;
    for (int s = 0; s < c->nshapes; s++) {
        total += d->ns_seen[s];
        if (d->ns_seen[s])
            *shape_out = s;
    }
    return total;
}

void bk_coord_close(bk_coord *c)
{
    if (!c)
        return;
    if (c->router)
        zmq_close(c->router);
    if (c->pull)
        zmq_close(c->pull);
    bk_coord_sec_close(c->sec);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    bk_wire_decoder_free(c->dec);
    bk_wire_buf_free(&c->buf);
    free(c->slots);
    free(c->shapes);
    if (c->dir[0]) {
        char p[300];
        snprintf(p, sizeof p, "%s/rv", c->dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/samples", c->dir);
        unlink(p);
        rmdir(c->dir);
    }
    free(c);
}
