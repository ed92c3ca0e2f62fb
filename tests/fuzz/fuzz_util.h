/* fuzz_util.h - what the fuzz harnesses share. */
#ifndef BK_FUZZ_UTIL_H
#define BK_FUZZ_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The harness's own folder (fuzz_tmpdir): its name, "" until made. */
static inline char *fuzz__dir(void)
{
    static char dir[64];
    return dir;
}

/* At exit: the files the harness left in its folder, then the folder. */
static inline void fuzz__dir_clean(void)
{
    DIR *d = opendir(fuzz__dir());
    struct dirent *e;
    char path[sizeof "/" + 64 + 256];
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", fuzz__dir(), e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(fuzz__dir());
}

/* A folder of the harness's own under /tmp (bk-fuzz-NAME-XXXXXX), made on the first call and
 * removed with what is in it at exit; aborts when it cannot be made. */
static inline const char *fuzz_tmpdir(const char *name)
{
    char *dir = fuzz__dir();
    if (!dir[0]) {
        snprintf(dir, 64, "/tmp/bk-fuzz-%s-XXXXXX", name);
        if (!mkdtemp(dir))
            abort();
        atexit(fuzz__dir_clean);
    }
    return dir;
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
