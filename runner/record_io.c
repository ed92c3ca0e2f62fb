/* record_io.c - atomic file writes: a temporary file beside the target, flushed, synced and
 * renamed, so a crash leaves the old file or the new one, never half of one. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/record_io.h"

bk_status bk_write_atomic(const char *path, const void *data, size_t len, bk_err *err)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            close(fd);
            unlink(tmp);
            return BK_FAIL(err, BK_ERR_SYSTEM, "cannot write %s: %s", path, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot flush %s: %s", path, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot close %s: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return BK_FAIL(err, BK_ERR_SYSTEM, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    char dir[1024];
    bk_strlcpy(dir, path, sizeof dir);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return BK_OK;
}

bk_status bk_read_file(const char *path, char **data, size_t *len, bk_err *err)
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
    FILE *f = fopen(path, "rb");
    if (!f)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap)
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
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return BK_OK;
}
