/* test_transport.c - the tcp transport: CURVE keys and key files (mode 0600 whatever the
 * umask; read back only as whole lines of 40 Z85 characters from a regular file of this user,
 * not a link, with no group or other bits), interface lookup (no name: never loopback), the
 * port a transport keeps, and the real coordinator over tcp with CURVE (a client with the
 * run's keys gets its samples in; a wrong client key is denied and counted; a foreign run id
 * is dropped and counted) and over ipc (garbage and foreign messages counted, never stored;
 * an audit's tensors checked against the target by name, dtype and length); its private
 * folder (in /tmp under a long TMPDIR, removed on close), a failed open giving its port
 * back, an address not on this host refused as input, and each tcp refusal counted once;
 * an engine's PUSH socket (bk_push_opts): it queues without waiting for a peer that reads
 * nothing, and waits its bound, queueing nothing, for a coordinator that refuses its key;
 * an engine's rendezvous over tcp whose connection broke says hello again on the new one.
 *
 * `test_transport serve ADDR PORT DIR RUN WORLD BOUND_S` is not a unit test: it is the
 * coordinator side of tests/integration/test_netns.sh (see there). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "collectives/collectives.h"
#include "kernels/catalog.h"
#include "runner/coordinator.h"
#include "runner/transport.h"
#include "runner/wire.h"

#include "coord_fixture.h"

#define RUN "test-transport-run"
#define ITERS 4
#define BOUND_NS 10000000000ull /* every wait below is bounded by this */

static char g_dir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bk-test-transport-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- keys and key files ---- */

static void test_key_file_roundtrip(void **state)
{
    (void)state;
    bk_curve_keys k, back;
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&k, &err), BK_OK);
    assert_int_equal(strlen(k.server_public), 40);
    assert_string_not_equal(k.server_public, k.client_public);
    char path[300];
    snprintf(path, sizeof path, "%s/keys", g_dir);
    assert_int_equal(bk_keys_write(path, &k, &err), BK_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);
    assert_int_equal(bk_keys_read(path, &back, &err), BK_OK);
    assert_string_equal(back.server_public, k.server_public);
    assert_string_equal(back.client_public, k.client_public);
    assert_string_equal(back.client_secret, k.client_secret);
    assert_string_equal(back.server_secret, ""); /* never written */
    /* never over an existing file */
    bk_err e2 = { 0 };
    assert_int_equal(bk_keys_write(path, &k, &e2), BK_ERR_SYSTEM);
    /* a key file others can read is refused, naming its mode */
    assert_int_equal(chmod(path, 0644), 0);
    bk_err e3 = { 0 };
    assert_int_equal(bk_keys_read(path, &back, &e3), BK_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "mode 0600 (it is 0644"));
    unlink(path);
}

static void test_key_file_garbage(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/bad", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("server_public=short\nclient_public=x\nclient_secret=y\n", f);
    fclose(f);
    chmod(path, 0600);
    bk_curve_keys k;
    bk_err err = { 0 };
    assert_int_equal(bk_keys_read(path, &k, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "40 Z85 characters"));
    unlink(path);
}

/* Write `text` to DIR/name with mode 0600; the path in path. */
static void write_file(char *path, size_t len, const char *name, const char *text)
{
    snprintf(path, len, "%s/%s", g_dir, name);
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0600), 0);
}

/* Read path: BK_ERR_INPUT with `want` in the message. */
static void refused(const char *path, const char *want)
{
    bk_curve_keys k;
    bk_err err = { 0 };
    const bk_status st = bk_keys_read(path, &k, &err);
    if (st != BK_ERR_INPUT)
        fail_msg("%s: status %d, not BK_ERR_INPUT (%s)", path, (int)st, err.msg);
    if (!strstr(err.msg, want))
        fail_msg("%s: '%s' does not say '%s'", path, err.msg, want);
}

/* Each key must be a whole line "name=<40 Z85 characters>\n"; the file must be a regular
 * file (not a link to one, not a folder) of this user with no group or other bits; a file
 * is written 0600 whatever the umask. */
