/* plan.c - loading a bracket.plan/1 file: read and parse (jansson), apply --set overrides,
 * validate (plan_check.c), and hand out the plan as run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plans/plan.h"
#include "plans/plan_internal.h"
#include "runner/record_io.h"

/* "LABEL:LINE:COLUMN: syntax error: TEXT" from jansson's error. */
static bk_status syntax_error(const char *label, const json_error_t *je, bk_err *err)
{
    /* jansson's text names its own decoder flag, which a plan's author cannot give */
    const char *text = strstr(je->text, "JSON_ALLOW_NUL") ? "\\u0000 (a NUL character) is not "
                                                          "allowed in a plan's strings"
                                                        : je->text;
    return BK_FAIL(err, BK_ERR_INPUT, "%s:%d:%d: syntax error: %s", label, je->line,
                   je->column, text);
}

/* The candidate's `key` in the document as a string ("" when absent or not a string). */
static void candidate_str(const json_t *root, const char *key, char *buf, size_t len)
{
    const char *v = json_string_value(json_object_get(json_object_get(root, "candidate"), key));
    bk_strlcpy(buf, v ? v : "", len);
}

/* When the sets gave the candidate another variant and left its source digest as the file
 * has it, the digest still names the file's candidate: say so in p->source_digest_note. */
static void note_source_digest(const json_t *root, const char *variant, const char *digest,
                               bk_plan *p)
{
    char now[BK_DIGEST_LEN];
    candidate_str(root, "source_digest", now, sizeof now);
    p->source_digest_note[0] = '\0';
    if (!variant[0] || strcmp(variant, p->candidate.name) == 0 || strcmp(digest, now) != 0)
        return;
    snprintf(p->source_digest_note, sizeof p->source_digest_note, "candidate.source_digest: "
             "still the plan's (for %s); --set changed candidate.variant to %s: the record's "
             "identity.candidate_source_digest names the plan's candidate's source, not %s's",
             variant, p->candidate.name, p->candidate.name);
}

/* Where the --set path a..a+n stands to the refusal's path p..p+m: 2 the refusal's field
 * is the set's or inside it, 1 the set's lies inside the refusal's field, 0 neither. */
static int set_relation(const char *a, size_t n, const char *p, size_t m)
{
    const size_t k = n < m ? n : m;
    if (k == 0 || strncmp(a, p, k) != 0)
        return 0;
    if (n <= m)
        return n == m || p[n] == '.' || p[n] == '[' ? 2 : 0;
    return a[m] == '.' || a[m] == '[' ? 1 : 0;
}

/* How a --set is named: whole up to 200 bytes; longer (a list of shapes), by its path,
 * "workload.shapes=...", cut between characters where the path itself is longer. */
static void set_shown(const char *set, char *buf, size_t len)
{
    const char *eq = strchr(set, '=');
    if (strlen(set) <= 200 || !eq)
        snprintf(buf, len, "%s", set);
    else
        snprintf(buf, len, "%.*s=...", bk_utf8_cut(set, (int)(eq - set < 200 ? eq - set : 200)),
                 set);
}

/* Where --set i stands to the refusal's field or fields "A x B" (path..end, made printable
 * as BK_FAIL's messages are: the set's path is compared made so too): as set_relation; 0
 * for a set without '=' and for one that a later set of its path, or of a path around it,
 * replaced. */
static int set_relation_to(const char *const *sets, int nsets, int i, const char *path,
                           const char *end)
{
    const char *eq = strchr(sets[i], '=');
    char a[1024];
    if (!eq || (size_t)(eq - sets[i]) >= sizeof a)
        return 0;
    const size_t n = (size_t)(eq - sets[i]);
    for (int j = i + 1; j < nsets; j++) {
        const char *eqj = strchr(sets[j], '=');
        if (eqj && set_relation(sets[j], (size_t)(eqj - sets[j]), sets[i], n) == 2)
            return 0;
    }
    memcpy(a, sets[i], n);
    a[n] = '\0';
    bk_text_clean(a);
    int rel = 0;
    for (const char *p = path; p < end && !rel;) {
        const char *x = strstr(p, " x ");
        const char *pe = x && x < end ? x : end;
        rel = set_relation(a, n, p, (size_t)(pe - p));
        p = pe == end ? end : pe + 3;
    }
    return rel;
}

