/* plan_internal.h - what plan.c, plan_check.c and plan_set.c share (not a public header). */
#ifndef BK_PLAN_INTERNAL_H
#define BK_PLAN_INTERNAL_H

#include <jansson.h>

#include "plans/plan.h"
#include "runner/status.h"

/* Apply one "dotted.path=value" override to `root` (an object). Intermediate
 * objects are created only where the plan knows an object (arena, protocol,
 * candidate.params, ...); an unknown leaf key is set and left for the
 * validator to reject. Errors name the --set text. */
#define BK__SET_PATH_LEN 512 /* a --set path, dotted and canonical */

/* made (made_len bytes, may be 0): the dotted path of the leaf the set added to an object
 * that had no such key (left to the validator, which may call it an unknown key), else "" */
bk_status bk__plan_apply_set(json_t *root, const char *set, char *made, size_t made_len,
                             bk_err *err);

/* Validate `root` against bracket.plan/1 and fill `p` (which must be zeroed).
 * Missing optional fields are written into `root` with their defaults, and
 * integral reals of integer fields become integers, so `root` afterwards is
 * the plan as run. Errors read "LABEL: dotted.path: what is wrong". `p->doc`
 * and the params pointers are not set here. */
bk_status bk__plan_check(json_t *root, const char *label, bk_plan *p, bk_err *err);

/* ---- typed field getters (plan_fields.c) ----
 * Each reads obj[key] at the dotted path "base.key" (base "" at the top).
 * A NULL default means the field is required ("PATH: missing"); otherwise a
 * missing field is written into obj with the default. Errors read
 * "LABEL: PATH: must be ..., got VALUE". */
typedef struct bk__chk {
    const char *label;
    bk_err *err;
} bk__chk;

/* An interval for numbers: lo (open or closed), and hi when has_hi. */
typedef struct bk__range {
    double lo, hi;
    int lo_open, hi_open, has_hi;
} bk__range;

bk_status bk__bad(const bk__chk *c, const char *path, const json_t *got, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void bk__join(char *dst, size_t n, const char *base, const char *key);
/* Reject any key of obj that is not in the NULL-terminated `allowed`. */
bk_status bk__check_keys(const bk__chk *c, json_t *obj, const char *base,
                         const char *const *allowed);
/* An object member; optional ones are created empty. `allowed` may be NULL
 * (free-form object, e.g. params). */
bk_status bk__get_obj(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      int optional, const char *const *allowed, json_t **out);
/* An integer in lo..hi (INT64_MAX: no upper bound); an integral real is
 * accepted and rewritten as an integer; booleans never are numbers. */
bk_status bk__get_int(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const json_int_t *def, json_int_t lo, json_int_t hi, json_int_t *out);
bk_status bk__get_num(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const double *def, bk__range r, double *out);
/* A non-empty string shorter than n bytes, copied into dst. */
bk_status bk__get_str(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const char *def, char *dst, size_t n);
/* One of the NULL-terminated names; *out is its index. */
bk_status bk__get_enum(const bk__chk *c, json_t *obj, const char *base, const char *key,
                       const char *def, const char *const *names, int *out);

#endif
