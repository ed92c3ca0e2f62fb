/* plan_set.c - --set "dotted.path=value" overrides, applied to the plan document before
 * it is validated (so an override is checked exactly like a value in the file). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/plan_internal.h"

#define BK__SET_MAX_STEPS 32

/* One step of a path: a key ("shapes"; digits may also index an array) or
 * an index ("[1]"). */
typedef struct step {
    const char *key; /* NULL for an index written as [n] */
    size_t idx;
    int numeric; /* key is all digits: an index when the node is an array */
} step;

/* Objects a --set may create when the file leaves them out: the plan's own
 * sections, and anything inside the free-form params. Everything else must
 * exist already, so a typo in the middle of a path is reported. */
static int creatable(const char *canon)
{
    static const char *const known[] = { "arena", "arena.calibration", "incumbent",
                                          "incumbent.params", "candidate", "candidate.params",
                                          "workload", "protocol", "quality", "lanes",
                                          "timeouts", NULL };
    for (int i = 0; known[i]; i++)
        if (strcmp(canon, known[i]) == 0)
            return 1;
    return strncmp(canon, "incumbent.params.", 17) == 0 ||
           strncmp(canon, "candidate.params.", 17) == 0;
}

static int parse_index(const char *s, const char *end, size_t *idx)
{
    if (s == end || end - s > 9)
        return -1;
    *idx = 0;
    for (; s < end; s++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        *idx = *idx * 10 + (size_t)(*s - '0');
    }
    return 0;
}

/* Split `buf` (modified in place) into steps; returns the count or -1. */
static int split(char *buf, step *steps)
{
    int n = 0;
    char *s = buf;
    for (;;) {
        char *dot = strchr(s, '.');
        if (dot)
            *dot = '\0';
        char *br = strchr(s, '[');
        if (br)
            *br = '\0';
        if (s[0] == '\0' || n == BK__SET_MAX_STEPS)
            return -1;
        steps[n].key = s;
        steps[n].numeric = parse_index(s, s + strlen(s), &steps[n].idx) == 0;
        n++;
        while (br) { /* one or more [n] after the key */
            char *close = strchr(br + 1, ']');
            if (!close || n == BK__SET_MAX_STEPS ||
                parse_index(br + 1, close, &steps[n].idx) != 0)
                return -1;
            steps[n].key = NULL;
            steps[n].numeric = 1;
            n++;
            if (close[1] == '\0')
                br = NULL;
            else if (close[1] == '[')
                br = close + 1;
            else
                return -1;
        }
        if (!dot)
            return n;
        s = dot + 1;
    }
}

static void append(char *canon, const step *st, int as_index)
{
    size_t used = strlen(canon);
    if (as_index)
        snprintf(canon + used, BK__SET_PATH_LEN - used, "[%zu]", st->idx);
    else
        snprintf(canon + used, BK__SET_PATH_LEN - used, "%s%s", used ? "." : "", st->key);
}

/* 1 when s is a JSON number as written (-? int frac? exp?, blanks around it), whatever its
 * size */
