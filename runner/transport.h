/* transport.h - how engines reach rank 0's coordinator: ipc:// in a private 0700 folder when
 * every lane rank runs on rank 0's host, tcp:// on one interface secured with ZeroMQ CURVE
 * when a lane runs elsewhere. Keys are made per run by rank 0, reach the agents over MPI and
 * the engines through a key file of mode 0600 (never argv, never the environment). */
#ifndef BK_TRANSPORT_H
#define BK_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "runner/status.h"

#define BK_Z85_KEY_LEN 41 /* a 32-byte CURVE key in Z85: 40 characters and a NUL */

typedef struct bk_curve_keys {
    char server_public[BK_Z85_KEY_LEN];
    char server_secret[BK_Z85_KEY_LEN]; /* rank 0 only: never sent, never written */
    char client_public[BK_Z85_KEY_LEN]; /* one client key pair per run, for its engines */
    char client_secret[BK_Z85_KEY_LEN];
} bk_curve_keys;

/* Where and how rank 0 listens. tcp = 0: ipc:// (the other fields unused). */
typedef struct bk_transport {
    int tcp;
    char iface[64];      /* the interface the address came from ("" when given as address) */
    char addr[64];       /* IPv4 address to bind */
    int port;            /* rendezvous port, samples on port + 1; 0: any free ports */
    bk_curve_keys keys;
} bk_transport;

/* What the transport dropped before the wire decoder saw anything. */
typedef struct bk_transport_stats {
    uint64_t auth_denied;       /* CURVE handshake done, client key not this run's (ZAP 400) */
    uint64_t handshake_failed;  /* garbage bytes, a wrong server key, another protocol */
} bk_transport_stats;

/* The transport of a run: ipc:// (t->tcp = 0) when every lane rank is on rank 0's host
 * (remote = 0) and no iface was asked for; otherwise tcp on iface (NULL: the first
 * interface that is up, not loopback and has an IPv4 address), port (0: any free), with
 * fresh CURVE keys. A port without tcp is BK_ERR_INPUT. */
bk_status bk_transport_pick(const char *iface, int port, int remote, bk_transport *t,
                            bk_err *err);

/* A fresh server and client key pair (zmq_curve_keypair). BK_ERR_UNSUPPORTED when this
 * libzmq has no CURVE. */
bk_status bk_curve_keys_new(bk_curve_keys *k, bk_err *err);

/* The IPv4 address of interface `iface` (getifaddrs), or with iface NULL or "" the first
 * interface that is up, not loopback and has one. Errors name the interface and list
 * those that exist. */
bk_status bk_iface_addr(const char *iface, char *addr, size_t addr_len, char *iface_out,
                        size_t iface_len, bk_err *err);

/* Write the engines' keys (server public, client public and secret) to a new file `path`
 * of mode 0600 (O_EXCL: an existing file is an error; the folder should be private). */
bk_status bk_keys_write(const char *path, const bk_curve_keys *k, bk_err *err);

/* Read a key file written by bk_keys_write. Refuses a file that is not a regular file
 * owned by this user with no group or other permission bits. server_secret is left "". */
bk_status bk_keys_read(const char *path, bk_curve_keys *k, bk_err *err);

/* Socket options: a CURVE server with the run's secret key (set before bind), or a CURVE
 * client that trusts only the run's server key (set before connect). */
bk_status bk_curve_server(void *sock, const bk_curve_keys *k, bk_err *err);
bk_status bk_curve_client(void *sock, const bk_curve_keys *k, bk_err *err);

/* Messages an engine's PUSH socket may queue: at about 2 KB a message of samples, some
 * 200 MB; far more than an arm of a normal plan sends. */
#define BK_PUSH_HWM 100000

/* Options of an engine's PUSH socket (set before connect). A send waits at most sndtimeo_ms
 * and only for a connection that has completed its handshake (ZMQ_IMMEDIATE): a coordinator
 * gone, or one that refuses this engine's key, is an EAGAIN after that bound. Over a completed
 * connection it queues up to BK_PUSH_HWM messages without waiting, so a coordinator that reads
 * nothing for a while (its process stopped, a debugger on rank 0) does not fail the engine.
 * linger_ms: how long the queue may wait at close. */
bk_status bk_push_opts(void *sock, int sndtimeo_ms, int linger_ms, bk_err *err);

/* A monitor of sock's events (`events`, a ZMQ_EVENT_* mask) through the inproc endpoint
 * `ep`: *mon, a PAIR socket (linger 0) to read them from with bk_monitor_event. 0, or -1
 * with zmq_errno() set and *mon NULL. Stop it with zmq_socket_monitor(sock, NULL, 0) or by
 * closing sock; close *mon before the context is terminated. */
int bk_monitor_open(void *zctx, void *sock, const char *ep, int events, void **mon);

/* The next event on mon (zmq_msg_recv flags: 0 or ZMQ_DONTWAIT): its ZMQ_EVENT_* number,
 * its endpoint frame read and dropped; -1 when none could be read. */
int bk_monitor_event(void *mon, int flags);

/* The disconnects (ZMQ_EVENT_DISCONNECTED) mon has reported, every event queued read,
 * waiting up to wait_ms for the first (an event its I/O thread has yet to post). */
int bk_monitor_drops(void *mon, int wait_ms);

#endif
