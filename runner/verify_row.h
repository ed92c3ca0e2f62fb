/* verify_row.h - internal to `bracket verify` (cmd_verify.c; tests call it alone): how one
 * row of its table, one shape of one seed, is judged against the float64 reference. */
#ifndef BK_VERIFY_ROW_H
#define BK_VERIFY_ROW_H

#include <stdint.h>

#include "kernels/catalog.h"
#include "plans/plan.h"
#include "runner/coordinator.h"

typedef struct bk__verify_row {
    double max_abs, max_rel; /* nan when an element came back NaN */
    uint64_t bad, nans;      /* elements outside rtol/atol (NaN and missing ones too); NaNs */
    int geq;                 /* the graph replay was bitwise the eager call (1 without one) */
    char first[400];         /* the first bad element, else the first graph/eager difference */
} bk__verify_row;

/* Shape s of seed `seed`: every output (outs[0..nout), the target's tensor indices) of every
 * lane rank of arms[0] against tg's float64 reference within p->quality.rtol/atol, and with
 * `graph` arms[1] (the replay) bitwise against arms[0]. An output that did not come back
 * whole counts all its elements bad. Fills *w; BK_OK unless the reference failed (err). */
bk_status bk__verify_check_row(const bk_plan *p, const bk_target *tg, const bk_arm_run *arms,
                               int graph, const int *outs, int nout, int s, int world,
                               int64_t seed, bk__verify_row *w, bk_err *err);

#endif
