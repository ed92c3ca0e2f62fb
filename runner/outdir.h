/* outdir.h - the output folder can hold the record: checked before any arm runs, so a
 * full or read-only folder is a clear error at once, not a lost record hours later. */
#ifndef BK_OUTDIR_H
#define BK_OUTDIR_H

#include <stdint.h>

#include "runner/status.h"

/* Reserve `bytes` in a probe file inside run_dir (posix_fallocate), then remove it.
 * BK_ERR_INPUT naming out_dir and the cause (read-only, no space, no permission). */
bk_status bk_outdir_probe(const char *run_dir, const char *out_dir, int64_t bytes, bk_err *err);

#endif
