/* digest.c - SHA-256 written from FIPS 180-4 (section 6.2): none of our dependencies
 * (Open MPI, hwloc, ZeroMQ, msgpack-c, jansson, cmocka, CUDA) exposes a hash. */
#include "runner/digest.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* FIPS 180-4 6.2.2: one 512-bit block into the hash state. */
static void compress(uint32_t h[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
               (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void bk_sha256_init(bk_sha256 *ctx)
{
    /* FIPS 180-4 5.3.3: square roots of the first 8 primes */
    static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(ctx->h, h0, sizeof h0);
    ctx->nbytes = 0;
    ctx->nbuf = 0;
}

void bk_sha256_update(bk_sha256 *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;
    ctx->nbytes += len;
    if (ctx->nbuf) {
        size_t take = 64 - ctx->nbuf < len ? 64 - ctx->nbuf : len;
        memcpy(ctx->buf + ctx->nbuf, p, take);
        ctx->nbuf += take;
        p += take;
        len -= take;
        if (ctx->nbuf < 64)
            return;
        compress(ctx->h, ctx->buf);
        ctx->nbuf = 0;
    }
    for (; len >= 64; p += 64, len -= 64)
        compress(ctx->h, p);
    if (len) {
        memcpy(ctx->buf, p, len);
        ctx->nbuf = len;
    }
}

void bk_sha256_final(bk_sha256 *ctx, uint8_t out[BK_SHA256_LEN])
{
    /* FIPS 180-4 5.1.1: a 1 bit, zeros to 56 mod 64 bytes, the bit length big-endian */
    uint64_t bits = ctx->nbytes * 8;
    ctx->buf[ctx->nbuf++] = 0x80;
    if (ctx->nbuf > 56) {
        memset(ctx->buf + ctx->nbuf, 0, 64 - ctx->nbuf);
        compress(ctx->h, ctx->buf);
        ctx->nbuf = 0;
    }
    memset(ctx->buf + ctx->nbuf, 0, 56 - ctx->nbuf);
    for (int i = 0; i < 8; i++)
        ctx->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress(ctx->h, ctx->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(ctx->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(ctx->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(ctx->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)ctx->h[i];
    }
    ctx->nbuf = 0;
}

void bk_sha256_format(const uint8_t digest[BK_SHA256_LEN], char out[BK_SHA256_HEX_LEN])
{
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "sha256:", 7);
    for (int i = 0; i < BK_SHA256_LEN; i++) {
        out[7 + 2 * i] = hex[digest[i] >> 4];
        out[8 + 2 * i] = hex[digest[i] & 15];
    }
    out[7 + 2 * BK_SHA256_LEN] = '\0';
}

void bk_sha256_hex(const void *data, size_t len, char out[BK_SHA256_HEX_LEN])
{
    bk_sha256 ctx;
    uint8_t d[BK_SHA256_LEN];
    bk_sha256_init(&ctx);
    bk_sha256_update(&ctx, data, len);
    bk_sha256_final(&ctx, d);
    bk_sha256_format(d, out);
}

bk_status bk_sha256_file(const char *path, char out[BK_SHA256_HEX_LEN], bk_err *err)
{
    bk_status st = BK_OK;
    uint8_t buf[65536];
    uint8_t d[BK_SHA256_LEN];
    bk_sha256 ctx;
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: cannot open for hashing: %s", path,
                     strerror(errno));
        goto out;
    }
    bk_sha256_init(&ctx);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        bk_sha256_update(&ctx, buf, n);
    if (ferror(f)) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: read error while hashing: %s", path,
                     strerror(errno));
        goto out;
    }
    bk_sha256_final(&ctx, d);
    bk_sha256_format(d, out);
out:
    if (f && fclose(f) != 0 && st == BK_OK)
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: close failed: %s", path, strerror(errno));
    if (st != BK_OK)
        out[0] = '\0';
    return st;
}