static void test_key_file_strict(void **state)
{
    (void)state;
    bk_curve_keys k;
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&k, &err), BK_OK);
    char text[512], path[300];
    snprintf(text, sizeof text, "server_public=%s\nclient_public=%s\nclient_secret=%s\n",
             k.server_public, k.client_public, k.client_secret);
    write_file(path, sizeof path, "good", text);
    bk_curve_keys back;
    assert_int_equal(bk_keys_read(path, &back, &err), BK_OK);
    const char *const bad_keys = "40 Z85 characters";
    /* a name inside another word, or without '=' */
    snprintf(text, sizeof text, "xserver_public=%s\nclient_public=%s\nclient_secret=%s\n",
             k.server_public, k.client_public, k.client_secret);
    write_file(path, sizeof path, "prefixed", text);
    refused(path, bad_keys);
    snprintf(text, sizeof text, "server_public:%s\nclient_public=%s\nclient_secret=%s\n",
             k.server_public, k.client_public, k.client_secret);
    write_file(path, sizeof path, "colon", text);
    refused(path, bad_keys);
    /* 41 characters, and 40 that are not Z85 */
    snprintf(text, sizeof text, "server_public=%sA\nclient_public=%s\nclient_secret=%s\n",
             k.server_public, k.client_public, k.client_secret);
    write_file(path, sizeof path, "long", text);
    refused(path, bad_keys);
    snprintf(text, sizeof text, "server_public=%s\nclient_public=%s\nclient_secret=%s\n",
             "~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~", k.client_public, k.client_secret);
    write_file(path, sizeof path, "notz85", text);
    refused(path, bad_keys);

    /* a link to a good key file, a folder, group or other bits, another owner */
    char link[300], good[300];
    snprintf(good, sizeof good, "%s/good", g_dir);
    snprintf(link, sizeof link, "%s/link", g_dir);
    assert_int_equal(symlink(good, link), 0);
    refused(link, "symbolic links"); /* O_NOFOLLOW: ELOOP */
    refused(g_dir, "must be a regular file of this user with mode 0600");
    assert_int_equal(chmod(good, 0604), 0);
    refused(good, "mode 0600 (it is 0604");
    assert_int_equal(chmod(good, 0600), 0);
    if (geteuid() == 0) { /* only root can give a file away */
        assert_int_equal(chown(good, 65534, (gid_t)-1), 0);
        refused(good, "owner 65534");
    }

    /* written 0600 under a umask that would leave 0400 */
    const mode_t old = umask(0277);
    snprintf(path, sizeof path, "%s/written", g_dir);
    const bk_status st = bk_keys_write(path, &k, &err);
    umask(old);
    assert_int_equal(st, BK_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);
}

static void test_iface(void **state)
{
    (void)state;
    char addr[64], name[64];
    bk_err err = { 0 };
    assert_int_equal(bk_iface_addr("lo", addr, sizeof addr, name, sizeof name, &err), BK_OK);
    assert_string_equal(addr, "127.0.0.1");
    assert_string_equal(name, "lo");
    bk_err e2 = { 0 };
    assert_int_equal(bk_iface_addr("bk-no-such0", addr, sizeof addr, NULL, 0, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "--iface bk-no-such0: no such interface"));
    assert_non_null(strstr(e2.msg, "lo")); /* lists what exists */
    /* no name, NULL or "": the first interface that is up and not loopback (or, where there
     * is none, the same error for both) */
    char a1[64] = "", a2[64] = "", n1[64] = "", n2[64] = "";
    bk_err e3 = { 0 }, e4 = { 0 };
    const bk_status s1 = bk_iface_addr(NULL, a1, sizeof a1, n1, sizeof n1, &e3);
    const bk_status s2 = bk_iface_addr("", a2, sizeof a2, n2, sizeof n2, &e4);
    assert_int_equal(s1, s2);
    assert_string_equal(e3.msg, e4.msg);
    assert_string_equal(a1, a2);
    assert_string_equal(n1, n2);
    if (s1 == BK_OK) {
        assert_string_not_equal(n1, "lo");
        assert_int_not_equal(strncmp(a1, "127.", 4), 0);
    } else {
        assert_non_null(strstr(e3.msg, "no interface that is up, not loopback"));
    }
}

static void test_pick(void **state)
{
    (void)state;
    bk_transport t;
    bk_err err = { 0 };
    assert_int_equal(bk_transport_pick(NULL, 0, 0, &t, &err), BK_OK);
    assert_int_equal(t.tcp, 0); /* one host: ipc:// */
    assert_int_equal(bk_transport_pick("lo", 0, 0, &t, &err), BK_OK);
    assert_int_equal(t.tcp, 1);
    assert_string_equal(t.addr, "127.0.0.1");
    assert_int_equal(strlen(t.keys.server_secret), 40);
    assert_int_equal(t.port, 0);
    assert_int_equal(bk_transport_pick("lo", 5000, 0, &t, &err), BK_OK);
    assert_int_equal(t.port, 5000); /* kept for the bind: rendezvous 5000, samples 5001 */
    bk_err e2 = { 0 };
    assert_int_equal(bk_transport_pick(NULL, 5000, 0, &t, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "--port 5000: every rank is on this host"));
}

/* ---- the coordinator ---- */

typedef coord_fixture fixture;

static void open_coord(fixture *f, const bk_transport *t, int world)
{
    coord_fixture_open(f, RUN, 1, ITERS, t, world, 0);
}

static void close_coord(fixture *f) { coord_fixture_close(f); }

static void *push_to(fixture *f, const char *ep, const bk_curve_keys *k)
{
    void *s = zmq_socket(f->zctx, ZMQ_PUSH);
    int zero = 0;
    assert_non_null(s);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    bk_err err = { 0 };
    if (k)
        assert_int_equal(bk_curve_client(s, k, &err), BK_OK);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

/* A stranger: the run's server key, a client key pair of its own (the coordinator denies it). */
static bk_curve_keys stranger_of(const bk_curve_keys *run)
{
    bk_curve_keys k;
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&k, &err), BK_OK);
    memcpy(k.server_public, run->server_public, sizeof k.server_public);
    return k;
}

