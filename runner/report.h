/* report.h - what `bracket run` and `bracket score` print for the user (rank 0 only). */
#ifndef BK_REPORT_H
#define BK_REPORT_H

#include <stdio.h>

#include "runner/run.h"

void bk_report_header(FILE *f, const bk_run *run);
void bk_report_print(FILE *f, const bk_run *run, const bk_score *score);

#endif
