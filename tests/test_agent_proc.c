/* test_agent_proc.c - an engine process as the agent sees it: what bk_proc_kill records for
 * an engine that ended on its own before the kill, and for one the kill ended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "runner/agent.h"

static void spawn_sh(const char *script, bk_proc *p)
{
    char *argv[] = { "sh", "-c", (char *)script, NULL };
    bk_err err = { 0 };
    assert_int_equal(bk_proc_spawn("/bin/sh", argv, p, &err), BK_OK);
}

/* Wait until the child has ended, without reaping it (it stays a zombie for bk_proc_*). */
static void wait_unreaped(const bk_proc *p)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    assert_int_equal(waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOWAIT), 0);
}

/* A child that died of its own abort and is still unreaped (a zombie) when the runner
 * kills the lane after a peer failed: it crashed, it was not killed. */
static void test_kill_after_own_death(void **state)
{
    (void)state;
    bk_proc p;
    spawn_sh("kill -ABRT $$", &p);
    wait_unreaped(&p);
    assert_int_equal(p.done, 0);
    bk_proc_kill(&p, 2.0, 0);
    assert_int_equal(p.done, 1);
    assert_int_equal(p.signal, SIGABRT);
    assert_int_equal(p.killed, 0);
    assert_int_equal(p.timed_out, 0);
    char d[96];
    bk_proc_describe(&p, d, sizeof d);
    assert_non_null(strstr(d, "signal 6"));
    assert_null(strstr(d, "killed"));
}

/* A child still running at its time-out: killed by us, and said so. */
static void test_kill_running(void **state)
{
    (void)state;
    bk_proc p;
    spawn_sh("exec sleep 30", &p);
    bk_proc_kill(&p, 2.0, 1);
    assert_int_equal(p.done, 1);
    assert_int_equal(p.signal, SIGTERM);
    assert_int_equal(p.killed, 1);
    assert_int_equal(p.timed_out, 1);
    char d[96];
    bk_proc_describe(&p, d, sizeof d);
    assert_string_equal(d, "timed out (killed, signal 15)");
}

/* One that exited 0 before the kill keeps its exit status. */
static void test_kill_after_exit(void **state)
{
    (void)state;
    bk_proc p;
    spawn_sh("exit 0", &p);
    wait_unreaped(&p);
    bk_proc_kill(&p, 2.0, 0);
    assert_int_equal(p.killed, 0);
    assert_int_equal(p.exit_code, 0);
    char d[96];
    bk_proc_describe(&p, d, sizeof d);
    assert_string_equal(d, "exit 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_after_own_death),
        cmocka_unit_test(test_kill_running),
        cmocka_unit_test(test_kill_after_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
