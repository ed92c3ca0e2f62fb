/* bench_load.c - the coordinator under load: R simulated engine ranks (default 512), each
 * its own PUSH socket in one of P sender processes, send N samples each (default 10^4) in
 * batches, then a final status, to the real coordinator (bk_coord_open_ex, begin_arm, poll)
 * over loopback: tcp://127.0.0.1 with CURVE (as between hosts) or ipc://. Nothing may be
 * lost: every rank's count and every stored value is checked exactly. Prints the wall time,
 * samples/s and the coordinator's memory (peak RSS growth of its process; the senders are
 * other processes).
 *
 *   bench_load [--ranks R] [--samples N] [--batch B] [--procs P] [--transport tcp|ipc]
 *
 * Exit 0 when every sample arrived intact, 1 otherwise (or past a 600 s bound). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "runner/coordinator.h"
#include "runner/run.h"
#include "runner/transport.h"
#include "runner/wire.h"

#define RUN "bench-load"
#define BOUND_NS 600000000000ull

typedef struct opts {
    int ranks, procs, batch;
    long samples;
    int tcp;
} opts;

/* The sample value of (rank, iteration): distinct, so a misplaced sample shows. */
static uint64_t value(int rank, long it) { return 1000000ull * (uint64_t)rank + (uint64_t)it + 1; }

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* One sender process: ranks [r0, r1), interleaved a batch at a time so every socket is
 * busy at once, as engines of one arm are. */
