/* status.c - error recording and relay, clocks, string helpers. */
#define _POSIX_C_SOURCE 200809L
#include "runner/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bk_status bk__fail_at(bk_err *err, bk_status code, const char *file, int line,
                      const char *fmt, ...)
{
    if (!err)
        return code;
    if (err->code == BK_OK || err->msg[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* printed and recorded as it is: a path or a peer's text in it with an escape
         * sequence or a newline must not reach the terminal (nor a cut UTF-8 character) */
        bk_text_clean(err->msg);
        err->code = code;
        snprintf(err->trail, sizeof err->trail, "%s:%d", file, line);
    }
    return code;
}

bk_status bk__relay_at(bk_err *err, bk_status code, const char *file, int line)
{
    if (!err)
        return code;
    if (err->code == BK_OK)
        err->code = code;
    size_t n = strlen(err->trail);
    if (n + 2 < sizeof err->trail)
        snprintf(err->trail + n, sizeof err->trail - n, "%s%s:%d", n ? " <- " : "",
                 file, line);
    return err->code;
}

void bk_err_clear(bk_err *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

const char *bk_status_name(bk_status st)
{
    switch (st) {
    case BK_OK: return "ok";
    case BK_ERR_INPUT: return "bad input";
    case BK_ERR_SYSTEM: return "system error";
    case BK_ERR_TIMEOUT: return "time-out";
    case BK_ERR_PEER: return "peer failure";
    case BK_ERR_UNSUPPORTED: return "unsupported";
    case BK_ERR_INTERNAL: return "internal error";
    case BK_ERR_CONTRACT: return "contract broken";
    }
    return "unknown";
}

uint64_t bk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double bk_wait_bound(uint64_t end_ns, double timeout_s, int *cut)
{
    *cut = 0;
    if (!end_ns)
        return timeout_s;
    const uint64_t now = bk_now_ns();
    const double left = now < end_ns ? (double)(end_ns - now) / 1e9 : 0;
    if (left >= timeout_s)
        return timeout_s;
    *cut = 1;
    return left;
}

void bk_sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One environment entry as a word: NAME=value as it is, or NAME="value" when the value has a
 * blank, a quote, a backslash or a control character (quote and backslash escaped with a
 * backslash, control characters as \xHH), so words split on blanks stay whole. Returns the
 * length written to out (capacity 4 strlen(entry) + 3). */
static size_t env_word(const char *entry, char *out)
{
    const char *eq = strchr(entry, '=');
    const char *val = eq ? eq + 1 : entry + strlen(entry);
    int plain = 1;
    for (const unsigned char *p = (const unsigned char *)val; *p && plain; p++)
        plain = *p > ' ' && *p != '"' && *p != '\\' && *p != 0x7f;
    if (plain || !eq) {
        strcpy(out, entry);
        return strlen(entry);
    }
    size_t n = (size_t)(val - entry);
    memcpy(out, entry, n);
    out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)val; *p; p++) {
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p;
        } else if (*p < ' ' || *p == 0x7f) {
            n += (size_t)sprintf(out + n, "\\x%02x", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n++] = '"';
    out[n] = '\0';
    return n;
}

int bk_env_words(const char *prefix, char *buf, size_t len)
{
    extern char **environ;
    const size_t plen = strlen(prefix), room = 16; /* " +N more" */
    size_t n = 0, used = strlen(buf);
    int left = 0;
    for (char **e = environ; e && *e; e++)
        n += !strncmp(*e, prefix, plen);
    const char **v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v) {
        left = (int)n;
        n = 0;
    }
    size_t k = 0;
    for (char **e = environ; v && *e && k < n; e++)
        if (!strncmp(*e, prefix, plen))
            v[k++] = *e;
    if (k > 1)
        qsort(v, k, sizeof *v, cmp_str);
    for (size_t i = 0; i < k; i++) {
        char *word = malloc(4 * strlen(v[i]) + 3);
        size_t w = word ? env_word(v[i], word) + 1 : (size_t)-1 / 2;
        if (!word || used + w + room >= len) {
            left++;
            free(word);
            continue;
        }
        buf[used] = ' ';
        memcpy(buf + used + 1, word, w); /* with its NUL */
        used += w;
        free(word);
    }
    free(v);
    if (left && used + room < len)
        snprintf(buf + used, len - used, " +%d more", left);
    return left;
}

static long control_at(const char *s, int tab_ok)
{
    for (long i = 0; s[i]; i++)
        if (((unsigned char)s[i] < 0x20 && !(tab_ok && s[i] == '\t')) || s[i] == 0x7f ||
            ((unsigned char)s[i] == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
             (unsigned char)s[i + 1] <= 0x9f))
            return i;
    return -1;
}

long bk_control_at(const char *s)
{
    return control_at(s, 0);
}

long bk_control_at_tab_ok(const char *s)
{
    return control_at(s, 1);
}

/* The length of the UTF-8 character at p (2 to 4), or 0 where none starts there */
static int utf8_at(const unsigned char *p)
{
    const unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

size_t bk_text_clean(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t changed = 0;
    while (*p) {
        if (*p < 0x80) {
            if (*p == '\t' || *p == '\n' || *p == '\r') {
                *p = ' ';
                changed++;
            } else if (*p < 0x20 || *p == 0x7f) {
                *p = '?';
                changed++;
            }
            p++;
            continue;
        }
        const int n = utf8_at(p);
        if (n == 0 || (n == 2 && p[0] == 0xc2 && p[1] <= 0x9f)) { /* not UTF-8, or C1 */
            const int k = n ? n : 1;
            memset(p, '?', (size_t)k);
            changed += (size_t)k;
            p += k;
        } else {
            p += n;
        }
    }
    return changed;
}

int bk_utf8_cut(const char *s, int max)
{
    int n = 0;
    while (n < max && s[n])
        n++;
    if (n < max || !s[n])
        return n;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

int bk_strlcpy(char *dst, const char *src, size_t dst_size)
{
    size_t n = strlen(src);
    if (dst_size == 0)
        return -1;
    if (n >= dst_size) {
        memcpy(dst, src, dst_size - 1);
        dst[dst_size - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

static int g_cut_bytes; /* bk_cut_reasons_by_bytes */

void bk_cut_reasons_by_bytes(int on)
{
    g_cut_bytes = on;
}

int bk_strlcpy_words(char *dst, const char *src, size_t dst_size)
{
    size_t n = strlen(src);
    if (n < dst_size || g_cut_bytes)
        return bk_strlcpy(dst, src, dst_size);
    if (dst_size <= 4) {
        bk_strlcpy(dst, "...", dst_size);
        return -1;
    }
    size_t keep = dst_size - 4, cut = keep; /* room for "..." and the NUL */
    while (cut > 0 && src[cut] != ' ')
        cut--;
    if (cut == 0) /* one word longer than the buffer */
        for (cut = keep; cut > 0 && ((unsigned char)src[cut] & 0xC0) == 0x80;)
            cut--;
    while (cut > 0 && strchr(" ;,:", src[cut - 1]))
        cut--;
    memcpy(dst, src, cut);
    memcpy(dst + cut, "...", 4);
    return -1;
}
