/* test_wire_bounds.c - the edges of the bracket.wire/1 decoder: the bounds pre-pass says why
 * and where a buffer is not one whole msgpack object (and never reads past its end), and the
 * header and fields are held exactly: the schema and type by their whole text, a string with
 * a NUL byte, a pid past int64, a world at BK_WIRE_MAX_PEERS, a batch whose iterations
 * overflow. Messages are packed by hand, so they can be what the encoder never writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "runner/wire.h"

/* ---- the pre-pass ---- */

/* bk_wire_scan_next over the first `len` bytes of `buf` (which may hold more, so that a
 * scan reading past `len` would find bytes there) fails with `why` at `at`. */
static void scan_fails(const char *buf, size_t len, const char *why, size_t at)
{
    size_t used = 99, bad = 99;
    const char *w = NULL;
    assert_int_equal(bk_wire_scan_next(buf, len, &used, &w, &bad), -1);
    assert_non_null(w);
    assert_string_equal(w, why);
    assert_int_equal(bad, at);
}

static void scan_ok(const char *buf, size_t len, size_t want_used)
{
    size_t used = 0, bad = 0;
    const char *w = NULL;
    assert_int_equal(bk_wire_scan_next(buf, len, &used, &w, &bad), 0);
    assert_int_equal(used, want_used);
}

static void test_scan_edges(void **state)
{
    (void)state;
    /* nothing at all, and an element cut short inside an array */
    scan_fails("\x01", 0, "truncated", 0);
    scan_fails("\x91\xcd\x01\x02", 3, "truncated", 1);
    /* a uint16 and a float64 with their payloads cut (the bytes after len are not theirs) */
    scan_fails("\xcd\x01\x02\x03", 2, "truncated", 0);
    scan_fails("\xcb\x00\x00\x00\x00\x00\x00\x00\x00\x00", 2, "truncated", 0);
    scan_fails("\xa3" "ab", 3, "truncated", 0);
    /* a container claiming more elements than there are bytes is said so, at its header */
    scan_fails("\x92\x01", 2, "container claims more elements than bytes", 0);
    scan_fails("\x81\x01", 2, "container claims more elements than bytes", 0);
    scan_fails("\xc1", 1, "reserved byte 0xc1", 0);
    /* fixext 1..16: a type byte and 1, 2, 4, 8, 16 bytes; ext 8: length, type, payload */
    scan_ok("\xd4\x01\x05\xc0", 4, 3);
    scan_ok("\xd5\x01\x05\x06\xc0", 5, 4);
    scan_ok("\xd8\x01" "0123456789abcdef" "\xc0", 19, 18);
    scan_ok("\xc7\x02\x01xy\xc0", 6, 5);
    scan_ok("\x92\xcd\x01\x02\xcb\x00\x00\x00\x00\x00\x00\x00\x00", 13, 13);
    scan_ok("\x82\x01\x02\x03\x04", 5, 5);
}

/* ---- header and fields ---- */

typedef struct msg {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} msg;

static void begin(msg *m, uint32_t nkeys)
{
    msgpack_sbuffer_init(&m->sb);
    msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
    msgpack_pack_map(&m->pk, nkeys);
}

static void key(msg *m, const char *k, size_t n) { msgpack_pack_str_with_body(&m->pk, k, n); }
static void str(msg *m, const char *k, const char *v, size_t n)
{
    key(m, k, strlen(k));
    msgpack_pack_str_with_body(&m->pk, v, n);
}
static void put_uint(msg *m, const char *k, uint64_t v)
{
    key(m, k, strlen(k));
    msgpack_pack_uint64(&m->pk, v);
}

/* schema, type, run, arm, rank: 5 keys */
static void header(msg *m, const char *schema, size_t slen, const char *type, size_t tlen,
                   const char *run, size_t rlen, uint32_t rank)
{
    str(m, "schema", schema, slen);
    str(m, "type", type, tlen);
    str(m, "run", run, rlen);
    str(m, "arm", "B", 1);
    put_uint(m, "rank", rank);
}

/* Decode m (then free it): BK_OK, or the reject reason with `says` in the message. */
static void expect(msg *m, const bk_wire_expect *x, int ok, bk_wire_reject why, const char *says)
{
    bk_wire_decoder *d = NULL;
    bk_err err = { 0 };
    bk_msg out;
    bk_wire_reject r = BK_REJ_COUNT;
    assert_int_equal(bk_wire_decoder_new(&d, &err), BK_OK);
    bk_status st = bk_wire_decode(d, m->sb.data, m->sb.size, x, &out, NULL, &r, &err);
    msgpack_sbuffer_destroy(&m->sb);
    bk_wire_decoder_free(d);
    if (ok) {
        if (st != BK_OK)
            fail_msg("expected accepted, got %s: %s", bk_wire_reject_name(r), err.msg);
        return;
    }
    assert_int_equal(st, BK_ERR_PEER);
    if (r != why || !strstr(err.msg, says))
        fail_msg("expected %s \"%s\", got %s \"%s\"", bk_wire_reject_name(why), says,
                 bk_wire_reject_name(r), err.msg);
}

