/* terminate.c - note SIGTERM / SIGINT for the polling loops of rank 0 and the agents. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "runner/terminate.h"

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    if (!g_signal)
        g_signal = sig;
}

int bk_terminate_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return -1;
    return 0;
}

int bk_terminate_signal(void) { return (int)g_signal; }

const char *bk_terminate_name(void)
{
    static char buf[24];
    int s = (int)g_signal;
    if (!s)
        return "";
    if (s == SIGTERM)
        return "SIGTERM";
    if (s == SIGINT)
        return "SIGINT";
    snprintf(buf, sizeof buf, "signal %d", s);
    return buf;
}
