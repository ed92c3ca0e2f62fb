/* fuzz_util.h - what the fuzz harnesses share. */
#ifndef BK_FUZZ_UTIL_H
#define BK_FUZZ_UTIL_H

#include <stdio.h>

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

#endif
