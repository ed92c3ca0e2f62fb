/* test_wire.c - bracket.wire/1: every type round-trips, and every kind of bad input is
 * rejected with the right reason, counted once, without crashing the decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "runner/wire.h"

/* ---- fixture: a decoder, its stats, and what it expects ---- */

typedef struct fx {
    bk_wire_decoder *d;
    bk_wire_stats stats;
    bk_wire_expect expect;
    bk_wire_buf buf;
    bk_msg msg;
    bk_err err;
    bk_wire_reject reason;
} fx;

static const bk_wire_hdr HDR = { "run-7f3a", "B", 1 };

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(bk_wire_decoder_new(&f->d, &f->err), BK_OK);
    f->expect = (bk_wire_expect){ "run-7f3a", "B", 4, 3 };
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    bk_wire_decoder_free(f->d);
    bk_wire_buf_free(&f->buf);
    free(f);
    return 0;
}

static uint64_t total(const bk_wire_stats *s)
{
    uint64_t t = s->accepted;
    for (int i = 0; i < BK_REJ_COUNT; i++)
        t += s->rejected[i];
    return t;
}

/* Decode and check that exactly one counter moved, the right one. */
static bk_status decode(fx *f, const void *p, size_t n)
{
    bk_wire_stats before = f->stats;
    f->reason = BK_REJ_COUNT;
    bk_status st = bk_wire_decode(f->d, p, n, &f->expect, &f->msg, &f->stats, &f->reason,
                                  &f->err);
    assert_int_equal(total(&f->stats), total(&before) + 1);
    if (st == BK_OK) {
        assert_int_equal(f->stats.accepted, before.accepted + 1);
    } else {
        assert_int_equal(st, BK_ERR_PEER);
        assert_true(f->reason < BK_REJ_COUNT);
        assert_int_equal(f->stats.rejected[f->reason], before.rejected[f->reason] + 1);
        assert_true(f->err.msg[0] != '\0');
    }
    return st;
}

static void expect_reject(fx *f, const void *p, size_t n, bk_wire_reject why, const char *says)
{
    assert_int_equal(decode(f, p, n), BK_ERR_PEER);
    if (f->reason != why)
        fail_msg("rejected as %s, expected %s: %s", bk_wire_reject_name(f->reason),
                 bk_wire_reject_name(why), f->err.msg);
    if (says && !strstr(f->err.msg, says))
        fail_msg("error '%s' does not mention '%s'", f->err.msg, says);
}

/* ---- a tiny builder for hand-made maps: "key:T=value" per entry ----
 * T: s str, u uint, i int, b bin (the value's bytes), B bool, n nil,
 *    A array of integers "1,2,-3", S array of str. */

static void pack_spec(msgpack_packer *pk, const char *spec)
{
    const char *colon = strchr(spec, ':');
    assert_non_null(colon);
    const char *v = colon + 3; /* past ":T=" */
    msgpack_pack_str_with_body(pk, spec, (size_t)(colon - spec));
    switch (colon[1]) {
    case 's': msgpack_pack_str_with_body(pk, v, strlen(v)); break;
    case 'u': msgpack_pack_uint64(pk, strtoull(v, NULL, 10)); break;
    case 'i': msgpack_pack_int64(pk, strtoll(v, NULL, 10)); break;
    case 'b': msgpack_pack_bin_with_body(pk, v, strlen(v)); break;
    case 'B': v[0] == '1' ? msgpack_pack_true(pk) : msgpack_pack_false(pk); break;
    case 'n': msgpack_pack_nil(pk); break;
    case 'A': {
        size_t n = *v ? 1 : 0;
        for (const char *c = v; *c; c++)
            n += *c == ',';
        msgpack_pack_array(pk, n);
        for (char *c = (char *)v; n--; c++) {
            long long x = strtoll(c, &c, 10);
            x < 0 ? msgpack_pack_int64(pk, x) : msgpack_pack_uint64(pk, (uint64_t)x);
        }
        break;
    }
    default: fail_msg("bad spec %s", spec);
    }
}

/* Build a map of the NULL-terminated specs into `sb` (cleared first). */
static void mk(msgpack_sbuffer *sb, ...)
{
    va_list ap;
    size_t n = 0;
    va_start(ap, sb);
    while (va_arg(ap, const char *))
        n++;
    va_end(ap);
    msgpack_sbuffer_clear(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, n);
    va_start(ap, sb);
    for (const char *s; (s = va_arg(ap, const char *));)
        pack_spec(&pk, s);
    va_end(ap);
}

