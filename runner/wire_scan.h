/* wire_scan.h - internal to the wire decoder: a bounds pre-pass over raw msgpack bytes. */
#ifndef BK_WIRE_SCAN_H
#define BK_WIRE_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* What the pre-pass learnt about one buffer. */
typedef struct bk__wire_scan {
    size_t zone_bytes; /* upper bound of what msgpack-c's unpacker will take from its zone */
    size_t bad_at;     /* on failure: the byte offset where the problem was seen */
    const char *why;   /* on failure: a static phrase ("truncated", "trailing bytes", ...) */
} bk__wire_scan;

/* Walk `len` bytes as exactly one msgpack object, without building anything.
 * Returns 0 when the bytes hold one complete object and nothing after it, -1
 * otherwise (s->why, s->bad_at say what and where).
 *
 * Why this exists: msgpack-c's C unpacker allocates an array's or map's
 * element storage from the count in its header before reading the elements,
 * so a 5-byte message claiming 2^32 elements would ask for ~100 GB. This pass
 * rejects any container that claims more elements than bytes remain (each
 * element takes at least one byte), which bounds the unpacker's allocation by
 * O(len); it also reports truncation and trailing bytes precisely. The real
 * decoding is left to msgpack-c. */
int bk__wire_scan_bytes(const unsigned char *p, size_t len, bk__wire_scan *s);

#endif