static void send_samples(void *s, const char *run, uint32_t rank)
{
    uint64_t ns[ITERS] = { 11, 12, 13, 14 };
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { run, "B", rank };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_samples(&b, &h, 0, 0, ns, ITERS, &err), BK_OK);
    assert_true(zmq_send(s, b.data, b.size, ZMQ_DONTWAIT) >= 0);
    bk_wire_buf_free(&b);
}

/* Poll until cond(f) holds, at most BOUND_NS. */
static int poll_until(fixture *f, int (*cond)(const fixture *))
{
    uint64_t end = bk_now_ns() + BOUND_NS;
    while (!cond(f) && bk_now_ns() < end)
        bk_coord_poll(f->c, 10);
    return cond(f);
}

static int got_rank0(const fixture *f) { return f->arm.r[0].samples_got == ITERS; }
static int denied(const fixture *f) { return bk_coord_transport_stats(f->c)->auth_denied >= 1; }
static int wrong_run(const fixture *f)
{
    return bk_coord_stats(f->c)->rejected[BK_REJ_WRONG_RUN] >= 1;
}
static int malformed(const fixture *f)
{
    return bk_coord_stats(f->c)->rejected[BK_REJ_MALFORMED] >= 1;
}

static void test_tcp_curve(void **state)
{
    (void)state;
    bk_transport t;
    memset(&t, 0, sizeof t);
    t.tcp = 1;
    bk_strlcpy(t.addr, "127.0.0.1", sizeof t.addr);
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&t.keys, &err), BK_OK);
    fixture f;
    open_coord(&f, &t, 1);
    const char *ep = bk_coord_samples_ep(f.c);
    assert_int_equal(strncmp(ep, "tcp://127.0.0.1:", 16), 0);

    /* a stranger: right server key, its own client key pair: denied, nothing stored */
    bk_curve_keys stranger = stranger_of(&t.keys);
    void *bad = push_to(&f, ep, &stranger);
    send_samples(bad, RUN, 0);
    assert_true(poll_until(&f, denied));
    assert_int_equal(f.arm.r[0].samples_got, 0);
    assert_true(bk_coord_stats(f.c)->rejected[BK_REJ_FOREIGN] >= 1);

    /* the run's own client: in */
    void *good = push_to(&f, ep, &t.keys);
    send_samples(good, RUN, 0);
    assert_true(poll_until(&f, got_rank0));
    assert_int_equal(f.arm.r[0].ns[0][3], 14);

    /* the run's keys, another run's id: dropped and counted */
    send_samples(good, "another-run", 0);
    assert_true(poll_until(&f, wrong_run));
    assert_int_equal(f.arm.r[0].samples_got, ITERS);
    zmq_close(bad);
    zmq_close(good);
    close_coord(&f);
}

static void test_tcp_port_taken(void **state)
{
    (void)state;
    bk_transport t;
    memset(&t, 0, sizeof t);
    t.tcp = 1;
    bk_strlcpy(t.addr, "127.0.0.1", sizeof t.addr);
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&t.keys, &err), BK_OK);
    fixture f;
    open_coord(&f, &t, 1);
    /* a second coordinator on the first one's port */
    const char *ep = bk_coord_rendezvous_ep(f.c);
    t.port = atoi(strrchr(ep, ':') + 1);
    bk_coord *c2 = NULL;
    bk_err e2 = { 0 };
    assert_int_equal(bk_coord_open_ex(&c2, RUN, 1, ITERS, 1, &t, &e2), BK_ERR_INPUT);
    assert_null(c2);
    char want[64];
    snprintf(want, sizeof want, "port %d on 127.0.0.1 is already in use", t.port);
    assert_non_null(strstr(e2.msg, want));
    close_coord(&f);
}

static void test_ipc_garbage_and_foreign(void **state)
{
    (void)state;
    fixture f;
    open_coord(&f, NULL, 2);
    assert_int_equal(strncmp(bk_coord_samples_ep(f.c), "ipc://", 6), 0);
    void *s = push_to(&f, bk_coord_samples_ep(f.c), NULL);
    assert_true(zmq_send(s, "\xc1\xc1garbage", 9, 0) == 9);
    assert_true(poll_until(&f, malformed));
    send_samples(s, "another-run", 1);
    assert_true(poll_until(&f, wrong_run));
    send_samples(s, RUN, 0);
    assert_true(poll_until(&f, got_rank0));
    assert_int_equal(f.arm.r[1].samples_got, 0);
    assert_int_equal(bk_coord_stats(f.c)->accepted, 1);
    zmq_close(s);
    close_coord(&f);
}

/* An audit's tensors are matched to their output by name and checked against the target:
 * an input's name, an unknown name, another dtype, another length or a second copy is
 * rejected and counted, never stored (before, the first free slot took whatever came). */