static int json_number_text(const char *s)
{
    s += strspn(s, " \t\r\n");
    if (*s == '-')
        s++;
    if (!isdigit((unsigned char)*s))
        return 0;
    if (*s == '0')
        s++;
    else
        while (isdigit((unsigned char)*s))
            s++;
    if (*s == '.') {
        if (!isdigit((unsigned char)*++s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!isdigit((unsigned char)*s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    return s[strspn(s, " \t\r\n")] == '\0';
}

/* The value as JSON when it parses ("2", "0.5", "true", "{}", "\"x\""), else as text
 * (NULL when that text is not UTF-8). A value that starts with '{', '[' or '"' is meant as
 * JSON (an object, an array, a quoted string): when it does not parse, *je holds why and
 * NULL is returned with *bad_json set to that first character. A quoted value is held to
 * the rules of a string in a plan file, so it never becomes a string with its quotes; a
 * number too big to hold fails the same way (*bad_json '0'), never its digits' text. */
static json_t *parse_value(const char *text, json_error_t *je, int *bad_json)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, je);
    const char *s = text + strspn(text, " \t\r\n");
    *bad_json = !v && (*s == '{' || *s == '[' || *s == '"') ? *s : 0;
    /* a number that jansson cannot hold (past int64, past a double): as in a plan file,
     * not the text of it */
    if (!v && !*bad_json && json_number_text(text))
        *bad_json = '0';
    if (v || *bad_json)
        return v;
    return json_string(text);
}

bk_status bk__plan_apply_set(json_t *root, const char *set, char *made, size_t made_len,
                             bk_err *err)
{
    if (made_len)
        made[0] = '\0';
    char buf[BK__SET_PATH_LEN], canon[BK__SET_PATH_LEN] = "";
    step steps[BK__SET_MAX_STEPS];
    json_t *value = NULL, *node = root;
    json_error_t je;
    bk_status st = BK_OK;
    const char *eq = strchr(set, '=');
    int n, bad_json = 0;

    if (!eq || eq == set || (size_t)(eq - set) >= sizeof buf) {
        st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": expected dotted.path=value, e.g. "
                     "--set arena.tp=2", set);
        goto out;
    }
    memcpy(buf, set, (size_t)(eq - set));
    buf[eq - set] = '\0';
    if ((n = split(buf, steps)) < 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": bad path (expected keys separated by "
                     "'.', array indexes as shapes[1] or shapes.1)", set);
        goto out;
    }
    if (!(value = parse_value(eq + 1, &je, &bad_json))) {
        if (bad_json)
            st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": the value is not %s: %s at "
                         "character %d of the value", set,
                         bad_json == '"'   ? "a valid JSON string"
                         : bad_json == '0' ? "a number a plan can hold"
                                           : "valid JSON",
                         je.text, je.position);
        else
            st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": the value is not valid UTF-8", set);
        goto out;
    }
    for (int k = 0; k < n; k++) {
        const step *sp = &steps[k];
        int last = k == n - 1;
        if (json_is_array(node) && sp->numeric) {
            size_t size = json_array_size(node);
            append(canon, sp, 1);
            if (sp->idx > size || (sp->idx == size && !last)) {
                st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": %s: index out of range (%zu "
                             "elements)", set, canon, size);
                goto out;
            }
            if (last) { /* replace, or append at index == size */
                int rc = sp->idx == size ? json_array_append_new(node, value)
                                         : json_array_set_new(node, sp->idx, value);
                value = NULL;
                if (rc != 0)
                    st = BK_FAIL(err, BK_ERR_INTERNAL, "--set \"%s\": cannot set", set);
                goto out;
            }
            node = json_array_get(node, sp->idx);
            continue;
        }
        if (!json_is_object(node) || !sp->key) {
            st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": %s is not %s", set,
                         canon[0] ? canon : "the plan", sp->key ? "an object" : "an array");
            goto out;
        }
        append(canon, sp, 0);
        if (last) { /* an unknown leaf is left to the validator ("unknown key") */
            if (!json_object_get(node, sp->key) && made_len)
                snprintf(made, made_len, "%s", canon);
            int rc = json_object_set_new(node, sp->key, value);
            value = NULL;
            if (rc != 0)
                st = BK_FAIL(err, BK_ERR_INTERNAL, "--set \"%s\": cannot set", set);
            goto out;
        }
        json_t *child = json_object_get(node, sp->key);
        if (!child) {
            if (!creatable(canon)) {
                st = BK_FAIL(err, BK_ERR_INPUT, "--set \"%s\": %s: unknown key", set, canon);
                goto out;
            }
            if (json_object_set_new(node, sp->key, json_object()) != 0) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "--set \"%s\": cannot create %s", set,
                             canon);
                goto out;
            }
            child = json_object_get(node, sp->key);
        }
        node = child;
    }
out:
    json_decref(value);
    return st;
}
