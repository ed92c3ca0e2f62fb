/* plan_fields.c - typed getters for plan fields: one error message per bad value,
 * naming the file and the field's dotted path, and defaults written back. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/plan_internal.h"

#define BK__PATH_LEN 512

/* ---- messages ---- */

const char *bk_plan_value_text(const json_t *v, char *dst, size_t n)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s) {
        snprintf(dst, n, "(a value)");
        return dst;
    }
    if (strlen(s) > 60)
        snprintf(dst, n, "%.57s...", s);
    else
        snprintf(dst, n, "%s", s);
    free(s);
    return dst;
}

/* "LABEL: PATH: MESSAGE[, got VALUE]" as a BK_ERR_INPUT. */
bk_status bk__bad(const bk__chk *c, const char *path, const json_t *got, const char *fmt, ...)
{
    char msg[512], val[80] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (got)
        bk_plan_value_text(got, val, sizeof val);
    return BK_FAIL(c->err, BK_ERR_INPUT, "%s: %s: %s%s%s", c->label, path[0] ? path : "(top)",
                   msg, got ? ", got " : "", val);
}

void bk__join(char *dst, size_t n, const char *base, const char *key)
{
    if (base[0])
        snprintf(dst, n, "%s.%s", base, key);
    else
        snprintf(dst, n, "%s", key);
}

/* obj[key], or the default set into obj when absent (def is consumed);
 * a required field (def NULL) that is absent is an error that says what the
 * field should hold (`want`, e.g. "an integer in 1..1024"). */
static bk_status fetch(const bk__chk *c, json_t *obj, const char *path, const char *key,
                       json_t *def, const char *want, json_t **v)
{
    *v = json_object_get(obj, key);
    if (*v) {
        json_decref(def);
        return BK_OK;
    }
    if (!def)
        return bk__bad(c, path, NULL, "missing (%s)", want);
    if (json_object_set_new(obj, key, def) != 0)
        return BK_FAIL(c->err, BK_ERR_INTERNAL, "%s: %s: cannot set the default", c->label,
                       path);
    *v = json_object_get(obj, key);
    return BK_OK;
}

/* ---- objects ---- */

bk_status bk__check_keys(const bk__chk *c, json_t *obj, const char *base,
                         const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, key) == 0;
        if (!known) {
            char path[BK__PATH_LEN];
            bk__join(path, sizeof path, base, key);
            return bk__bad(c, path, NULL, "unknown key");
        }
    }
    return BK_OK;
}

bk_status bk__get_obj(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      int optional, const char *const *allowed, json_t **out)
{
    char path[BK__PATH_LEN];
    bk_status st;
    bk__join(path, sizeof path, base, key);
    if ((st = fetch(c, obj, path, key, optional ? json_object() : NULL, "an object", out)) !=
        BK_OK)
        return st;
    if (!json_is_object(*out))
        return bk__bad(c, path, *out, "must be an object");
    return allowed ? bk__check_keys(c, *out, path, allowed) : BK_OK;
}

/* ---- numbers ---- */

bk_status bk__get_int(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const json_int_t *def, json_int_t lo, json_int_t hi, json_int_t *out)
{
    char path[BK__PATH_LEN];
    char want[96];
    json_t *v;
    json_int_t i = 0;
    int ok = 0;
    bk_status st;
    bk__join(path, sizeof path, base, key);
    if (hi == INT64_MAX)
        snprintf(want, sizeof want, "an integer >= %lld", (long long)lo);
    else
        snprintf(want, sizeof want, "an integer in %lld..%lld", (long long)lo, (long long)hi);
    if ((st = fetch(c, obj, path, key, def ? json_integer(*def) : NULL, want, &v)) != BK_OK)
        return st;
    if (json_is_integer(v)) {
        i = json_integer_value(v);
        ok = 1;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        /* integral and inside int64: [-2^63, 2^63) */
        ok = d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
        i = ok ? (json_int_t)d : 0;
        /* an integer too large for int64 (1e20) is said to be past its bound, not to be no
         * integer */
        if (!ok && d == floor(d))
            return d > 0 ? bk__bad(c, path, v, "must be an integer <= %lld", (long long)hi)
                         : bk__bad(c, path, v, "must be an integer >= %lld", (long long)lo);
    }
    if (!ok)
        return bk__bad(c, path, v, "must be %s", want);
    if (i < lo)
        return bk__bad(c, path, v, "must be an integer >= %lld", (long long)lo);
    if (i > hi)
        return bk__bad(c, path, v, "must be an integer <= %lld", (long long)hi);
    if (json_is_real(v) && json_object_set_new(obj, key, json_integer(i)) != 0)
        return BK_FAIL(c->err, BK_ERR_INTERNAL, "%s: %s: cannot rewrite", c->label, path);
    *out = i;
    return BK_OK;
}