static int tensors_done(const fixture *f)
{
    const bk_wire_stats *ws = bk_coord_stats(f->c);
    return ws->accepted + ws->rejected[BK_REJ_BAD_FIELD] >= 7;
}

static void send_tensor(void *s, const char *name, const char *dtype, unsigned char fill,
                        size_t len)
{
    unsigned char data[64];
    memset(data, fill, sizeof data);
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "A", 0 };
    bk_err err = { 0 };
    assert_int_equal(bk_wire_tensor(&b, &h, 0, name, dtype, data, len, &err), BK_OK);
    assert_true(zmq_send(s, b.data, b.size, 0) >= 0);
    bk_wire_buf_free(&b);
}

static void test_ipc_audit_tensors(void **state)
{
    (void)state;
    const bk_target *tg = bk_catalog_target("collective.allreduce_residual_rmsnorm");
    assert_non_null(tg);
    const bk_shape shape = { .tokens = 2, .hidden = 8, .weight = 1 }; /* 16 bf16: 32 bytes */
    fixture f;
    memset(&f, 0, sizeof f);
    bk_err err = { 0 };
    assert_int_equal(bk_coord_open(&f.c, RUN, 1, 1, 2, &err), BK_OK);
    assert_int_equal(bk_coord_set_outputs(f.c, tg, &shape, "bf16", &err), BK_OK);
    f.arm.idx = BK_ARM_IDX_A;
    f.arm.name = "A";
    f.arm.audit = 1;
    f.arm.world = 1;
    f.arm.r = calloc(1, sizeof *f.arm.r);
    f.arm.lane = calloc(1, sizeof *f.arm.lane);
    assert_non_null(f.arm.r);
    assert_int_equal(bk_coord_begin_arm(f.c, &f.arm, &err), BK_OK);
    f.zctx = zmq_ctx_new();
    void *s = push_to(&f, bk_coord_samples_ep(f.c), NULL);
    send_tensor(s, "x", "bf16", 1, 32);             /* an input */
    send_tensor(s, "nope", "bf16", 2, 32);          /* no such output */
    send_tensor(s, "residual_out", "fp32", 3, 32);  /* not the plan's dtype */
    send_tensor(s, "residual_out", "bf16", 4, 31);  /* not the shape's length */
    send_tensor(s, "residual_out", "bf16", 5, 32);  /* good: output 1, sent first */
    send_tensor(s, "residual_out", "bf16", 6, 32);  /* a second copy */
    send_tensor(s, "out", "bf16", 7, 32);           /* good: output 0 */
    assert_true(poll_until(&f, tensors_done));
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    assert_int_equal(ws->accepted, 2);
    assert_int_equal(ws->rejected[BK_REJ_BAD_FIELD], 5);
    const bk_rank_data *d = &f.arm.r[0];
    assert_non_null(d->tensors[0]);
    assert_non_null(d->tensors[1]);
    assert_int_equal(d->tensor_len[0], 32);
    assert_int_equal(d->tensor_len[1], 32);
    assert_int_equal(((unsigned char *)d->tensors[0])[31], 7);
    assert_int_equal(((unsigned char *)d->tensors[1])[0], 5);
    zmq_close(s);
    zmq_ctx_term(f.zctx);
    bk_arm_free(&f.arm, 1, 2);
    bk_coord_close(f.c);
}

/* ---- the coordinator's own folder, ports and refusal counts ---- */

static void tcp_loopback(bk_transport *t)
{
    memset(t, 0, sizeof *t);
    t->tcp = 1;
    bk_strlcpy(t->addr, "127.0.0.1", sizeof t->addr);
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&t->keys, &err), BK_OK);
}

/* ipc:// paths must stay short: under a TMPDIR longer than 80 characters the coordinator's
 * folder is made in /tmp instead; bk_coord_close removes the folder and its sockets. */
static void test_ipc_folder(void **state)
{
    (void)state;
    char longdir[200];
    int n = snprintf(longdir, sizeof longdir, "%s/", g_dir);
    while (n < 90)
        longdir[n++] = 'd';
    longdir[n] = '\0';
    assert_int_equal(mkdir(longdir, 0700), 0);
    const char *old = getenv("TMPDIR");
    char saved[256] = "";
    if (old)
        bk_strlcpy(saved, old, sizeof saved);
    assert_int_equal(setenv("TMPDIR", longdir, 1), 0);
    bk_coord *c = NULL;
    bk_err err = { 0 };
    const bk_status st = bk_coord_open(&c, RUN, 1, ITERS, 1, &err);
    if (old)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    assert_int_equal(st, BK_OK);
    const char *ep = bk_coord_samples_ep(c);
    assert_int_equal(strncmp(ep, "ipc:///tmp/bracket-", 19), 0);
    char dir[256];
    bk_strlcpy(dir, ep + 6, sizeof dir);
    *strrchr(dir, '/') = '\0';
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    bk_coord_close(c);
    assert_int_equal(stat(dir, &sb), -1); /* gone, with its sockets */
    assert_int_equal(rmdir(longdir), 0);  /* and nothing was left in the long TMPDIR */
}