void bk_plan_name_set(const char *label, const char *const *sets, int nsets, char *msg,
                      size_t len)
{
    char lab[1024]; /* the label as the message has it: made printable */
    const size_t ll = strlen(label);
    if (!msg || ll >= sizeof lab)
        return;
    memcpy(lab, label, ll + 1);
    bk_text_clean(lab);
    if (strncmp(msg, lab, ll) != 0 || strncmp(msg + ll, ": ", 2) != 0)
        return;
    const char *path = msg + ll + 2, *end = strstr(path, ": ");
    if (!end)
        return;
    /* the --set that gave the refused field (or a field around it): that one alone; else
     * every --set inside the field, in their order */
    int inner[64], ninner = 0; /* the commands take 64 --set at most */
    for (int i = nsets - 1; i >= 0; i--) {
        const int rel = set_relation_to(sets, nsets, i, path, end);
        if (rel == 2) {
            inner[0] = i;
            ninner = -1;
            break;
        }
        if (rel == 1 && ninner < 64)
            inner[ninner++] = i;
    }
    if (ninner == 0)
        return;
    char tail[1024], set[260];
    size_t k = 0;
    const size_t used = strlen(msg);
    if (ninner < 0) {
        set_shown(sets[inner[0]], set, sizeof set);
        k = (size_t)snprintf(tail, sizeof tail, " (from --set \"%s\")", set);
    } else {
        k = (size_t)snprintf(tail, sizeof tail, " (");
        for (int q = ninner - 1; q >= 0 && k < sizeof tail; q--) {
            set_shown(sets[inner[q]], set, sizeof set);
            k += (size_t)snprintf(tail + k, sizeof tail - k, "%s--set \"%s\"",
                                  q == ninner - 1 ? "" : q == 0 ? " and " : ", ", set);
        }
        if (k < sizeof tail)
            k += (size_t)snprintf(tail + k, sizeof tail - k, " changed it)");
        if (k >= sizeof tail || used + k >= len) { /* too many to name: the last, counted */
            set_shown(sets[inner[0]], set, sizeof set);
            k = (size_t)snprintf(tail, sizeof tail, " (--set \"%s\" and %d other --set "
                                 "changed it)", set, ninner - 1);
        }
    }
    bk_text_clean(tail);
    if (k < sizeof tail && used + k < len) /* whole, or not at all */
        memcpy(msg + used, tail, k + 1);
}

/* A whole number written with a fraction part of zero (2.0, 1e3) among a params object's
 * values becomes the integer, as the schema's integer fields do: the variants' checks take
 * integers, and the plan is recorded with the integer. Exact doubles only (|v| <= 2^53). */
static void params_whole_numbers(json_t *root)
{
    static const char *const arms[] = { "incumbent", "candidate" };
    for (size_t a = 0; a < sizeof arms / sizeof arms[0]; a++) {
        json_t *params = json_object_get(json_object_get(root, arms[a]), "params");
        const char *key;
        json_t *v;
        json_object_foreach(params, key, v) {
            const double d = json_is_real(v) ? json_real_value(v) : 0.5;
            if (d == floor(d) && fabs(d) <= 9007199254740992.0)
                json_object_set_new(params, key, json_integer((json_int_t)d));
        }
    }
}

/* Takes `root` (NULL-safe). Applies the sets, validates, and on success moves
 * the document into `out`; on failure frees everything and zeroes `out`. */