#define H_SCHEMA "schema:s=bracket.wire/1"
#define H_REST "run:s=run-7f3a", "arm:s=B", "rank:u=1"
#define SAMPLES_OK H_SCHEMA, "type:s=samples", H_REST, "shape:u=2", "first:u=10"

/* ---- round trips ---- */

static void test_roundtrip_samples(void **state)
{
    fx *f = *state;
    uint64_t ns[1024];
    for (size_t i = 0; i < 1024; i++)
        ns[i] = i * 2654435761ull % 100000;
    ns[0] = 0;
    ns[1] = UINT64_MAX;
    ns[2] = 127;
    ns[3] = 128;
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 2, 12345, ns, 1024, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.type, BK_MSG_SAMPLES);
    assert_string_equal(f->msg.run, "run-7f3a");
    assert_string_equal(f->msg.arm, "B");
    assert_int_equal(f->msg.rank, 1);
    assert_int_equal(f->msg.shape, 2);
    assert_int_equal(f->msg.first, 12345);
    assert_int_equal(f->msg.n, 1024);
    assert_memory_equal(f->msg.ns, ns, sizeof ns);
    /* an empty batch is a valid message too */
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 0, 0, NULL, 0, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.n, 0);
}

static void test_roundtrip_hello_peers(void **state)
{
    fx *f = *state;
    const char blob[] = "nccl-unique-id\0with-a-nul";
    assert_int_equal(bk_wire_hello(&f->buf, &HDR, 4, -12, blob, sizeof blob, &f->err), BK_OK);
    /* decoded blobs are the decoder's copies: scribbling over the input must not matter */
    char *copy = malloc(f->buf.size);
    memcpy(copy, f->buf.data, f->buf.size);
    assert_int_equal(decode(f, copy, f->buf.size), BK_OK);
    memset(copy, 0xAA, f->buf.size);
    assert_int_equal(f->msg.type, BK_MSG_HELLO);
    assert_int_equal(f->msg.world, 4);
    assert_int_equal(f->msg.pid, -12);
    assert_int_equal(f->msg.blob_len, sizeof blob);
    assert_memory_equal(f->msg.blob, blob, sizeof blob);
    free(copy);

    const char *b[4] = { "a", "", "ccc", "dddd" };
    size_t l[4] = { 1, 0, 3, 4 };
    assert_int_equal(bk_wire_peers(&f->buf, &HDR, 4, (const void *const *)b, l, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.type, BK_MSG_PEERS);
    assert_int_equal(f->msg.world, 4);
    assert_int_equal(f->msg.nblobs, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(f->msg.blob_lens[i], l[i]);
        assert_memory_equal(f->msg.blobs[i], b[i], l[i]);
    }
}

static void test_roundtrip_tensor_status(void **state)
{
    fx *f = *state;
    float data[5] = { 1.5f, -2.0f, 0.0f, 3.25f, 1e-3f };
    assert_int_equal(bk_wire_tensor(&f->buf, &HDR, 1, "out", "f32", data, sizeof data, &f->err),
                     BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.type, BK_MSG_TENSOR);
    assert_int_equal(f->msg.shape, 1);
    assert_string_equal(f->msg.name, "out");
    assert_string_equal(f->msg.dtype, "f32");
    assert_int_equal(f->msg.data_len, sizeof data);
    assert_memory_equal(f->msg.data, data, sizeof data);

    assert_int_equal(bk_wire_status(&f->buf, &HDR, 0, -5, "nccl: unhandled cuda error", 77,
                                    INT64_MAX + 9ull, "gate=1 settle=32", UINT64_MAX, &f->err),
                     BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.type, BK_MSG_STATUS);
    assert_int_equal(f->msg.ok, 0);
    assert_int_equal(f->msg.code, -5);
    assert_string_equal(f->msg.message, "nccl: unhandled cuda error");
    assert_int_equal(f->msg.samples, 77);
    assert_true(f->msg.t_first_ns == INT64_MAX + 9ull);
    assert_string_equal(f->msg.settings, "gate=1 settle=32");
    assert_true(f->msg.routed == UINT64_MAX); /* every one of 64 shapes routed */
    assert_int_equal(bk_wire_status(&f->buf, &HDR, 1, 0, "", 0, 0, "", 0, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.ok, 1);
    assert_string_equal(f->msg.message, "");
    assert_string_equal(f->msg.settings, "");
    assert_true(f->msg.routed == 0);
}

/* Encoders refuse what the decoder would reject; a long status message is cut. */
static void test_encoder_limits(void **state)
{
    fx *f = *state;
    char longrun[BK_RUN_ID_LEN + 1];
    memset(longrun, 'r', sizeof longrun - 1);
    longrun[sizeof longrun - 1] = '\0';
    bk_wire_hdr h = { longrun, "B", 0 };
    assert_int_equal(bk_wire_samples(&f->buf, &h, 0, 0, NULL, 0, &f->err), BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "run"));
    bk_err_clear(&f->err);
    char msg[700];
    memset(msg, 'm', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    assert_int_equal(bk_wire_status(&f->buf, &HDR, 1, 0, msg, 0, 0, "", 0, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(strlen(f->msg.message), sizeof f->msg.message - 1);
}

/* ---- rejections ---- */

static void test_truncations_and_trailing(void **state)
{
    fx *f = *state;
    uint64_t ns[300];
    for (int i = 0; i < 300; i++)
        ns[i] = (uint64_t)i * 1000003u;
    bk_wire_buf bufs[3] = { { 0 } };
    const char *b[4] = { "w", "x", "y", "z" };
    size_t l[4] = { 1, 1, 1, 1 };
    assert_int_equal(bk_wire_samples(&bufs[0], &HDR, 0, 0, ns, 300, &f->err), BK_OK);
    assert_int_equal(bk_wire_peers(&bufs[1], &HDR, 4, (const void *const *)b, l, &f->err),
                     BK_OK);
    assert_int_equal(bk_wire_status(&bufs[2], &HDR, 1, 3, "fine", 9, 1, "", 5, &f->err), BK_OK);
    for (int m = 0; m < 3; m++) {
        for (size_t len = 0; len < bufs[m].size; len++) {
            expect_reject(f, bufs[m].data, len, BK_REJ_MALFORMED, NULL);
            /* still usable after every rejection */
            if (len % 97 == 0)
                assert_int_equal(decode(f, bufs[m].data, bufs[m].size), BK_OK);
        }
        char *more = malloc(bufs[m].size + 1);
        memcpy(more, bufs[m].data, bufs[m].size);
        more[bufs[m].size] = (char)0xc0; /* a nil after the map */
        expect_reject(f, more, bufs[m].size + 1, BK_REJ_MALFORMED, "trailing");
        free(more);
        bk_wire_buf_free(&bufs[m]);
    }
}

static void test_not_a_map_and_huge_claims(void **state)
{
    fx *f = *state;
    const unsigned char arr[] = { 0x92, 0x01, 0x02 };
    expect_reject(f, arr, sizeof arr, BK_REJ_MALFORMED, "not a map");
    /* an array32 claiming 2^32-1 elements in 5 bytes: rejected before any allocation */
    const unsigned char big[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
    expect_reject(f, big, sizeof big, BK_REJ_MALFORMED, "claims more elements");
    const unsigned char bigmap[] = { 0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa1, 0x61 };
    expect_reject(f, bigmap, sizeof bigmap, BK_REJ_MALFORMED, NULL);
    const unsigned char c1[] = { 0xc1 };
    expect_reject(f, c1, sizeof c1, BK_REJ_MALFORMED, NULL);
    expect_reject(f, "", 0, BK_REJ_MALFORMED, NULL);
    /* nested deeper than msgpack-c's unpack stack */
    unsigned char deep[80];
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0x01;
    expect_reject(f, deep, sizeof deep, BK_REJ_MALFORMED, NULL);
}

static void test_schema_run_arm_rank(void **state)
{
    fx *f = *state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    mk(&sb, "type:s=samples", H_REST, "shape:u=0", "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_FOREIGN, "schema");
    mk(&sb, "schema:s=bracket.wire/2", "type:s=samples", H_REST, "shape:u=0", "first:u=0",
       "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_FOREIGN, "schema");
    mk(&sb, "schema:u=1", "type:s=samples", H_REST, "shape:u=0", "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_FOREIGN, NULL);
    mk(&sb, H_SCHEMA, "type:s=samples", "run:s=run-other", "arm:s=B", "rank:u=1", "shape:u=0",
       "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_WRONG_RUN, "run-other");
    mk(&sb, H_SCHEMA, "type:s=samples", "run:s=run-7f3a", "arm:s=C", "rank:u=1", "shape:u=0",
       "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_WRONG_ARM, "'C'");
    mk(&sb, H_SCHEMA, "type:s=samples", "run:s=run-7f3a", "arm:s=B", "rank:u=4", "shape:u=0",
       "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_RANK, "rank 4");
    /* a hello's own world bounds its rank too */
    f->expect.world = 0;
    mk(&sb, H_SCHEMA, "type:s=hello", "run:s=run-7f3a", "arm:s=B", "rank:u=2", "world:u=2",
       "pid:i=5", "blob:b=x", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_RANK, NULL);
    /* with no expectations, any run and arm pass */
    f->expect = (bk_wire_expect){ NULL, "", 0, 0 };
    mk(&sb, H_SCHEMA, "type:s=samples", "run:s=zzz", "arm:s=C", "rank:u=9", "shape:u=7",
       "first:u=0", "ns:A=1", NULL);
    assert_int_equal(decode(f, sb.data, sb.size), BK_OK);
    msgpack_sbuffer_destroy(&sb);
}

static void test_bad_fields(void **state)
{
    fx *f = *state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    mk(&sb, SAMPLES_OK, "ns:A=5,-3,7", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'ns' must be an array of unsigned");
    mk(&sb, SAMPLES_OK, "ns:u=5", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'ns'");
    mk(&sb, SAMPLES_OK, NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'ns' is missing");
    mk(&sb, H_SCHEMA, "type:s=samples", "run:u=7", "arm:s=B", "rank:u=1", "shape:u=0",
       "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'run' must be a string");
    mk(&sb, H_SCHEMA, "type:s=samples", H_REST, "shape:u=3", "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'shape'");
    mk(&sb, H_SCHEMA, "type:s=samples", H_REST, "shape:i=-1", "first:u=0", "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'shape'");
    mk(&sb, H_SCHEMA, "type:s=samples", H_REST, "rank:u=1", "shape:u=0", "first:u=0",
       "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "twice");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:u=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "settings:s=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'ok' must be a bool");
    mk(&sb, H_SCHEMA, "type:s=tensor", H_REST, "shape:u=0",
       "name:s=a-name-far-too-long-for-32-bytes", "dtype:s=f32", "data:b=xx", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'name'");
    mk(&sb, H_SCHEMA, "type:s=frobnicate", H_REST, NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_UNKNOWN_TYPE, "frobnicate");
    mk(&sb, H_SCHEMA, "type:s=peers", H_REST, "world:u=4", "blobs:A=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "0 blobs for a world of 4");
    msgpack_sbuffer_destroy(&sb);
}

/* A run id one byte too long is rejected, never cut to fit (a cut id could
 * match another run's). */
static void test_oversized_run(void **state)
{
    fx *f = *state;
    char spec[16 + BK_RUN_ID_LEN];
    strcpy(spec, "run:s=");
    memset(spec + 6, 'r', BK_RUN_ID_LEN);
    spec[6 + BK_RUN_ID_LEN] = '\0';
    f->expect.run = NULL;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    mk(&sb, H_SCHEMA, "type:s=samples", spec, "arm:s=B", "rank:u=1", "shape:u=0", "first:u=0",
       "ns:A=1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'run' is 96 bytes");
    spec[6 + BK_RUN_ID_LEN - 1] = '\0'; /* 95 bytes: fits */
    mk(&sb, H_SCHEMA, "type:s=samples", spec, "arm:s=B", "rank:u=1", "shape:u=0", "first:u=0",
       "ns:A=1", NULL);
    assert_int_equal(decode(f, sb.data, sb.size), BK_OK);
    assert_int_equal(strlen(f->msg.run), BK_RUN_ID_LEN - 1);
    msgpack_sbuffer_destroy(&sb);
}

static void test_unknown_keys_ignored(void **state)
{
    fx *f = *state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    mk(&sb, "future:A=1,2", SAMPLES_OK, "ns:A=4,5,6", "x-note:s=hi", NULL);
    assert_int_equal(decode(f, sb.data, sb.size), BK_OK);
    assert_int_equal(f->msg.n, 3);
    assert_int_equal(f->msg.ns[2], 6);
    assert_int_equal(f->msg.first, 10);
    msgpack_sbuffer_destroy(&sb);
}

/* hello / peers carry their own world: it must be 1..BK_WIRE_MAX_PEERS and this run's. */
static void test_world_checks(void **state)
{
    fx *f = *state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    mk(&sb, H_SCHEMA, "type:s=hello", H_REST, "world:u=3", "pid:i=5", "blob:b=x", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "this run's world is 4");
    mk(&sb, H_SCHEMA, "type:s=hello", H_REST, "world:u=4", "pid:s=5", "blob:b=x", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'pid' must be an integer");
    mk(&sb, H_SCHEMA, "type:s=hello", H_REST, "world:u=4", "pid:i=5", "blob:s=x", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'blob' must be bin");
    f->expect.world = 0;
    mk(&sb, H_SCHEMA, "type:s=peers", H_REST, "world:u=0", "blobs:A=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "outside 1..1024");
    mk(&sb, H_SCHEMA, "type:s=peers", H_REST, "world:u=1025", "blobs:A=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "outside 1..1024");
    mk(&sb, H_SCHEMA, "type:s=peers", H_REST, "world:u=2", "blobs:A=1,2", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "element 0 is an unsigned integer");
    mk(&sb, H_SCHEMA, "type:s=tensor", H_REST, "shape:u=3", "name:s=o", "dtype:s=f32",
       "data:b=xx", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'shape' is 3");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=-2", "message:s=x",
       "samples:i=-1", "t_first_ns:u=0", "settings:s=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'samples'");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "routed:u=0", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'settings' is missing");
    /* what the engine served with the incumbent: required, an unsigned bit mask */
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "settings:s=", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "status: field 'routed' is missing");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "settings:s=", "routed:i=-1", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'routed'");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "settings:u=3", "routed:u=0", NULL);
    expect_reject(f, sb.data, sb.size, BK_REJ_BAD_FIELD, "'settings' must be a string");
    mk(&sb, H_SCHEMA, "type:s=status", H_REST, "ok:B=1", "code:i=0", "message:s=x",
       "samples:u=0", "t_first_ns:u=0", "settings:s=settle=32", "routed:u=5", NULL);
    assert_int_equal(decode(f, sb.data, sb.size), BK_OK);
    assert_string_equal(f->msg.settings, "settle=32");
    assert_true(f->msg.routed == 5);
    msgpack_sbuffer_destroy(&sb);
}

static void test_encoder_input_errors(void **state)
{
    fx *f = *state;
    const void *b[BK_WIRE_MAX_PEERS + 1] = { 0 };
    size_t l[BK_WIRE_MAX_PEERS + 1] = { 0 };
    assert_int_equal(bk_wire_peers(&f->buf, &HDR, BK_WIRE_MAX_PEERS + 1, b, l, &f->err),
                     BK_ERR_INPUT);
    bk_err_clear(&f->err);
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 0, 0, NULL, 5, &f->err), BK_ERR_INPUT);
    bk_err_clear(&f->err);
    uint64_t one = 1;
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 0, UINT64_MAX, &one, 1, &f->err), BK_OK);
    uint64_t two[2] = { 1, 2 };
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 0, UINT64_MAX, two, 2, &f->err),
                     BK_ERR_INPUT);
    bk_err_clear(&f->err);
    assert_int_equal(bk_wire_tensor(&f->buf, &HDR, 0, "a-name-far-too-long-for-32-bytes!", "f32",
                                    "x", 1, &f->err), BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "name"));
    bk_err_clear(&f->err);
    /* more data than one message carries: refused, naming the tensor, before anything is read
     * (a message over the coordinator's limit would be dropped by ZeroMQ, saying nothing) */
    assert_int_equal(bk_wire_tensor(&f->buf, &HDR, 0, "out", "bf16", "x",
                                    (size_t)BK_WIRE_TENSOR_MAX + 1, &f->err), BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "wire: tensor 'out' of 1073737729 bytes is more than one "
                                       "message carries"));
    bk_err_clear(&f->err);
    bk_wire_hdr longarm = { "run-7f3a", "B-prime!", 0 };
    assert_int_equal(bk_wire_status(&f->buf, &longarm, 1, 0, "", 0, 0, "", 0, &f->err), BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "arm"));
    bk_err_clear(&f->err);
    char longset[sizeof f->msg.settings + 1];
    memset(longset, 's', sizeof longset - 1);
    longset[sizeof longset - 1] = '\0';
    assert_int_equal(bk_wire_status(&f->buf, &HDR, 1, 0, "", 0, 0, longset, 0, &f->err),
                     BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "engine settings"));
    bk_err_clear(&f->err);
    assert_int_equal(bk_wire_status(&f->buf, &HDR, 1, 0, "", 0, 0, NULL, 0, &f->err), BK_ERR_INPUT);
    assert_non_null(strstr(f->err.msg, "engine settings"));
}

/* A status message over the limit is cut on a UTF-8 boundary, never inside a character. */
static void test_status_message_cut_utf8(void **state)
{
    fx *f = *state;
    char m[600];
    size_t cap = sizeof f->msg.message - 1; /* 511 */
    memset(m, 'a', cap - 1);
    memcpy(m + cap - 1, "\xc3\xa9tail", 7); /* an e-acute straddles the limit */
    assert_int_equal(bk_wire_status(&f->buf, &HDR, 1, 0, m, 0, 0, "", 0, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(strlen(f->msg.message), cap - 1);
    assert_memory_equal(f->msg.message, m, cap - 1);
}

/* A big message grows the decoder's storage; smaller ones after it still decode, and
 * the decoder works with no stats, reason or err to fill. */
static void test_big_then_small(void **state)
{
    fx *f = *state;
    size_t big = 50000;
    uint64_t *ns = malloc(big * sizeof *ns);
    for (size_t i = 0; i < big; i++)
        ns[i] = i * 40503u;
    f->expect.max_shapes = 0;
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 9, 0, ns, big, &f->err), BK_OK);
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_int_equal(f->msg.n, big);
    assert_memory_equal(f->msg.ns, ns, big * sizeof *ns);
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 1, 7, ns + 5, 16, &f->err), BK_OK);
    assert_int_equal(bk_wire_decode(f->d, f->buf.data, f->buf.size, NULL, &f->msg, NULL, NULL,
                                    NULL), BK_OK);
    assert_int_equal(f->msg.n, 16);
    assert_memory_equal(f->msg.ns, ns + 5, 16 * sizeof *ns);
    assert_int_equal(bk_wire_decode(f->d, "\x01", 1, NULL, &f->msg, NULL, NULL, NULL),
                     BK_ERR_PEER);
    free(ns);
}

/* ---- fuzz: random bytes, and random corruptions of valid messages ---- */

static uint64_t rnd(uint64_t *s) /* xorshift64: a fixed, portable sequence */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
#define RND() rnd(&seed)

static void test_fuzz(void **state)
{
    fx *f = *state;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    unsigned char junk[512];
    bk_wire_stats start = f->stats;
    int n_junk = 20000, n_mut = 20000;
    for (int i = 0; i < n_junk; i++) {
        size_t len = RND() % sizeof junk;
        for (size_t j = 0; j < len; j++)
            junk[j] = (unsigned char)RND();
        decode(f, junk, len);
    }
    assert_int_equal(f->stats.accepted, start.accepted);
    uint64_t ns[64];
    for (int i = 0; i < 64; i++)
        ns[i] = (uint64_t)i * 977;
    assert_int_equal(bk_wire_samples(&f->buf, &HDR, 1, 5, ns, 64, &f->err), BK_OK);
    unsigned char *m = malloc(f->buf.size);
    for (int i = 0; i < n_mut; i++) {
        memcpy(m, f->buf.data, f->buf.size);
        for (int k = 1 + (int)(RND() % 4); k > 0; k--) {
            size_t at = RND() % f->buf.size;
            m[at] = (unsigned char)RND();
        }
        decode(f, m, f->buf.size);
    }
    free(m);
    assert_int_equal(total(&f->stats) - total(&start), (uint64_t)(n_junk + n_mut));
    assert_true(f->stats.rejected[BK_REJ_MALFORMED] > start.rejected[BK_REJ_MALFORMED]);
    /* still decodes a good message */
    assert_int_equal(decode(f, f->buf.data, f->buf.size), BK_OK);
    assert_memory_equal(f->msg.ns, ns, sizeof ns);
#undef RND
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_samples, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_hello_peers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_tensor_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoder_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncations_and_trailing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_map_and_huge_claims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_run_arm_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_keys_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_world_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoder_input_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_message_cut_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_then_small, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fuzz, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