/* A plain TCP socket bound to 127.0.0.1:port, listening; -1 when taken. */
static int tcp_hold(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A coordinator that fails to bind its samples port (PORT + 1 taken) gives back the
 * rendezvous port it had bound: the same port can be used again at once. */
static void test_tcp_failed_open_releases(void **state)
{
    (void)state;
    bk_transport t;
    tcp_loopback(&t);
    int held = -1, port = 0;
    for (int p = 20000; p < 20400 && held < 0; p += 2) { /* below the ephemeral range */
        int a = tcp_hold(p);
        if (a < 0)
            continue;
        held = tcp_hold(p + 1);
        close(a);
        port = p;
    }
    assert_true(held >= 0);
    t.port = port;
    bk_coord *c = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_coord_open_ex(&c, RUN, 1, ITERS, 1, &t, &err), BK_ERR_INPUT);
    assert_null(c);
    char want[64];
    snprintf(want, sizeof want, "port %d on 127.0.0.1 is already in use", port + 1);
    assert_non_null(strstr(err.msg, want));
    int again = tcp_hold(port);
    assert_true(again >= 0); /* the rendezvous socket was closed */
    close(again);
    close(held);
    assert_int_equal(bk_coord_open_ex(&c, RUN, 1, ITERS, 1, &t, &err), BK_OK);
    bk_coord_close(c);
}

/* An address this host does not have is the user's to fix (BK_ERR_INPUT), named. */
static void test_tcp_foreign_addr(void **state)
{
    (void)state;
    bk_transport t;
    tcp_loopback(&t);
    bk_strlcpy(t.addr, "198.51.100.7", sizeof t.addr); /* TEST-NET-2: never assigned */
    bk_coord *c = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_coord_open_ex(&c, RUN, 1, ITERS, 1, &t, &err), BK_ERR_INPUT);
    assert_null(c);
    assert_non_null(strstr(err.msg, "cannot bind tcp://198.51.100.7:*"));
}

/* Poll for `ms` milliseconds (what was in flight gets counted). */
static void poll_for(fixture *f, int ms)
{
    uint64_t end = bk_now_ns() + (uint64_t)ms * 1000000ull;
    while (bk_now_ns() < end)
        bk_coord_poll(f->c, 10);
}

/* Refusals over tcp are counted once each, as what they are: a denied client key is
 * FOREIGN (auth_denied) and not also a failed handshake; a good client is neither; bytes
 * that are not ZMTP at either port are a failed handshake, counted as MALFORMED. */
static void test_tcp_refusal_counts(void **state)
{
    (void)state;
    bk_transport t;
    tcp_loopback(&t);
    fixture f;
    open_coord(&f, &t, 1);
    const bk_transport_stats *ts = bk_coord_transport_stats(f.c);
    const bk_wire_stats *ws = bk_coord_stats(f.c);
    const char *ep = bk_coord_samples_ep(f.c);

    /* a stranger (the run's server key, another client pair), one attempt only */
    bk_curve_keys stranger = stranger_of(&t.keys);
    bk_err err = { 0 };
    void *bad = zmq_socket(f.zctx, ZMQ_PUSH);
    assert_non_null(bad);
    int zero = 0, never = -1;
    zmq_setsockopt(bad, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(bad, ZMQ_RECONNECT_IVL, &never, sizeof never);
    assert_int_equal(bk_curve_client(bad, &stranger, &err), BK_OK);
    assert_int_equal(zmq_connect(bad, ep), 0);
    send_samples(bad, RUN, 0);
    assert_true(poll_until(&f, denied));
    poll_for(&f, 300);
    assert_int_equal(ts->auth_denied, 1);
    assert_int_equal(ts->handshake_failed, 0);
    assert_int_equal(ws->rejected[BK_REJ_FOREIGN], 1);
    assert_int_equal(ws->rejected[BK_REJ_MALFORMED], 0);
    assert_int_equal(ws->accepted, 0); /* denied means nothing of it got in */
    assert_int_equal(f.arm.r[0].samples_got, 0);
    zmq_close(bad);

    /* the run's client: its samples in, nothing refused */
    void *good = push_to(&f, ep, &t.keys);
    send_samples(good, RUN, 0);
    assert_true(poll_until(&f, got_rank0));
    poll_for(&f, 300);
    assert_int_equal(ts->auth_denied, 1);
    assert_int_equal(ts->handshake_failed, 0);
    assert_int_equal(ws->rejected[BK_REJ_MALFORMED], 0);
    zmq_close(good);

    /* garbage at the samples port, then at the rendezvous port */
    const char *eps[2] = { ep, bk_coord_rendezvous_ep(f.c) };
    for (uint64_t i = 0; i < 2; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = { .sin_family = AF_INET };
        a.sin_port = htons((uint16_t)atoi(strrchr(eps[i], ':') + 1));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
        assert_true(write(fd, junk, sizeof junk - 1) > 0);
        uint64_t want = i + 1;
        uint64_t end = bk_now_ns() + BOUND_NS;
        while (ts->handshake_failed < want && bk_now_ns() < end)
            bk_coord_poll(f.c, 10);
        close(fd);
        poll_for(&f, 200);
        assert_int_equal(ts->handshake_failed, want);
        assert_int_equal(ws->rejected[BK_REJ_MALFORMED], want);
    }
    assert_int_equal(ts->auth_denied, 1);
    assert_int_equal(f.arm.r[0].samples_got, ITERS);
    close_coord(&f);
}

/* ---- an engine's rendezvous over tcp (collectives/rendezvous.c) ---- */

typedef struct rv_call {
    void *zctx;
    char ep[128];
    const bk_curve_keys *keys;
    unsigned char blobs[1][BK_BLOB_MAX];
    size_t lens[1];
    bk_err err;
    bk_status st;
} rv_call;

static void *rv_thread(void *p)
{
    rv_call *c = p;
    c->st = bk_rendezvous_secure(c->zctx, c->ep, c->keys, RUN, "B", 0, 1, "mine", 4, c->blobs,
                                 c->lens, 20.0, &c->err);
    return NULL;
}

/* A CURVE ROUTER bound to ep (tcp://127.0.0.1:* when NULL: then ep_out is where), trying
 * for up to 5 s while the port is still taken by the one just closed. */
static void *router_at(void *zctx, const bk_curve_keys *k, const char *ep, char *ep_out,
                       size_t n)
{
    void *r = zmq_socket(zctx, ZMQ_ROUTER);
    int zero = 0, ms = 5000;
    bk_err err = { 0 };
    assert_non_null(r);
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &ms, sizeof ms);
    assert_int_equal(bk_curve_server(r, k, &err), BK_OK);
    int rc = -1;
    for (int i = 0; i < 500 && (rc = zmq_bind(r, ep ? ep : "tcp://127.0.0.1:*")) != 0; i++)
        usleep(10000);
    assert_int_equal(rc, 0);
    if (ep_out)
        assert_int_equal(zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep_out, &n), 0);
    return r;
}

