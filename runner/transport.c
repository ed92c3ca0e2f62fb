/* transport.c - CURVE keys, key files of mode 0600, and the interface address for tcp. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "runner/transport.h"

bk_status bk_curve_keys_new(bk_curve_keys *k, bk_err *err)
{
    memset(k, 0, sizeof *k);
    if (!zmq_has("curve"))
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "this libzmq has no CURVE security: tcp "
                       "transport refused (rebuild libzmq with libsodium)");
    if (zmq_curve_keypair(k->server_public, k->server_secret) != 0 ||
        zmq_curve_keypair(k->client_public, k->client_secret) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "zmq_curve_keypair: %s", zmq_strerror(zmq_errno()));
    return BK_OK;
}

bk_status bk_iface_addr(const char *iface, char *addr, size_t addr_len, char *iface_out,
                        size_t iface_len, bk_err *err)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "getifaddrs: %s", strerror(errno));
    bk_status st = BK_OK;
    char seen[512] = "";
    size_t slen = 0;
    const struct ifaddrs *hit = NULL;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        int n = snprintf(seen + slen, sizeof seen - slen, "%s%s", slen ? ", " : "", i->ifa_name);
        if (n > 0 && (size_t)n < sizeof seen - slen)
            slen += (size_t)n;
        if (iface && *iface) {
            if (!strcmp(i->ifa_name, iface)) {
                hit = i;
                break;
            }
        } else if ((i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
            hit = i;
            break;
        }
    }
    if (!hit) {
        st = iface && *iface
                 ? BK_FAIL(err, BK_ERR_INPUT, "--iface %s: no such interface with an IPv4 "
                           "address (interfaces with one: %s)", iface, seen[0] ? seen : "none")
                 : BK_FAIL(err, BK_ERR_INPUT, "no interface that is up, not loopback and has "
                           "an IPv4 address (have: %s); name one with --iface",
                           seen[0] ? seen : "none");
        goto out;
    }
    const struct sockaddr_in *in = (const struct sockaddr_in *)hit->ifa_addr;
    if (!inet_ntop(AF_INET, &in->sin_addr, addr, (socklen_t)addr_len)) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "inet_ntop: %s", strerror(errno));
        goto out;
    }
    if (iface_out)
        bk_strlcpy(iface_out, hit->ifa_name, iface_len);
out:
    freeifaddrs(all);
    return st;
}

bk_status bk_keys_write(const char *path, const bk_curve_keys *k, bk_err *err)
{
    bk_status st = BK_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "key file %s: %s", path, strerror(errno));
    char text[256];
    int n = snprintf(text, sizeof text, "server_public=%s\nclient_public=%s\nclient_secret=%s\n",
                     k->server_public, k->client_public, k->client_secret);
    /* the umask could only narrow 0600; fchmod makes it exact */
    if (fchmod(fd, 0600) != 0 || write(fd, text, (size_t)n) != (ssize_t)n || fsync(fd) != 0)
        st = BK_FAIL(err, BK_ERR_SYSTEM, "key file %s: %s", path, strerror(errno));
    if (close(fd) != 0 && st == BK_OK)
        st = BK_FAIL(err, BK_ERR_SYSTEM, "key file %s: %s", path, strerror(errno));
    memset(text, 0, sizeof text);
    if (st != BK_OK)
        unlink(path);
    return st;
}

static int take_key(const char *text, const char *name, char out[BK_Z85_KEY_LEN])
{
    const char *p = strstr(text, name);
    if (!p || (p != text && p[-1] != '\n'))
        return -1;
    p += strlen(name);
    if (*p++ != '=')
        return -1;
    uint8_t bin[32];
    memcpy(out, p, BK_Z85_KEY_LEN - 1);
    out[BK_Z85_KEY_LEN - 1] = '\0';
    if (strlen(out) != BK_Z85_KEY_LEN - 1 || p[BK_Z85_KEY_LEN - 1] != '\n' ||
        !zmq_z85_decode(bin, out))
        return -1;
    return 0;
}

