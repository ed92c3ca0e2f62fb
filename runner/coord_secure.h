/* coord_secure.h - private to the coordinator: its tcp side. CURVE server options, the ZAP
 * handler that passes only the run's client key, handshake monitors that count refused
 * connections, and binding with a clear error for a port in use. */
#ifndef BK_COORD_SECURE_H
#define BK_COORD_SECURE_H

#include <stddef.h>

#include "runner/transport.h"
#include "runner/wire.h"

typedef struct bk_coord_sec bk_coord_sec; /* opaque */

/* Make router and pull CURVE servers with t->keys, bind the ZAP handler in zctx (before
 * any client can meet them) and monitor both sockets' handshakes. */
bk_status bk_coord_sec_open(bk_coord_sec **out, void *zctx, void *router, void *pull,
                            const bk_transport *t, bk_err *err);

/* Bind sock to t->addr:port (any free port when t->port is 0) and write the endpoint
 * bound to ep. EADDRINUSE is BK_ERR_INPUT naming the port and the interface. */
bk_status bk_coord_sec_bind(void *sock, const bk_transport *t, int port, char *ep, size_t len,
                            bk_err *err);

/* The ZAP and monitor sockets, for the coordinator's zmq_poll (3 items). */
void bk_coord_sec_pollitems(const bk_coord_sec *s, void *items);

/* Answer queued ZAP requests and count monitor events; refusals are added to
 * stats->rejected (auth: FOREIGN, failed handshakes: MALFORMED). Never blocks. */
void bk_coord_sec_serve(bk_coord_sec *s, bk_wire_stats *stats);

const bk_transport_stats *bk_coord_sec_stats(const bk_coord_sec *s);

/* Close the ZAP and monitor sockets (before the context is terminated). NULL is fine. */
void bk_coord_sec_close(bk_coord_sec *s);

#endif