/* A hello from lane rank 0 of arm B on router r within 5 s: its routing id into id (the
 * size returned); 0 when none came. */
static size_t hello_on(void *r, unsigned char *id, size_t idn)
{
    int n = zmq_recv(r, id, idn, 0);
    if (n <= 0)
        return 0;
    unsigned char body[512];
    bk_wire_decoder *dec = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_wire_decoder_new(&dec, &err), BK_OK);
    bk_msg m;
    bk_wire_expect x = { RUN, "B", 1, 0 };
    assert_int_equal(coord_fixture_recv(r, dec, &x, body, sizeof body, &m), 0);
    assert_int_equal(m.type, BK_MSG_HELLO);
    assert_int_equal(m.pid, getpid());
    assert_int_equal(m.blob_len, 4);
    assert_memory_equal(m.blob, "mine", 4);
    bk_wire_decoder_free(dec);
    return (size_t)n;
}

/* The connection to the rendezvous breaks after the hello (rank 0's side closes, and comes
 * back on the same port, as a reset would leave it): the engine says hello again on the new
 * connection, and takes the answer given there. Without the hello again it would wait its
 * time-out: nothing would come to the new side. */
static void test_rendezvous_hello_again(void **state)
{
    (void)state;
    bk_curve_keys keys;
    bk_err err = { 0 };
    assert_int_equal(bk_curve_keys_new(&keys, &err), BK_OK);
    void *zctx = zmq_ctx_new(), *sctx = zmq_ctx_new(); /* the engine's, rank 0's */
    assert_non_null(zctx);
    assert_non_null(sctx);
    static rv_call c;
    memset(&c, 0, sizeof c);
    c.zctx = zctx;
    c.keys = &keys;
    void *r1 = router_at(sctx, &keys, NULL, c.ep, sizeof c.ep);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, rv_thread, &c), 0);
    unsigned char id[256];
    assert_true(hello_on(r1, id, sizeof id) > 0);
    zmq_close(r1); /* the connection broke, the hello's answer not given */
    void *r2 = router_at(sctx, &keys, c.ep, NULL, 0);
    const size_t idn = hello_on(r2, id, sizeof id);
    assert_true(idn > 0); /* said again on the new connection */
    const void *blobs[1] = { "yours" };
    const size_t lens[1] = { 5 };
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "B", 0 };
    assert_int_equal(bk_wire_peers(&b, &h, 1, blobs, lens, &err), BK_OK);
    assert_true(zmq_send(r2, id, idn, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(r2, b.data, b.size, 0) >= 0);
    bk_wire_buf_free(&b);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (c.st != BK_OK)
        fail_msg("rendezvous: %s", c.err.msg);
    assert_int_equal(c.lens[0], 5);
    assert_memory_equal(c.blobs[0], "yours", 5);
    zmq_close(r2);
    zmq_ctx_term(sctx);
    zmq_ctx_term(zctx);
}

