/* fuzz_wire.c - libFuzzer: any bytes as a ZeroMQ message to rank 0's decoder (bk_wire_decode)
 * and as a samples.msgpack file to its object scanner (bk_wire_scan_next). Neither may crash,
 * read out of bounds or leak (ASan, UBSan); a rejection names why; an accepted message holds
 * what the expectations allow. Seeds: one message of each type (fuzz_seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/wire.h"

#define FUZZ_RUN "fuzz-run"
#define FUZZ_WORLD 8
#define FUZZ_SHAPES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bk_wire_decoder *d;
    bk_err err = { 0 };
    if (!d && bk_wire_decoder_new(&d, &err) != BK_OK)
        abort();
    const bk_wire_expect x = { .run = FUZZ_RUN, .arm = "C", .world = FUZZ_WORLD,
                               .max_shapes = FUZZ_SHAPES };
    bk_msg m;
    bk_wire_stats stats;
    bk_wire_reject why = BK_REJ_COUNT;
    memset(&stats, 0, sizeof stats);
    bk_err_clear(&err);
    bk_status st = bk_wire_decode(d, data, size, &x, &m, &stats, &why, &err);
    if (st == BK_OK) {
        if (strcmp(m.run, FUZZ_RUN) != 0 || strcmp(m.arm, "C") != 0 || m.rank >= FUZZ_WORLD)
            abort();
        if (m.type == BK_MSG_SAMPLES && (m.shape >= FUZZ_SHAPES || m.n * 8 > size))
            abort();
        if (stats.accepted != 1)
            abort();
    } else if (!err.msg[0] || why >= BK_REJ_COUNT || stats.rejected[why] != 1) {
        fprintf(stderr, "rejected without a reason: status %d\n", (int)st);
        abort();
    }
    /* the same bytes as a file of objects */
    size_t off = 0;
    while (off < size) {
        size_t used = 0, bad = 0;
        const char *w = NULL;
        if (bk_wire_scan_next(data + off, size - off, &used, &w, &bad) != 0) {
            if (!w || bad > size - off)
                abort();
            break;
        }
        if (used == 0 || used > size - off)
            abort();
        off += used;
    }
    return 0;
}