static int sender(const opts *o, const char *ep, const bk_curve_keys *keys, int r0, int r1)
{
    int n = r1 - r0, rc = 1;
    void *ctx = zmq_ctx_new();
    void **socks = calloc((size_t)n, sizeof *socks);
    uint64_t *ns = malloc((size_t)o->batch * sizeof *ns);
    bk_wire_buf buf = { 0 };
    bk_err err = { 0 };
    if (!ctx || !socks || !ns)
        goto out;
    for (int i = 0; i < n; i++) {
        int linger = 60000;
        socks[i] = zmq_socket(ctx, ZMQ_PUSH);
        if (!socks[i] || zmq_setsockopt(socks[i], ZMQ_LINGER, &linger, sizeof linger) != 0 ||
            (keys && bk_curve_client(socks[i], keys, &err) != BK_OK) ||
            zmq_connect(socks[i], ep) != 0)
            goto out;
    }
    for (long first = 0; first < o->samples; first += o->batch) {
        long m = o->samples - first < o->batch ? o->samples - first : o->batch;
        for (int i = 0; i < n; i++) {
            for (long k = 0; k < m; k++)
                ns[k] = value(r0 + i, first + k);
            bk_wire_hdr h = { RUN, "B", (uint32_t)(r0 + i) };
            if (bk_wire_samples(&buf, &h, 0, (uint64_t)first, ns, (size_t)m, &err) != BK_OK ||
                zmq_send(socks[i], buf.data, buf.size, 0) < 0)
                goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        bk_wire_hdr h = { RUN, "B", (uint32_t)(r0 + i) };
        if (bk_wire_status(&buf, &h, 1, 0, "", (uint64_t)o->samples, 0, "", 0, &err) != BK_OK ||
            zmq_send(socks[i], buf.data, buf.size, 0) < 0)
            goto out;
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench_load sender %d-%d: %s %s\n", r0, r1, err.msg,
                zmq_strerror(zmq_errno()));
    for (int i = 0; socks && i < n; i++)
        if (socks[i])
            zmq_close(socks[i]); /* linger: queued batches still go out */
    if (ctx)
        zmq_ctx_term(ctx);
    bk_wire_buf_free(&buf);
    free(socks);
    free(ns);
    return rc;
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        { "ranks", required_argument, 0, 'r' }, { "samples", required_argument, 0, 'n' },
        { "batch", required_argument, 0, 'b' }, { "procs", required_argument, 0, 'p' },
        { "transport", required_argument, 0, 't' }, { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    *o = (opts){ .ranks = 512, .procs = 8, .batch = 500, .samples = 10000, .tcp = 1 };
    int c;
    while ((c = getopt_long(argc, argv, "r:n:b:p:t:h", lo, NULL)) != -1) {
        switch (c) {
        case 'r': o->ranks = atoi(optarg); break;
        case 'n': o->samples = atol(optarg); break;
        case 'b': o->batch = atoi(optarg); break;
        case 'p': o->procs = atoi(optarg); break;
        case 't':
            if (strcmp(optarg, "tcp") && strcmp(optarg, "ipc"))
                return -1;
            o->tcp = !strcmp(optarg, "tcp");
            break;
        default:
            return -1;
        }
    }
    if (o->ranks < 1 || o->ranks > BK_MAX_LANE || o->samples < 1 || o->batch < 1 ||
        o->procs < 1 || o->procs > o->ranks)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: bench_load [--ranks R<=%d (512)] [--samples N (10000)] "
                "[--batch B (500)] [--procs P (8)] [--transport tcp|ipc (tcp)]\n", BK_MAX_LANE);
        return 2;
    }
    bk_err err = { 0 };
    bk_transport t;
    memset(&t, 0, sizeof t);
    if (o.tcp) {
        t.tcp = 1;
        bk_strlcpy(t.addr, "127.0.0.1", sizeof t.addr);
        if (bk_curve_keys_new(&t.keys, &err) != BK_OK) {
            fprintf(stderr, "bench_load: %s\n", err.msg);
            return 1;
        }
    }
    long rss0 = peak_rss_kib();
    bk_coord *c = NULL;
    bk_arm_run arm;
    memset(&arm, 0, sizeof arm);
    arm.name = "B";
    arm.world = o.ranks;
    arm.r = calloc((size_t)o.ranks, sizeof *arm.r);
    arm.lane = calloc((size_t)o.ranks, sizeof *arm.lane);
    if (!arm.r || !arm.lane ||
        bk_coord_open_ex(&c, RUN, 1, (int)o.samples, 1, &t, &err) != BK_OK ||
        bk_coord_begin_arm(c, &arm, &err) != BK_OK) {
        fprintf(stderr, "bench_load: %s\n", err.msg);
        return 1;
    }
    const char *ep = bk_coord_samples_ep(c);
    uint64_t t0 = bk_now_ns();
    pid_t *kids = calloc((size_t)o.procs, sizeof *kids);
    for (int p = 0; p < o.procs; p++) {
        int r0 = (int)((long)o.ranks * p / o.procs), r1 = (int)((long)o.ranks * (p + 1) / o.procs);
        kids[p] = fork();
        if (kids[p] == 0)
            _exit(sender(&o, ep, o.tcp ? &t.keys : NULL, r0, r1));
    }
    uint64_t end = t0 + BOUND_NS;
    while (!bk_coord_all_status(c) && bk_now_ns() < end)
        bk_coord_poll(c, 100);
    uint64_t t1 = bk_now_ns();
    int bad_kids = 0;
    for (int p = 0; p < o.procs; p++) {
        int st = 0;
        if (kids[p] > 0 && waitpid(kids[p], &st, 0) == kids[p] &&
            (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
            bad_kids++;
    }
    /* exact counts and values */
    uint64_t lost = 0, wrong = 0, got = 0;
    for (int r = 0; r < o.ranks; r++) {
        const bk_rank_data *d = &arm.r[r];
        got += d->samples_got;
        if (d->samples_got != (uint64_t)o.samples || d->ns_seen[0] != (size_t)o.samples ||
            !d->status_seen || d->samples_claimed != (uint64_t)o.samples)
            lost += (uint64_t)o.samples - (d->samples_got < (uint64_t)o.samples ? d->samples_got
                                                                                : (uint64_t)o.samples);
        for (long i = 0; i < o.samples; i++)
            wrong += d->ns[0][i] != value(r, i);
    }
    const bk_wire_stats *ws = bk_coord_stats(c);
    uint64_t rejected = 0;
    for (int i = 0; i < BK_REJ_COUNT; i++)
        rejected += ws->rejected[i];
    uint64_t msgs = (uint64_t)o.ranks * (uint64_t)((o.samples + o.batch - 1) / o.batch + 1);
    long rss1 = peak_rss_kib();
    double s = (double)(t1 - t0) / 1e9;
    printf("| transport | ranks | samples/rank | batch | sender procs | messages | samples "
           "received | lost | wrong | rejected | wall s | Msamples/s | coordinator peak RSS "
           "growth MiB | sample tables MiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %s | %d | %ld | %d | %d | %llu | %llu | %llu | %llu | %llu | %.2f | %.2f | %.1f | "
           "%.1f |\n", o.tcp ? "tcp+CURVE loopback" : "ipc", o.ranks, o.samples, o.batch,
           o.procs, (unsigned long long)ws->accepted, (unsigned long long)got,
           (unsigned long long)lost, (unsigned long long)wrong, (unsigned long long)rejected, s,
           (double)got / s / 1e6, (double)(rss1 - rss0) / 1024.0,
           (double)o.ranks * (double)o.samples * 8.0 / 1048576.0);
    int ok = !lost && !wrong && !rejected && !bad_kids && ws->accepted == msgs;
    if (!ok)
        fprintf(stderr, "bench_load: FAILED: lost %llu, wrong %llu, rejected %llu, senders "
                "failed %d, messages %llu of %llu\n", (unsigned long long)lost,
                (unsigned long long)wrong, (unsigned long long)rejected, bad_kids,
                (unsigned long long)ws->accepted, (unsigned long long)msgs);
    bk_arm_free(&arm, 1, 1);
    bk_coord_close(c);
    free(kids);
    return ok ? 0 : 1;
}
