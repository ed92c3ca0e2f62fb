/* report.h - what `bracket run` and `bracket score` print for the user (rank 0 only). */
#ifndef BK_REPORT_H
#define BK_REPORT_H

#include <stdio.h>

#include "runner/run.h"

void bk_report_header(FILE *f, const bk_run *run);
void bk_report_print(FILE *f, const bk_run *run, const bk_score *score);
/* share (0..1) as "N.N%", never rounded to 0.0% or 100.0% when it is neither */
void bk_share_text(double share, char *buf, size_t len);

#endif
