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
/* bk_write_atomic in two steps, so that two files can replace theirs together: the data
 * written, flushed and closed in a new temporary file beside `path` (its name into tmp, of
 * tmplen bytes; "" on failure, when nothing is left); then renamed over `path` and the folder
 * flushed (tmp emptied; on failure the temporary file is removed). A temporary file not
 * committed is the caller's to unlink. */
bk_status bk_write_temp(const char *path, const void *data, size_t len, char *tmp,
                        size_t tmplen, bk_err *err);
bk_status bk_commit_temp(char *tmp, const char *path, bk_err *err);

/* Read a whole regular file (NUL-terminated for convenience); caller frees *data. A
 * directory, device or pipe is BK_ERR_INPUT. */
bk_status bk_read_file(const char *path, char **data, size_t *len, bk_err *err);
/* The same, refusing (BK_ERR_INPUT, before reading it when its size says so) a file of more
 * than max bytes: "PATH: N bytes, more than WHAT may be (M MiB)", WHAT e.g. "a topology
 * snapshot". */
bk_status bk_read_file_max(const char *path, size_t max, const char *what, char **data,
                           size_t *len, bk_err *err);
/* For a refusal that found `schema` where a document of the kind `want` ("a plan") was
 * expected: " (this is a run's record, not a plan)" into buf when schema names another kind
 * bracket knows (a plan, a run's record, a topology snapshot), else "" (schema NULL too).
 * Returns buf. */
const char *bk_schema_other(const char *schema, const char *want, char *buf, size_t len);

/* bk_read_file_max for JSON text: a NUL byte in it is refused (BK_ERR_INPUT), "PATH: a NUL
 * byte at offset N (WHAT is JSON text, which has none)", where jansson would stop as at the
 * file's end and say "near end of file"; so is a UTF-8 byte order mark at its start ("PATH:1:1:
 * starts with a UTF-8 byte order mark ..."), which jansson quotes as an invisible character. */
bk_status bk_read_json_file(const char *path, size_t max, const char *what, char **data,
                            size_t *len, bk_err *err);

/* The first string or key in v (at any depth) holding a control character other than a tab
 * (bk_control_at_tab_ok):
 * 1, with its path written into where ("arms[1].processes[0].status_message"; for a key,
 * " (a key)" after its object's path, or "a top-level key"), the offset into *at and the byte into *byte; 0 if
 * none. where must hold "" (or the path of v) on entry. Plans and records hold none: their
 * text is printed as it is, where an escape sequence or a newline would reach the terminal. */
struct json_t;
int bk_json_control_in(const struct json_t *v, char *where, size_t len, long *at,
                       unsigned char *byte);

#endif