static bk_status finish(json_t *root, const char *label, const char *const *sets, int nsets,
                        bk_plan *out, bk_err *err)
{
    bk_status st = BK_OK;
    char variant[BK_NAME_LEN], digest[BK_DIGEST_LEN];
    if (!json_is_object(root)) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: the plan must be a JSON object", label);
        goto out;
    }
    candidate_str(root, "variant", variant, sizeof variant);
    candidate_str(root, "source_digest", digest, sizeof digest);
    /* the leaves --set added: an unknown key among them is the --set's, not the file's */
    char(*made)[BK__SET_PATH_LEN] = nsets ? calloc((size_t)nsets, sizeof *made) : NULL;
    if (nsets && !made) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", label);
        goto out;
    }
    for (int i = 0; i < nsets && st == BK_OK; i++)
        st = bk__plan_apply_set(root, sets[i], made[i], sizeof made[i], err);
    if (st == BK_OK)
        params_whole_numbers(root);
    /* plans' text is printed and recorded as it is: a control character anywhere (a value,
     * a key, params, one a --set put in; a tab is text) is refused here, as records hold none */
    char where[256] = "";
    long at = -1;
    unsigned char byte = 0;
    if (st == BK_OK && bk_json_control_in(root, where, sizeof where, &at, &byte))
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: %s: must not contain control characters (byte "
                     "0x%02x at offset %ld)", label, where, byte, at);
    if (st == BK_OK && (st = bk__plan_check(root, label, out, err)) == BK_ERR_INPUT)
        for (int i = nsets - 1; i >= 0; i--) {
            char said[sizeof err->msg];
            snprintf(said, sizeof said, "%s: %s: unknown key", label, made[i]);
            bk_text_clean(said); /* as BK_FAIL made the message */
            if (made[i][0] && strcmp(err->msg, said) == 0) {
                snprintf(err->msg, sizeof err->msg, "--set \"%s\": %s: unknown key", sets[i],
                         made[i]);
                bk_text_clean(err->msg);
                break;
            }
        }
    free(made);
    if (st == BK_ERR_INPUT)
        bk_plan_name_set(label, sets, nsets, err->msg, sizeof err->msg);
    if (st != BK_OK)
        goto out;
    if (nsets)
        note_source_digest(root, variant, digest, out);
    /* the params objects live in the document; the plan holds its own references */
    out->incumbent.params = json_incref(json_object_get(json_object_get(root, "incumbent"),
                                                        "params"));
    out->candidate.params = json_incref(json_object_get(json_object_get(root, "candidate"),
                                                        "params"));
    out->doc = root;
    root = NULL;
out:
    json_decref(root);
    if (st != BK_OK)
        bk_plan_free(out);
    return st;
}

bk_status bk_plan_parse(const char *text, const char *label, const char *const *sets,
                        int nsets, bk_plan *out, bk_err *err)
{
    json_error_t je;
    json_t *root;

    memset(out, 0, sizeof *out);
    if (!label)
        label = "(plan)";
    if (!text)
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: no plan text", label);
    if (!(root = json_loads(text, JSON_REJECT_DUPLICATES, &je)))
        return syntax_error(label, &je, err);
    bk_strlcpy(out->path, label, sizeof out->path);
    return finish(root, label, sets, nsets, out, err);
}

/* json_load_callback's source: the plan's stream, read as jansson asks, noting where the
 * first NUL byte is (jansson stops at one as at the end of the file, and then says "near end
 * of file", which is not where the file ends). */
typedef struct plan_src {
    FILE *f;
    size_t read;
    long long nul_at; /* -1: none yet */
} plan_src;

static size_t plan_read(void *buf, size_t len, void *data)
{
    plan_src *s = data;
    size_t n = fread(buf, 1, len, s->f);
    const char *z = s->nul_at < 0 ? memchr(buf, '\0', n) : NULL;
    if (z)
        s->nul_at = (long long)(s->read + (size_t)(z - (const char *)buf));
    s->read += n;
    return n == 0 && ferror(s->f) ? (size_t)-1 : n;
}

