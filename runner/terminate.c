/* terminate.c - note SIGTERM / SIGINT / SIGHUP for the polling loops of rank 0 and the
 * agents (SIGHUP: the terminal that started the job closed). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runner/terminate.h"

#define MAX_PATHS 8

static volatile sig_atomic_t g_signal;
static char g_paths[MAX_PATHS][512];
static volatile sig_atomic_t g_npaths;

static void on_signal(int sig)
{
    if (g_signal)
        return;
    g_signal = sig;
    /* unlink and rmdir are async-signal-safe */
    for (int i = 0; i < g_npaths; i++)
        if (unlink(g_paths[i]) != 0)
            rmdir(g_paths[i]);
}

void bk_terminate_remove_on_signal(const char *path)
{
    if (g_npaths >= MAX_PATHS || strlen(path) >= sizeof g_paths[0])
        return;
    memcpy(g_paths[g_npaths], path, strlen(path) + 1);
    g_npaths = g_npaths + 1;
}

int bk_terminate_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction hup;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGHUP, NULL, &hup) != 0)
        return -1;
    /* a SIGHUP ignored from the start (nohup) stays ignored: the run outlives its terminal */
    if (hup.sa_handler != SIG_IGN && sigaction(SIGHUP, &sa, NULL) != 0)
        return -1;
    return 0;
}

int bk_terminate_signal(void) { return (int)g_signal; }

const char *bk_terminate_name(void) { return bk_terminate_signame((int)g_signal); }

const char *bk_terminate_signame(int s)
{
    static char buf[24];
    if (!s)
        return "";
    if (s == SIGTERM)
        return "SIGTERM";
    if (s == SIGINT)
        return "SIGINT";
    if (s == SIGHUP)
        return "SIGHUP";
    snprintf(buf, sizeof buf, "signal %d", s);
    return buf;
}

void bk_terminate_mark(bk_score *sc, char *stopped, size_t len)
{
    bk_terminate_mark_as(sc, bk_terminate_name(), stopped, len);
}

void bk_terminate_mark_as(bk_score *sc, const char *name, char *stopped, size_t len)
{
    char why[sizeof sc->reasons + 32];
    snprintf(why, sizeof why, "terminated by %s%s%s", name, sc->reasons[0] ? "; " : "",
             sc->reasons);
    bk_strlcpy_words(sc->reasons, why, sizeof sc->reasons); /* cut at the end if it must */
    sc->verdict = BK_VERDICT_NO_DECISION;
    bk_strlcpy(sc->status, "no_decision", sizeof sc->status);
    if (!stopped[0])
        snprintf(stopped, len, "terminated by %s", name);
}

void bk_terminate_mark_unfinished(bk_score *sc, const char *arm)
{
    char why[sizeof sc->reasons + 128];
    snprintf(why, sizeof why, "unfinished: the run ended during or before arm %s without "
             "writing its final record%s%s", arm, sc->reasons[0] ? "; " : "", sc->reasons);
    bk_strlcpy_words(sc->reasons, why, sizeof sc->reasons); /* cut at the end if it must */
    sc->verdict = BK_VERDICT_NO_DECISION;
    bk_strlcpy(sc->status, "no_decision", sizeof sc->status);
}
