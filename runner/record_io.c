/* record_io.c - atomic file writes: a temporary file beside the target, flushed, synced and
 * renamed, so a crash leaves the old file or the new one, never half of one. */
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/record_io.h"

/* A new file beside `path`, "PATH.tmp.PID.N": created, never opened when something of that
 * name is there (O_EXCL: a file or a link someone put there is neither written through nor
 * removed); the next N is tried then. The descriptor, or -1 with errno. */
static int create_temp(const char *path, char *tmp, size_t len)
{
    static unsigned seq;
    for (int tries = 0; tries < 100; tries++) {
        if (snprintf(tmp, len, "%s.tmp.%d.%u", path, (int)getpid(), seq++) >= (int)len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

bk_status bk_write_temp(const char *path, const void *data, size_t len, char *tmp,
                        size_t tmplen, bk_err *err)
{
    tmp[0] = '\0';
    int fd = create_temp(path, tmp, tmplen);
    if (fd < 0) { /* a folder that is missing, read-only or not ours, a name too long: the
                   * user's to fix */
        const int e = errno;
        tmp[0] = '\0';
        return BK_FAIL(err, e == ENOENT || e == ENOTDIR || e == EACCES || e == EPERM ||
                                    e == EROFS || e == ENAMETOOLONG || e == EISDIR
                                ? BK_ERR_INPUT : BK_ERR_SYSTEM,
                       "%s: cannot create it there (its temporary file: %s)", path, strerror(e));
    }
    const char *p = data;
    size_t left = len;
    const char *what = NULL;
    int e = 0;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e = w < 0 ? errno : ENOSPC;
            what = "write";
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (!what && fsync(fd) != 0) {
        e = errno;
        what = "flush";
    }
    if (close(fd) != 0 && !what) {
        e = errno;
        what = "close";
    }
    if (what) {
        unlink(tmp);
        tmp[0] = '\0';
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot %s %s: %s", what, path, strerror(e));
    }
    return BK_OK;
}

bk_status bk_commit_temp(char *tmp, const char *path, bk_err *err)
{
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        bk_status st = BK_FAIL(err, BK_ERR_SYSTEM, "cannot rename %s to %s: %s", tmp, path,
                               strerror(e));
        tmp[0] = '\0';
        return st;
    }
    tmp[0] = '\0';
    char dir[1024];
    bk_strlcpy(dir, path, sizeof dir);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return BK_OK;
}

bk_status bk_write_atomic(const char *path, const void *data, size_t len, bk_err *err)
{
    char tmp[1024];
    bk_status st = bk_write_temp(path, data, len, tmp, sizeof tmp, err);
    return st != BK_OK ? st : bk_commit_temp(tmp, path, err);
}

bk_status bk_read_file(const char *path, char **data, size_t *len, bk_err *err)
{
    return bk_read_file_max(path, SIZE_MAX, NULL, data, len, err);
}

bk_status bk_read_file_max(const char *path, size_t max, const char *what, char **data,
                           size_t *len, bk_err *err)
{
    *data = NULL;
    *len = 0;
    /* a device (/dev/zero) would be read without end, a pipe's open would wait for a
     * writer: asked before the open */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path,
                       S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file");
    if ((uint64_t)sb.st_size > (uint64_t)max) /* before reading a byte of it */
        return BK_FAIL(err, BK_ERR_INPUT, "%s: %jd bytes, more than %s may be (%zu MiB)", path,
                       (intmax_t)sb.st_size, what, max >> 20);
    FILE *f = fopen(path, "rb");
    if (!f)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        /* past max: a file that grew since, or one whose size stat does not tell (/proc) */
        if (n < cap || n > max)
            break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    if (!buf)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", path);
    if (bad) {
        free(buf);
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(e));
    }
    if (n > max) {
        free(buf);
        return BK_FAIL(err, BK_ERR_INPUT, "%s: more than %zu bytes, more than %s may be "
                       "(%zu MiB)", path, max, what, max >> 20);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return BK_OK;
}

const char *bk_schema_other(const char *schema, const char *want, char *buf, size_t len)
{
    static const char *const kinds[][2] = { { "bracket.plan/1", "a plan" },
                                            { "bracket.record/1", "a run's record" },
                                            { "bracket.topology/1", "a topology snapshot" } };
    buf[0] = '\0';
    for (size_t i = 0; schema && i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(schema, kinds[i][0]))
            snprintf(buf, len, " (this is %s, not %s)", kinds[i][1], want);
    return buf;
}

bk_status bk_read_json_file(const char *path, size_t max, const char *what, char **data,
                            size_t *len, bk_err *err)
{
    bk_status st = bk_read_file_max(path, max, what, data, len, err);
    if (st != BK_OK)
        return st;
    const char *nul = memchr(*data, '\0', *len);
    if (*len >= 3 && !memcmp(*data, "\xEF\xBB\xBF", 3)) /* jansson quotes it as invisible */
        st = BK_FAIL(err, BK_ERR_INPUT, "%s:1:1: starts with a UTF-8 byte order mark (bytes "
                     "EF BB BF), which JSON does not allow (%s is JSON text); was it saved by "
                     "an editor?", path, what);
    else if (nul)
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: a NUL byte at offset %zu (%s is JSON text, which "
                     "has none)", path, (size_t)(nul - *data), what);
    if (st != BK_OK) {
        free(*data);
        *data = NULL;
        *len = 0;
    }
    return st;
}

int bk_json_control_in(const json_t *v, char *where, size_t len, long *at, unsigned char *byte)
{
    const size_t used = strlen(where);
    if (json_is_string(v)) {
        *at = bk_control_at_tab_ok(json_string_value(v));
        if (*at >= 0)
            *byte = (unsigned char)json_string_value(v)[*at];
        return *at >= 0;
    }
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            snprintf(where + used, len - used, "[%zu]", i);
            if (bk_json_control_in(e, where, len, at, byte))
                return 1;
        }
    } else if (json_is_object(v)) {
        const char *k;
        const json_t *e;
        json_object_foreach((json_t *)v, k, e) {
            if ((*at = bk_control_at_tab_ok(k)) >= 0) {
                *byte = (unsigned char)k[*at];
                snprintf(where + used, len - used, "%s", used ? " (a key)" : "a top-level key");
                return 1;
            }
            snprintf(where + used, len - used, "%s%.*s", used ? "." : "", bk_utf8_cut(k, 64), k);
            if (bk_json_control_in(e, where, len, at, byte))
                return 1;
        }
    }
    where[used] = '\0';
    return 0;
}