bk_status bk_plan_load(const char *path, const char *const *sets, int nsets, bk_plan *out,
                       bk_err *err)
{
    json_error_t je;
    json_t *root;
    struct stat sb;
    FILE *f;

    memset(out, 0, sizeof *out);
    if (!(f = fopen(path, "rb")))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) != 0 || S_ISDIR(sb.st_mode)) {
        int e = S_ISDIR(sb.st_mode) ? EISDIR : errno;
        fclose(f);
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(e));
    }
    /* an editor's UTF-8 byte order mark: jansson quotes it as an invisible character (a
     * regular file only: a pipe, <(...), cannot be read again from its start) */
    unsigned char bom[3] = { 0 };
    if (S_ISREG(sb.st_mode) && fread(bom, 1, 3, f) == 3 && bom[0] == 0xEF && bom[1] == 0xBB &&
        bom[2] == 0xBF) {
        fclose(f);
        return BK_FAIL(err, BK_ERR_INPUT, "%s:1:1: starts with a UTF-8 byte order mark (bytes "
                       "EF BB BF), which JSON does not allow: save the plan without it", path);
    }
    if (S_ISREG(sb.st_mode))
        rewind(f);
    plan_src src = { f, 0, -1 };
    root = json_load_callback(plan_read, &src, JSON_REJECT_DUPLICATES, &je);
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        json_decref(root);
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", path, strerror(e));
    }
    fclose(f);
    if (!root && src.nul_at >= 0 && src.nul_at <= (long long)je.position)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: a NUL byte at offset %lld (a plan is JSON text, "
                       "which has none: is this the plan file?)", path, src.nul_at);
    if (!root)
        return syntax_error(path, &je, err);
    bk_strlcpy(out->path, path, sizeof out->path);
    return finish(root, path, sets, nsets, out, err);
}

void bk_plan_free(bk_plan *plan)
{
    if (!plan)
        return;
    json_decref(plan->incumbent.params);
    json_decref(plan->candidate.params);
    json_decref(plan->doc);
    memset(plan, 0, sizeof *plan);
}

char *bk_plan_dump(const bk_plan *plan)
{
    if (!plan || !plan->doc)
        return NULL;
    return json_dumps(plan->doc, JSON_SORT_KEYS | JSON_COMPACT);
}

int bk_plan_loose_quality_text(const bk_plan *p, char *buf, size_t len)
{
    const int r = p->quality.rtol >= 1.0, a = p->quality.atol >= 1.0;
    if (len)
        buf[0] = '\0';
    if (!r && !a)
        return 0;
    char rt[96] = "", at[128] = "";
    if (r)
        snprintf(rt, sizeof rt, "quality.rtol %g lets an output of 0 pass wherever the reference "
                 "is", p->quality.rtol);
    if (a)
        snprintf(at, sizeof at, "quality.atol %g lets any output within %g of the reference "
                 "pass, more than the targets' outputs are in size", p->quality.atol,
                 p->quality.atol);
    snprintf(buf, len, "%s%s%s: the quality check (the audit, bracket verify) checks little", rt,
             r && a ? "; " : "", at);
    return 1;
}

int bk_plan_eager_decode_text(const bk_plan *p, bk_backend b, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (b != BK_BACKEND_CUDA || p->workload.phase != BK_PHASE_DECODE ||
        strcmp(p->arena.graph_mode, "eager") != 0)
        return 0;
    snprintf(buf, len, "decode is timed eagerly (arena.graph_mode \"eager\"; a plan without "
             "it gets eager): serving stacks replay decode steps as CUDA graphs, so a speed-up "
             "measured without them is evidence about a debugging mode, not the arena, unless "
             "the arena publishes eager decode (\"graph\" times the step as a graph replay)");
    return 1;
}

const char *bk_phase_name(bk_phase p)
{
    switch (p) {
    case BK_PHASE_DECODE: return "decode";
    case BK_PHASE_PREFILL: return "prefill";
    case BK_PHASE_CHUNKED_PREFILL: return "chunked_prefill";
    }
    return "unknown";
}

const char *bk_backend_name(bk_backend b)
{
    switch (b) {
    case BK_BACKEND_AUTO: return "auto";
    case BK_BACKEND_CPU: return "cpu";
    case BK_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

const char *bk_drift_policy_name(bk_drift_policy p)
{
    switch (p) {
    case BK_DRIFT_EXCLUDE_LATER: return "exclude_later";
    case BK_DRIFT_STRICT: return "strict";
    }
    return "unknown";
}

const char *bk_lane_policy_name(bk_lane_policy p)
{
    switch (p) {
    case BK_LANES_DISJOINT: return "disjoint";
    case BK_LANES_SHARED: return "shared";
    }
    return "unknown";
}