/* "a number in (0.5, 1)", "a number in [0, 1)", "a number > 0", ... */
static void range_text(bk__range r, char *dst, size_t n)
{
    if (r.has_hi)
        snprintf(dst, n, "a number in %c%g, %g%c", r.lo_open ? '(' : '[', r.lo, r.hi,
                 r.hi_open ? ')' : ']');
    else
        snprintf(dst, n, "a number %s %g", r.lo_open ? ">" : ">=", r.lo);
}

bk_status bk__get_num(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const double *def, bk__range r, double *out)
{
    char path[BK__PATH_LEN], rt[64];
    json_t *v;
    bk_status st;
    bk__join(path, sizeof path, base, key);
    range_text(r, rt, sizeof rt);
    if ((st = fetch(c, obj, path, key, def ? json_real(*def) : NULL, rt, &v)) != BK_OK)
        return st;
    if (!json_is_number(v)) /* true/false are not numbers in jansson */
        return bk__bad(c, path, v, "must be %s", rt);
    double d = json_number_value(v);
    int low_ok = r.lo_open ? d > r.lo : d >= r.lo;
    int high_ok = !r.has_hi || (r.hi_open ? d < r.hi : d <= r.hi);
    if (!isfinite(d) || !low_ok || !high_ok)
        return bk__bad(c, path, v, "must be %s", rt);
    *out = d;
    return BK_OK;
}

/* ---- strings ---- */

bk_status bk__get_str(const bk__chk *c, json_t *obj, const char *base, const char *key,
                      const char *def, char *dst, size_t n)
{
    char path[BK__PATH_LEN];
    json_t *v;
    bk_status st;
    bk__join(path, sizeof path, base, key);
    if ((st = fetch(c, obj, path, key, def ? json_string(def) : NULL, "a non-empty string",
                    &v)) != BK_OK)
        return st;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return bk__bad(c, path, v, "must be a non-empty string");
    if (json_string_length(v) >= n)
        return bk__bad(c, path, v, "must be shorter than %zu bytes (UTF-8)", n);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return bk__bad(c, path, v, "must not contain NUL characters");
    /* blanks alone name nothing (a model "   " printed in every header and record) */
    if (json_string_value(v)[strspn(json_string_value(v), " \t\r\n\v\f")] == '\0')
        return bk__bad(c, path, v, "must not be blank");
    bk_strlcpy(dst, json_string_value(v), n);
    return BK_OK;
}

bk_status bk__get_enum(const bk__chk *c, json_t *obj, const char *base, const char *key,
                       const char *def, const char *const *names, int *out)
{
    char path[BK__PATH_LEN], list[256] = "";
    json_t *v;
    bk_status st;
    bk__join(path, sizeof path, base, key);
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "one of ", names[i]);
    }
    if ((st = fetch(c, obj, path, key, def ? json_string(def) : NULL, list, &v)) != BK_OK)
        return st;
    for (int i = 0; names[i]; i++) {
        if (json_is_string(v) && strcmp(json_string_value(v), names[i]) == 0) {
            *out = i;
            return BK_OK;
        }
    }
    return bk__bad(c, path, v, "must be %s", list);
}
