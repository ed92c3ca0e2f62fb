/* outdir.c - reserve room for the record in the output folder before a run starts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runner/outdir.h"

bk_status bk_outdir_probe(const char *run_dir, const char *out_dir, int64_t bytes, bk_err *err)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s/.space-probe", run_dir) >= (int)sizeof path)
        return BK_FAIL(err, BK_ERR_INPUT, "output folder %s: path too long", run_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return BK_FAIL(err, BK_ERR_INPUT, "output folder %s is not writable: %s", run_dir,
                       strerror(errno));
    int rc = posix_fallocate(fd, 0, (off_t)bytes);
    close(fd);
    unlink(path);
    if (rc != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "output folder %s cannot hold the record: reserving "
                       "%.1f MiB failed: %s", out_dir, (double)bytes / 1048576.0, strerror(rc));
    return BK_OK;
}