#define S(lit) lit, sizeof lit - 1

static void test_header_exact(void **state)
{
    (void)state;
    msg m;
    /* a schema or type that is only a prefix of the real one is not it */
    begin(&m, 5);
    header(&m, S("bracket.wire/"), S("samples"), S("r1"), 0);
    expect(&m, NULL, 0, BK_REJ_FOREIGN, "'schema' is not \"bracket.wire/1\"");
    begin(&m, 5 + 3);
    header(&m, S("bracket.wire/1"), S("sample"), S("r1"), 0);
    put_uint(&m, "shape", 0);
    put_uint(&m, "first", 0);
    key(&m, S("ns"));
    msgpack_pack_array(&m.pk, 0);
    expect(&m, NULL, 0, BK_REJ_UNKNOWN_TYPE, "unknown type 'sample'");
    /* a string holding a NUL byte is refused, never cut at it */
    begin(&m, 5);
    header(&m, S("bracket.wire/1"), S("status"), S("r1\0x"), 0);
    expect(&m, NULL, 0, BK_REJ_BAD_FIELD, "field 'run' holds a NUL byte");
    /* a key with a NUL after a known name is another key: ignored */
    begin(&m, 5 + 4);
    header(&m, S("bracket.wire/1"), S("samples"), S("r1"), 0);
    key(&m, S("type\0"));
    msgpack_pack_str_with_body(&m.pk, "x", 1);
    put_uint(&m, "shape", 0);
    put_uint(&m, "first", 0);
    key(&m, S("ns"));
    msgpack_pack_array(&m.pk, 0);
    expect(&m, NULL, 1, BK_REJ_COUNT, "");
}

static void hello(msg *m, uint32_t world, uint64_t pid)
{
    begin(m, 5 + 3);
    header(m, S("bracket.wire/1"), S("hello"), S("r1"), 0);
    put_uint(m, "world", world);
    put_uint(m, "pid", pid);
    key(m, S("blob"));
    msgpack_pack_bin_with_body(&m->pk, "b", 1);
}

static void test_field_limits(void **state)
{
    (void)state;
    msg m;
    /* pid is an int64: 2^63 is above it, not a negative pid */
    hello(&m, 2, (uint64_t)INT64_MAX + 1);
    expect(&m, NULL, 0, BK_REJ_BAD_FIELD, "field 'pid' is 9223372036854775808, above its limit");
    hello(&m, 2, (uint64_t)INT64_MAX);
    expect(&m, NULL, 1, BK_REJ_COUNT, "");
    /* a world of BK_WIRE_MAX_PEERS is a world; one more is not */
    hello(&m, BK_WIRE_MAX_PEERS, 7);
    expect(&m, NULL, 1, BK_REJ_COUNT, "");
    hello(&m, BK_WIRE_MAX_PEERS + 1, 7);
    expect(&m, NULL, 0, BK_REJ_BAD_FIELD, "field 'world' is 1025, outside 1..1024");
    /* peers carries exactly one blob per rank of its world */
    begin(&m, 5 + 2);
    header(&m, S("bracket.wire/1"), S("peers"), S("r1"), 0);
    put_uint(&m, "world", 2);
    key(&m, S("blobs"));
    msgpack_pack_array(&m.pk, 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_bin_with_body(&m.pk, "b", 1);
    expect(&m, NULL, 0, BK_REJ_BAD_FIELD, "peers: field 'blobs' holds 3 blobs for a world of 2");
    /* a batch whose last iteration would pass UINT64_MAX */
    begin(&m, 5 + 3);
    header(&m, S("bracket.wire/1"), S("samples"), S("r1"), 0);
    put_uint(&m, "shape", 0);
    put_uint(&m, "first", UINT64_MAX);
    key(&m, S("ns"));
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_uint64(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, 2);
    expect(&m, NULL, 0, BK_REJ_BAD_FIELD, "samples: iterations 18446744073709551615 + 2 overflow");
    begin(&m, 5 + 3);
    header(&m, S("bracket.wire/1"), S("samples"), S("r1"), 0);
    put_uint(&m, "shape", 0);
    put_uint(&m, "first", UINT64_MAX);
    key(&m, S("ns"));
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_uint64(&m.pk, 1);
    expect(&m, NULL, 1, BK_REJ_COUNT, "");
    /* a rank equal to this run's world */
    const bk_wire_expect x = { "r1", "B", 2, 0 };
    begin(&m, 5 + 3);
    header(&m, S("bracket.wire/1"), S("samples"), S("r1"), 2);
    put_uint(&m, "shape", 0);
    put_uint(&m, "first", 0);
    key(&m, S("ns"));
    msgpack_pack_array(&m.pk, 0);
    expect(&m, &x, 0, BK_REJ_BAD_RANK, "samples: rank 2 is not below this run's world 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_edges),
        cmocka_unit_test(test_header_exact),
        cmocka_unit_test(test_field_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
