/* digest.h - SHA-256 (FIPS 180-4) for the record's identities: plan, binary, sources. */
#ifndef BK_DIGEST_H
#define BK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "runner/status.h"

/* "sha256:" + 64 lowercase hex digits + NUL = 72 bytes. */
#define BK_SHA256_HEX_LEN 72
#define BK_SHA256_LEN 32

/* Streaming state; plain data, no resources (nothing to free). */
typedef struct bk_sha256 {
    uint32_t h[8];
    uint64_t nbytes; /* message length so far */
    uint8_t buf[64]; /* the partial block */
    size_t nbuf;
} bk_sha256;

void bk_sha256_init(bk_sha256 *ctx);
/* Feed `len` bytes; `data` may be NULL when len is 0. */
void bk_sha256_update(bk_sha256 *ctx, const void *data, size_t len);
/* Pad, write the 32-byte digest into `out`; the state is then spent (init again
 * to reuse it). */
void bk_sha256_final(bk_sha256 *ctx, uint8_t out[BK_SHA256_LEN]);

/* Write "sha256:<64 hex>" for a 32-byte digest. */
void bk_sha256_format(const uint8_t digest[BK_SHA256_LEN], char out[BK_SHA256_HEX_LEN]);

/* One-shot: "sha256:<64 hex>" of `len` bytes at `data`. */
void bk_sha256_hex(const void *data, size_t len, char out[BK_SHA256_HEX_LEN]);

/* "sha256:<64 hex>" of a file's bytes. Errors (BK_ERR_SYSTEM) name the path and
 * the errno text; `out` is then the empty string. */
bk_status bk_sha256_file(const char *path, char out[BK_SHA256_HEX_LEN], bk_err *err);

#endif
