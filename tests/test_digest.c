/* test_digest.c - SHA-256 against the FIPS 180-4 / NIST example vectors and hashlib's digests at
 * the padding edges, streaming, and files (one past a read buffer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/digest.h"

static const char *ABC = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *EMPTY = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
static const char *M448 = "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
static const char *M896 = "sha256:cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1";
static const char *MILLION_A =
    "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
static const char *T448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char *T896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                          "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

static void test_fips_vectors(void **state)
{
    (void)state;
    char out[BK_SHA256_HEX_LEN];
    bk_sha256_hex("abc", 3, out);
    assert_string_equal(out, ABC);
    bk_sha256_hex(NULL, 0, out);
    assert_string_equal(out, EMPTY);
    bk_sha256_hex(T448, strlen(T448), out);
    assert_string_equal(out, M448);
    bk_sha256_hex(T896, strlen(T896), out);
    assert_string_equal(out, M896);
}

static void test_million_a_streamed(void **state)
{
    (void)state;
    /* one million 'a' fed in uneven pieces: exercises the partial-block path */
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    bk_sha256 ctx;
    uint8_t d[BK_SHA256_LEN];
    char out[BK_SHA256_HEX_LEN];
    bk_sha256_init(&ctx);
    size_t left = 1000000, step = 1;
    while (left) {
        size_t n = step < left ? step : left;
        bk_sha256_update(&ctx, chunk, n);
        left -= n;
        step = step % 991 + 7; /* stays <= 997 < sizeof chunk */
    }
    bk_sha256_final(&ctx, d);
    bk_sha256_format(d, out);
    assert_string_equal(out, MILLION_A);
}

static void test_streaming_matches_one_shot(void **state)
{
    (void)state;
    /* every split point of messages around the 55/56/64-byte padding edges */
    uint8_t msg[130];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 31 + 7);
    for (size_t len = 0; len <= sizeof msg; len++) {
        char whole[BK_SHA256_HEX_LEN], parts[BK_SHA256_HEX_LEN];
        bk_sha256_hex(msg, len, whole);
        for (size_t cut = 0; cut <= len; cut += 13) {
            bk_sha256 ctx;
            uint8_t d[BK_SHA256_LEN];
            bk_sha256_init(&ctx);
            bk_sha256_update(&ctx, msg, cut);
            bk_sha256_update(&ctx, msg + cut, len - cut);
            bk_sha256_final(&ctx, d);
            bk_sha256_format(d, parts);
            assert_string_equal(parts, whole);
        }
    }
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/bk_test_digest_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, T448, strlen(T448)), (ssize_t)strlen(T448));
    assert_int_equal(close(fd), 0);
    char out[BK_SHA256_HEX_LEN];
    bk_err err = { 0 };
    assert_int_equal(bk_sha256_file(path, out, &err), BK_OK);
    assert_string_equal(out, M448);
    assert_int_equal(unlink(path), 0);

    /* a missing file: an error naming the path, empty output */
    assert_int_equal(bk_sha256_file(path, out, &err), BK_ERR_SYSTEM);
    assert_non_null(strstr(err.msg, path));
    assert_string_equal(out, "");

    /* a directory cannot be read as a file */
    bk_err_clear(&err);
    assert_int_equal(bk_sha256_file("/tmp", out, &err), BK_ERR_SYSTEM);
    assert_non_null(strstr(err.msg, "/tmp"));
}

/* Lengths at the padding edges against digests computed elsewhere (Python's hashlib): a
 * message of 55 mod 64 bytes ends its 0x80 at byte 56, where the length still fits the same
 * block; one byte more needs a second block. Streaming only compares us with ourselves. */
static void test_padding_edges(void **state)
{
    (void)state;
    static const struct { size_t n; const char *hex; } v[] = {
        { 55, "sha256:9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
        { 56, "sha256:b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
        { 63, "sha256:7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34" },
        { 64, "sha256:ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
        { 119, "sha256:31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb" },
        { 120, "sha256:2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c" },
    };
    char a[128], out[BK_SHA256_HEX_LEN];
    memset(a, 'a', sizeof a);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        bk_sha256_hex(a, v[i].n, out);
        if (strcmp(out, v[i].hex) != 0)
            fail_msg("%zu x 'a': %s, want %s", v[i].n, out, v[i].hex);
    }
}

/* A file longer than bk_sha256_file's 64 KiB read buffer is hashed whole (samples.msgpack
 * runs to megabytes): 200000 bytes (i * 31 + 7) mod 256, digest from Python's hashlib. */
static void test_file_past_one_read(void **state)
{
    (void)state;
    char path[] = "/tmp/bk_test_digest_big_XXXXXX";
    static uint8_t data[200000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, sizeof data), (ssize_t)sizeof data);
    assert_int_equal(close(fd), 0);
    char out[BK_SHA256_HEX_LEN], whole[BK_SHA256_HEX_LEN];
    bk_err err = { 0 };
    assert_int_equal(bk_sha256_file(path, out, &err), BK_OK);
    assert_int_equal(unlink(path), 0);
    bk_sha256_hex(data, sizeof data, whole);
    assert_string_equal(whole, "sha256:8f9d1bf454d63cd9fc6edbe8f3f2331c"
                               "c1f9b195c7ec90533717bf243ae966c7");
    assert_string_equal(out, whole);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_million_a_streamed),
        cmocka_unit_test(test_streaming_matches_one_shot),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_padding_edges),
        cmocka_unit_test(test_file_past_one_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
