/* record_io.h - atomic whole-file writes and whole-file reads. */
#ifndef BK_RECORD_IO_H
#define BK_RECORD_IO_H

#include <stddef.h>

#include "runner/status.h"

/* Write `len` bytes to `path` through a temporary file in the same folder (a new one,
 * "PATH.tmp.PID.N", never a file or link already there), fsync, rename, fsync the folder.
 * On failure the temporary file is removed and `path` is untouched. A folder that is
 * missing, read-only or not writable, or a name too long, is BK_ERR_INPUT. */
bk_status bk_write_atomic(const char *path, const void *data, size_t len, bk_err *err);

/* Read a whole regular file (NUL-terminated for convenience); caller frees *data. A
 * directory, device or pipe is BK_ERR_INPUT. */
bk_status bk_read_file(const char *path, char **data, size_t *len, bk_err *err);
/* The same, refusing (BK_ERR_INPUT, before reading it when its size says so) a file of more
 * than max bytes: "PATH: N bytes, more than WHAT may be (M MiB)", WHAT e.g. "a topology
 * snapshot". */
bk_status bk_read_file_max(const char *path, size_t max, const char *what, char **data,
                           size_t *len, bk_err *err);
/* bk_read_file_max for JSON text: a NUL byte in it is refused (BK_ERR_INPUT), "PATH: a NUL
 * byte at offset N (WHAT is JSON text, which has none)", where jansson would stop as at the
 * file's end and say "near end of file". */
bk_status bk_read_json_file(const char *path, size_t max, const char *what, char **data,
                            size_t *len, bk_err *err);

#endif