bk_status bk_keys_read(const char *path, bk_curve_keys *k, bk_err *err)
{
    bk_status st = BK_OK;
    memset(k, 0, sizeof *k);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return BK_FAIL(err, BK_ERR_INPUT, "key file %s: %s", path, strerror(errno));
    struct stat sb;
    char text[512];
    ssize_t n = 0;
    if (fstat(fd, &sb) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "key file %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077)) {
        st = BK_FAIL(err, BK_ERR_INPUT, "key file %s: must be a regular file of this user "
                     "with mode 0600 (it is %04o, owner %d)", path, (unsigned)(sb.st_mode & 07777),
                     (int)sb.st_uid);
        goto out;
    }
    n = read(fd, text, sizeof text - 1);
    if (n < 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "key file %s: %s", path, strerror(errno));
        goto out;
    }
    text[n] = '\0';
    if (take_key(text, "server_public", k->server_public) != 0 ||
        take_key(text, "client_public", k->client_public) != 0 ||
        take_key(text, "client_secret", k->client_secret) != 0)
        st = BK_FAIL(err, BK_ERR_INPUT, "key file %s: expected server_public, client_public and "
                     "client_secret lines of 40 Z85 characters", path);
out:
    memset(text, 0, sizeof text);
    close(fd);
    return st;
}

bk_status bk_curve_server(void *sock, const bk_curve_keys *k, bk_err *err)
{
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->server_secret, BK_Z85_KEY_LEN - 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "bracket", 7) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "CURVE server options: %s", zmq_strerror(zmq_errno()));
    return BK_OK;
}

bk_status bk_curve_client(void *sock, const bk_curve_keys *k, bk_err *err)
{
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, k->server_public, BK_Z85_KEY_LEN - 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->client_public, BK_Z85_KEY_LEN - 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->client_secret, BK_Z85_KEY_LEN - 1) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "CURVE client options: %s", zmq_strerror(zmq_errno()));
    return BK_OK;
}

bk_status bk_push_opts(void *sock, int sndtimeo_ms, int linger_ms, bk_err *err)
{
    int one = 1, hwm = BK_PUSH_HWM;
    if (zmq_setsockopt(sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms) != 0 ||
        zmq_setsockopt(sock, ZMQ_SNDTIMEO, &sndtimeo_ms, sizeof sndtimeo_ms) != 0 ||
        zmq_setsockopt(sock, ZMQ_IMMEDIATE, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "push socket options: %s", zmq_strerror(zmq_errno()));
    return BK_OK;
}

int bk_monitor_open(void *zctx, void *sock, const char *ep, int events, void **mon)
{
    int zero = 0;
    *mon = NULL;
    if (zmq_socket_monitor(sock, ep, events) != 0 || !(*mon = zmq_socket(zctx, ZMQ_PAIR)))
        return -1;
    if (zmq_setsockopt(*mon, ZMQ_LINGER, &zero, sizeof zero) != 0 || zmq_connect(*mon, ep) != 0) {
        const int e = zmq_errno();
        zmq_close(*mon);
        *mon = NULL;
        errno = e;
        return -1;
    }
    return 0;
}

int bk_monitor_event(void *mon, int flags)
{
    int id = -1;
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, flags) >= 0) {
        if (zmq_msg_size(&ev) >= 2) { /* the event's number (16 bits), then its value */
            uint16_t n;
            memcpy(&n, zmq_msg_data(&ev), sizeof n);
            id = n;
        }
        while (zmq_msg_more(&ev)) { /* the endpoint frame */
            zmq_msg_close(&ev);
            zmq_msg_init(&ev);
            if (zmq_msg_recv(&ev, mon, 0) < 0)
                break;
        }
    }
    zmq_msg_close(&ev);
    return id;
}

int bk_monitor_drops(void *mon, int wait_ms)
{
    int n = 0, id;
    zmq_pollitem_t it = { mon, 0, ZMQ_POLLIN, 0 };
    while (zmq_poll(&it, 1, n ? 0 : wait_ms) > 0 && (id = bk_monitor_event(mon, ZMQ_DONTWAIT)) >= 0)
        n += id == ZMQ_EVENT_DISCONNECTED;
    return n;
}

bk_status bk_transport_pick(const char *iface, int port, int remote, bk_transport *t,
                            bk_err *err)
{
    bk_status st = BK_OK;
    memset(t, 0, sizeof *t);
    if (!remote && !iface) {
        if (port)
            return BK_FAIL(err, BK_ERR_INPUT, "--port %d: every rank is on this host, which "
                           "uses ipc:// (give --iface too for tcp)", port);
        return BK_OK;
    }
    t->tcp = 1;
    t->port = port;
    BK_TRY(bk_iface_addr(iface, t->addr, sizeof t->addr, t->iface, sizeof t->iface, err));
    BK_TRY(bk_curve_keys_new(&t->keys, err));
out:
    return st;
}
