/* status.h - bk_status results, error messages that travel upward, and small shared helpers. */
#ifndef BK_STATUS_H
#define BK_STATUS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Every library function returns one of these; only main() prints and exits.
 * The process exit status a command maps to is in runner/cli.h. */
typedef enum bk_status {
    BK_OK = 0,
    BK_ERR_INPUT,       /* bad plan, snapshot, flag, message: the user's to fix */
    BK_ERR_SYSTEM,      /* a system call failed (errno in the message) */
    BK_ERR_TIMEOUT,     /* a bounded wait ran out */
    BK_ERR_PEER,        /* a peer process failed or sent garbage */
    BK_ERR_UNSUPPORTED, /* outside what this build or machine can do */
    BK_ERR_INTERNAL,    /* a bug or an unexpected library failure */
    BK_ERR_CONTRACT     /* a variant broke its contract (docs/variants.md): it mutated an
                           input, or a timed call did not compute what an untimed one does */
} bk_status;

/* The message buffer a failing call fills. The first failure writes `msg`;
 * callers that relay it upward append "file:line" to `trail`, so the user sees
 * what went wrong and a developer sees where. */
typedef struct bk_err {
    bk_status code;
    char msg[1024];
    char trail[256];
} bk_err;

/* Record a failure (printf-style message) and return `code`. A message already
 * set is kept: the first, most specific failure wins. `err` may be NULL. */
bk_status bk__fail_at(bk_err *err, bk_status code, const char *file, int line,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define BK_FAIL(err, code, ...) bk__fail_at((err), (code), __FILE__, __LINE__, __VA_ARGS__)

/* Append where an error passed through; returns err->code. */
bk_status bk__relay_at(bk_err *err, bk_status code, const char *file, int line);

/* BK_TRY(call, err): run a bk_status call; on failure relay and `goto out`
 * (the function's one exit path) with `st` holding the status. */
#define BK_TRY(call)                                                   \
    do {                                                               \
        st = (call);                                                   \
        if (st != BK_OK) {                                             \
            bk__relay_at(err, st, __FILE__, __LINE__);                 \
            goto out;                                                  \
        }                                                              \
    } while (0)

void bk_err_clear(bk_err *err);
const char *bk_status_name(bk_status st);

/* Monotonic clock in nanoseconds. */
uint64_t bk_now_ns(void);
/* The seconds a wait bounded by timeout_s may take when it must also end by end_ns
 * (bk_now_ns's clock; 0: no such end): timeout_s, or less with *cut set to 1 where end_ns
 * comes first (0 when end_ns has passed). An engine's waits on its peers end so before its
 * agent's time-out (timeouts.arm_s), and its failure names the peer it waited for. */
double bk_wait_bound(uint64_t end_ns, double timeout_s, int *cut);
/* What a wait that bk_wait_bound cut says of it */
#define BK_ARM_END_SAID "the arm's time ran out: timeouts.arm_s, less the time kept to report"
/* Sleep for `ns` nanoseconds (restarts on EINTR unless `interruptible`). */
void bk_sleep_ns(uint64_t ns);

/* The offset of the first control character in s (below 0x20, 0x7f, or a C1 control U+0080
 * to U+009F, UTF-8 0xc2 0x80-0x9f, which terminals may take as CSI and the like), or -1.
 * Text bracket prints and records holds none: an escape sequence or a newline in it would
 * reach the terminal of whoever reads it. */
long bk_control_at(const char *s);
/* The same, a tab taken as text (plans and records, which took tabs before 2026-12-07: it
 * moves the cursor, nothing more) */
long bk_control_at_tab_ok(const char *s);
/* Make s printable UTF-8 in place, byte for byte (its length never changes): a tab, newline
 * or carriage return becomes a blank; any other control character (bk_control_at's) and
 * every byte of what is not UTF-8 (as jansson reads it: no overlong form, surrogate or code
 * point past U+10FFFF) becomes '?'. For text from outside (an engine's status, a library's
 * message, a host name) before it is judged, printed or recorded. Returns the bytes changed. */
size_t bk_text_clean(char *s);

/* The bytes of s's first max bytes that end between UTF-8 characters (for "%.*s"): all of s
 * when it is no longer, else max moved back to the start of the character it would cut. */
int bk_utf8_cut(const char *s, int max);

/* Copy at most dst_size-1 bytes and NUL-terminate; returns 0 when it fitted. */
int bk_strlcpy(char *dst, const char *src, size_t dst_size);
/* bk_strlcpy for text a reader sees (reasons): what does not fit is cut after the last
 * whole word that leaves room for "..." (blanks and ";,:" before the cut dropped; a single
 * word too long for the buffer cut where it must, between UTF-8 characters), and "..." ends
 * it. Returns 0 when it fitted. docs/rescore.py's cut_words is the same cut. */
int bk_strlcpy_words(char *dst, const char *src, size_t dst_size);
/* 1: bk_strlcpy_words cuts as bk_strlcpy does, where the bytes run out, as records written
 * before 2026-12-04 cut their reasons; `bracket score` rescores such a record so when the
 * reasons alone differ (process-wide; 0 restores the word cut). */
void bk_cut_reasons_by_bytes(int on);

/* Append " NAME=value" to the NUL-terminated buf (capacity len) for every environment
 * variable whose name starts with prefix, in name order; a value with a blank, a quote, a
 * backslash or a control character is written NAME="value" (\" \\ and \xHH inside), so the
 * words split on blanks stay whole. Entries that do not fit whole are
 * left out and counted at the end as " +N more" (room for it is kept). Returns the number
 * left out. */
int bk_env_words(const char *prefix, char *buf, size_t len);

#endif