/* ---- an engine's PUSH socket (bk_push_opts) ---- */

#define PUSH_N 3000      /* three times libzmq's default high-water mark of 1000 */
#define PUSH_BYTES 4096  /* 12 MB in all: more than a unix socket's buffers hold */

/* A peer that reads nothing (a rank 0 stopped): every send is queued at once, none waits or
 * fails, and once the peer reads it gets them all, in order. */
static void test_push_queues_while_unread(void **state)
{
    (void)state;
    void *zctx = zmq_ctx_new();
    assert_non_null(zctx);
    char ep[300];
    snprintf(ep, sizeof ep, "ipc://%s/push-q", g_dir);
    void *pull = zmq_socket(zctx, ZMQ_PULL), *push = zmq_socket(zctx, ZMQ_PUSH);
    assert_non_null(pull);
    assert_non_null(push);
    int one = 1, zero = 0, rcvtimeo = 10000;
    zmq_setsockopt(pull, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
    assert_int_equal(zmq_bind(pull, ep), 0);
    bk_err err = { 0 };
    assert_int_equal(bk_push_opts(push, 10000, 0, &err), BK_OK);
    assert_int_equal(zmq_connect(push, ep), 0);
    static unsigned char msg[PUSH_BYTES];
    for (uint32_t i = 0; i < PUSH_N; i++) {
        memcpy(msg, &i, sizeof i);
        /* the first waits for the connection; the rest may not wait at all */
        int rc = zmq_send(push, msg, sizeof msg, i ? ZMQ_DONTWAIT : 0);
        if (rc != (int)sizeof msg)
            fail_msg("send %u of %d: %s", i, PUSH_N, zmq_strerror(zmq_errno()));
    }
    static unsigned char got[PUSH_BYTES + 1];
    for (uint32_t i = 0; i < PUSH_N; i++) {
        int rc = zmq_recv(pull, got, sizeof got, 0);
        if (rc != PUSH_BYTES)
            fail_msg("message %u of %d: %d bytes (%s)", i, PUSH_N, rc, zmq_strerror(zmq_errno()));
        uint32_t k;
        memcpy(&k, got, sizeof k);
        assert_int_equal(k, i);
    }
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(zctx);
}

/* A coordinator that refuses the key: nothing is queued for it, a send waits its bound and
 * fails (EAGAIN), and the coordinator stores nothing of it; the run's key gets in. */
static void test_push_refused_waits(void **state)
{
    (void)state;
    bk_transport t;
    tcp_loopback(&t);
    fixture f;
    open_coord(&f, &t, 1);
    const char *ep = bk_coord_samples_ep(f.c);
    bk_err err = { 0 };
    bk_curve_keys stranger = stranger_of(&t.keys);
    void *bad = zmq_socket(f.zctx, ZMQ_PUSH);
    assert_non_null(bad);
    assert_int_equal(bk_push_opts(bad, 300, 0, &err), BK_OK);
    assert_int_equal(bk_curve_client(bad, &stranger, &err), BK_OK);
    assert_int_equal(zmq_connect(bad, ep), 0);
    assert_true(poll_until(&f, denied));
    uint64_t ns[ITERS] = { 1, 2, 3, 4 };
    bk_wire_buf b = { 0 };
    bk_wire_hdr h = { RUN, "B", 0 };
    assert_int_equal(bk_wire_samples(&b, &h, 0, 0, ns, ITERS, &err), BK_OK);
    assert_int_equal(zmq_send(bad, b.data, b.size, ZMQ_DONTWAIT), -1);
    assert_int_equal(zmq_errno(), EAGAIN);
    uint64_t t0 = bk_now_ns();
    assert_int_equal(zmq_send(bad, b.data, b.size, 0), -1); /* waits its 300 ms */
    assert_int_equal(zmq_errno(), EAGAIN);
    assert_true(bk_now_ns() - t0 >= 250000000ull);

    void *good = zmq_socket(f.zctx, ZMQ_PUSH);
    assert_non_null(good);
    assert_int_equal(bk_push_opts(good, 300, 0, &err), BK_OK);
    assert_int_equal(bk_curve_client(good, &t.keys, &err), BK_OK);
    assert_int_equal(zmq_connect(good, ep), 0);
    uint64_t end = bk_now_ns() + BOUND_NS;
    int sent = -1;
    while (sent < 0 && bk_now_ns() < end) { /* the coordinator's poll answers the handshake */
        bk_coord_poll(f.c, 10);
        sent = zmq_send(good, b.data, b.size, ZMQ_DONTWAIT);
    }
    assert_int_equal(sent, (int)b.size);
    assert_true(poll_until(&f, got_rank0));
    poll_for(&f, 200);
    assert_int_equal(f.arm.r[0].samples_got, ITERS); /* the good one's, none of the bad's */
    assert_int_equal(f.arm.r[0].ns[0][3], 4);
    bk_wire_buf_free(&b);
    zmq_close(bad);
    zmq_close(good);
    close_coord(&f);
}

/* ---- `serve`: the coordinator of test_netns.sh ---- */

static int all_status(const fixture *f) { return bk_coord_all_status(f->c); }

/* Bind ADDR:PORT with fresh keys, write DIR/keys (the run's), DIR/stranger (another client
 * pair) and DIR/wrongserver (a wrong server key), print "ready", serve arm B of RUN for
 * WORLD ranks until every rank's status or BOUND_S; print what arrived and what was
 * refused. Exit 0 when every rank sent all its samples. */
static int serve(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: test_transport serve ADDR PORT DIR RUN WORLD BOUND_S\n");
        return 2;
    }
    bk_transport t;
    memset(&t, 0, sizeof t);
    t.tcp = 1;
    bk_strlcpy(t.addr, argv[2], sizeof t.addr);
    t.port = atoi(argv[3]);
    const char *dir = argv[4], *run = argv[5];
    int world = atoi(argv[6]);
    double bound = atof(argv[7]);
    bk_err err = { 0 };
    bk_curve_keys other, wrong;
    char path[512];
    if (bk_curve_keys_new(&t.keys, &err) != BK_OK || bk_curve_keys_new(&other, &err) != BK_OK ||
        bk_curve_keys_new(&wrong, &err) != BK_OK)
        goto fail;
    memcpy(other.server_public, t.keys.server_public, sizeof other.server_public);
    memcpy(wrong.client_public, t.keys.client_public, sizeof wrong.client_public);
    memcpy(wrong.client_secret, t.keys.client_secret, sizeof wrong.client_secret);
    snprintf(path, sizeof path, "%s/keys", dir);
    if (bk_keys_write(path, &t.keys, &err) != BK_OK)
        goto fail;
    snprintf(path, sizeof path, "%s/stranger", dir);
    if (bk_keys_write(path, &other, &err) != BK_OK)
        goto fail;
    snprintf(path, sizeof path, "%s/wrongserver", dir);
    if (bk_keys_write(path, &wrong, &err) != BK_OK)
        goto fail;
    /* the netns plan: it-cpu.json, 2 shapes x 200 iterations */
    bk_coord *c = NULL;
    if (bk_coord_open_ex(&c, run, 2, 200, 1, &t, &err) != BK_OK)
        goto fail;
    bk_arm_run arm;
    memset(&arm, 0, sizeof arm);
    arm.name = "B";
    arm.world = world;
    arm.r = calloc((size_t)world, sizeof *arm.r);
    arm.lane = calloc((size_t)world, sizeof *arm.lane);
    if (!arm.r || !arm.lane || bk_coord_begin_arm(c, &arm, &err) != BK_OK)
        goto fail;
    printf("ready %s %s\n", bk_coord_rendezvous_ep(c), bk_coord_samples_ep(c));
    fflush(stdout);
    fixture f = { .c = c };
    uint64_t end = bk_now_ns() + (uint64_t)(bound * 1e9);
    while (!all_status(&f) && bk_now_ns() < end)
        bk_coord_poll(c, 50);
    uint64_t grace = bk_now_ns() + 2000000000ull; /* late refusals still get counted */
    while (bk_now_ns() < grace)
        bk_coord_poll(c, 50);
    int ok = 1;
    for (int r = 0; r < world; r++) {
        printf("rank %d samples %llu status %d\n", r, (unsigned long long)arm.r[r].samples_got,
               arm.r[r].status_ok);
        ok = ok && arm.r[r].samples_got == 400 && arm.r[r].status_ok;
    }
    const bk_transport_stats *ts = bk_coord_transport_stats(c);
    const bk_wire_stats *ws = bk_coord_stats(c);
    printf("auth_denied %llu handshake_failed %llu wrong_run %llu accepted %llu\n",
           (unsigned long long)ts->auth_denied, (unsigned long long)ts->handshake_failed,
           (unsigned long long)ws->rejected[BK_REJ_WRONG_RUN], (unsigned long long)ws->accepted);
    bk_arm_free(&arm, 2, 1);
    bk_coord_close(c);
    return ok ? 0 : 1;
fail:
    fprintf(stderr, "test_transport serve: %s\n", err.msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "serve"))
        return serve(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_file_roundtrip),
        cmocka_unit_test(test_key_file_garbage),
        cmocka_unit_test(test_key_file_strict),
        cmocka_unit_test(test_iface),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_tcp_curve),
        cmocka_unit_test(test_tcp_port_taken),
        cmocka_unit_test(test_ipc_garbage_and_foreign),
        cmocka_unit_test(test_ipc_audit_tensors),
        cmocka_unit_test(test_ipc_folder),
        cmocka_unit_test(test_tcp_failed_open_releases),
        cmocka_unit_test(test_tcp_foreign_addr),
        cmocka_unit_test(test_tcp_refusal_counts),
        cmocka_unit_test(test_push_queues_while_unread),
        cmocka_unit_test(test_push_refused_waits),
        cmocka_unit_test(test_rendezvous_hello_again),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
