/* fuzz_util.h - what the fuzz harnesses share. */
#ifndef BK_FUZZ_UTIL_H
#define BK_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

/* Write len bytes of data to path: a plain write (bk_write_atomic's fsync would slow every
 * run of a harness). 0, or -1 on failure. */
static inline int fuzz_put(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = len ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && n == len ? 0 : -1;
}

/* An accepted topology's canonical text (bk_topo_dump, which also sets its digest) must parse
 * again to the same text and digest; aborts, saying how, when it does not. */
static inline void fuzz_canon_stable(bk_topo *t)
{
    char *canon = bk_topo_dump(t);
    bk_topo *u = NULL;
    bk_err err = { 0 };
    if (!canon || bk_topo_parse(canon, "canon.json", &u, &err) != BK_OK) {
        fprintf(stderr, "its canonical text is refused: %s\n%s\n", err.msg,
                canon ? canon : "(none)");
        abort();
    }
    char *again = bk_topo_dump(u);
    if (!again || strcmp(canon, again) != 0 || strcmp(t->digest, u->digest) != 0) {
        fprintf(stderr, "the canonical text changes when parsed again:\n%s\n%s\n", canon,
                again ? again : "(none)");
        abort();
    }
    free(again);
    free(canon);
    bk_topo_free(u);
}

#endif
