/* rendezvous.c - the engine side of the rendezvous: send our blob, receive every lane rank's. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "collectives/collectives.h"
#include "runner/transport.h"
#include "runner/wire.h"

#define RV_HELLOS_AGAIN 16 /* hellos sent again after breaks, at most */

/* Contract in collectives.h. The DEALER socket is closed before returning,
 * whatever the outcome; linger is bounded so a dead coordinator cannot hold
 * the engine at exit. */
bk_status bk_rendezvous(void *zmq_ctx, const char *endpoint, const char *run_id,
                        const char *arm, int rank, int world, const void *blob,
                        size_t blob_len, unsigned char (*blobs_out)[BK_BLOB_MAX],
                        size_t *lens_out, double timeout_s, bk_err *err)
{
    return bk_rendezvous_secure(zmq_ctx, endpoint, NULL, run_id, arm, rank, world, blob,
                                blob_len, blobs_out, lens_out, timeout_s, err);
}

bk_status bk_rendezvous_secure(void *zmq_ctx, const char *endpoint,
                               const struct bk_curve_keys *keys, const char *run_id,
                               const char *arm, int rank, int world, const void *blob,
                               size_t blob_len, unsigned char (*blobs_out)[BK_BLOB_MAX],
                               size_t *lens_out, double timeout_s, bk_err *err)
{
    bk_status st = BK_OK;
    bk_wire_buf buf = { 0 };
    bk_wire_decoder *dec = NULL;
    void *mon = NULL;
    void *sock = zmq_socket(zmq_ctx, ZMQ_DEALER);
    if (!sock)
        return BK_FAIL(err, BK_ERR_SYSTEM, "rendezvous: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int linger = 1000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (keys)
        BK_TRY(bk_curve_client(sock, keys, err));
    /* tcp: a connection that breaks is made again by ZeroMQ, but the hello, or the answer,
     * in flight on it is lost, and rank 0 answers a connection, not a rank: after a break
     * the hello goes again (a few times at most), and rank 0 answers it on the new
     * connection (coordinator.c). Without the monitor a loss stays one: the time-out. */
    char mon_ep[64];
    snprintf(mon_ep, sizeof mon_ep, "inproc://bk-rv-drops-%d-%p", (int)getpid(), sock);
    if (keys)
        bk_monitor_open(zmq_ctx, sock, mon_ep, ZMQ_EVENT_DISCONNECTED, &mon);
    if (zmq_connect(sock, endpoint) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "rendezvous: connect %s: %s", endpoint,
                     zmq_strerror(zmq_errno()));
        goto out;
    }
    bk_wire_hdr hdr = { run_id, arm, (uint32_t)rank };
    BK_TRY(bk_wire_hello(&buf, &hdr, (uint32_t)world, (int64_t)getpid(), blob, blob_len, err));
    if (zmq_send(sock, buf.data, buf.size, 0) < 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "rendezvous: send hello: %s", zmq_strerror(zmq_errno()));
        goto out;
    }
    int hellos_left = RV_HELLOS_AGAIN, hello_due = 0;
    BK_TRY(bk_wire_decoder_new(&dec, err));
    uint64_t deadline = bk_now_ns() + (uint64_t)(timeout_s * 1e9);
    bk_wire_stats stats = { 0 };
    bk_wire_expect expect = { run_id, arm, 0, 0 };
    for (;;) {
        uint64_t now = bk_now_ns();
        if (now >= deadline) {
            st = BK_FAIL(err, BK_ERR_TIMEOUT,
                         "rendezvous: no answer from the coordinator at %s within %.1f s "
                         "(run %s, arm %s, lane rank %d of %d; it answers once every lane rank "
                         "said hello: a peer lost before its hello, or the coordinator gone)",
                         endpoint, timeout_s, run_id, arm, rank, world);
            goto out;
        }
        zmq_pollitem_t items[2] = { { sock, 0, ZMQ_POLLIN, 0 }, { mon, 0, ZMQ_POLLIN, 0 } };
        long ms = (long)((deadline - now) / 1000000ull) + 1;
        if (ms > 200)
            ms = 200;
        if (hello_due)
            ms = 10; /* the hello again once the pipe takes it */
        int rc = zmq_poll(items, mon ? 2 : 1, ms);
        if (rc < 0) {
            if (zmq_errno() == EINTR)
                continue;
            st = BK_FAIL(err, BK_ERR_SYSTEM, "rendezvous: poll: %s", zmq_strerror(zmq_errno()));
            goto out;
        }
        if (mon && (items[1].revents & ZMQ_POLLIN) && bk_monitor_drops(mon, 0) > 0 &&
            hellos_left > 0) {
            hello_due = 1;
            hellos_left--;
        }
        if (hello_due && zmq_send(sock, buf.data, buf.size, ZMQ_DONTWAIT) >= 0)
            hello_due = 0;
        if (!(items[0].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            continue;
        }
        bk_msg msg;
        bk_wire_reject why;
        bk_err derr = { 0 };
        bk_status dst = bk_wire_decode(dec, zmq_msg_data(&m), zmq_msg_size(&m), &expect, &msg,
                                       &stats, &why, &derr);
        zmq_msg_close(&m);
        if (dst != BK_OK || msg.type != BK_MSG_PEERS)
            continue; /* counted and ignored: only a peers answer for us ends the wait */
        if ((int)msg.nblobs != world) {
            st = BK_FAIL(err, BK_ERR_PEER, "rendezvous: coordinator sent %u blobs for a lane of %d",
                         msg.nblobs, world);
            goto out;
        }
        for (int r = 0; r < world; r++) {
            if (msg.blob_lens[r] > BK_BLOB_MAX) {
                st = BK_FAIL(err, BK_ERR_PEER, "rendezvous: blob of rank %d too large (%zu)", r,
                             msg.blob_lens[r]);
                goto out;
            }
            memcpy(blobs_out[r], msg.blobs[r], msg.blob_lens[r]);
            lens_out[r] = msg.blob_lens[r];
        }
        break;
    }
out:
    bk_wire_decoder_free(dec);
    bk_wire_buf_free(&buf);
    zmq_close(sock);
    if (mon)
        zmq_close(mon);
    return st;
}
