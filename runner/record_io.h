/* record_io.h - atomic whole-file writes and whole-file reads. */
#ifndef BK_RECORD_IO_H
#define BK_RECORD_IO_H

#include <stddef.h>

#include "runner/status.h"

/* Write `len` bytes to `path` through a temporary file in the same folder,
 * fsync, rename, fsync the folder. On failure the temporary file is removed
 * and `path` is untouched. */
bk_status bk_write_atomic(const char *path, const void *data, size_t len, bk_err *err);

/* Read a whole regular file (NUL-terminated for convenience); caller frees *data. A
 * directory, device or pipe is BK_ERR_INPUT. */
bk_status bk_read_file(const char *path, char **data, size_t *len, bk_err *err);

#endif
