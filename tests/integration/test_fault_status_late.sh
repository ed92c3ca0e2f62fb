#!/usr/bin/env bash
# The engines' statuses reach rank 0 after the agents' reports. Rank 0's ZeroMQ I/O threads
# are held (ptrace, thread by thread: its main thread runs on) while arm C's engines end, so
# the reports (MPI) come in while the engines' last samples and statuses wait in rank 0's
# sockets; the threads are let go 0.3 s later. Rank 0 must not judge C before it has read
# them:
#   plain  its grace once every engine has ended (2 s) covers them: C stands with every sample
#          and status, and the run goes on to its verdict (R19);
#   term   a SIGTERM to rank 0 comes first, and the threads go 50 ms after it: within the
#          500 ms after a signal, rank 0 still waits for the statuses of engines that ended
#          well, so C stands, and the run stops before B' (NO_DECISION).
. "$(dirname "$0")/fault_lib.sh"
set -e

# hold PID READY GO: seize and stop every ZeroMQ I/O thread of PID, touch READY, and let them
# go once GO exists (at most 180 s; the threads also go if this process dies: a seized
# tracee is detached when its tracer exits). Exit 77 when ptrace is not allowed here, or
# when libzmq does not name its I/O threads.
hold() {
    python3 - "$@" <<'PY'
import ctypes, os, sys, time
pid, ready, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000
def comm(t):
    try:
        return open("/proc/%d/task/%s/comm" % (pid, t)).read().strip()
    except OSError:
        return ""
tids = [int(t) for t in os.listdir("/proc/%d/task" % pid) if comm(t).startswith("ZMQbg/IO")]
if not tids:
    print("SKIP: no thread named ZMQbg/IO* in rank 0 (process %d): this libzmq does not name "
          "its I/O threads" % pid)
    sys.exit(77)
for t in tids:
    if libc.ptrace(SEIZE, t, None, None) != 0:
        print("SKIP: ptrace not allowed here (%s)" % os.strerror(ctypes.get_errno()))
        sys.exit(77)
    libc.ptrace(INTERRUPT, t, None, None)
    os.waitpid(t, WALL)
open(ready, "w").close()
for _ in range(9000):
    if os.path.exists(go):
        break
    time.sleep(0.02)
for t in tids:
    libc.ptrace(DETACH, t, None, None)
PY
}

# late plain|term: one run, as the header says
late() {
    local name=$1 term= i ended hrc=0
    [ "$name" = term ] && term=1
    rm -f "$IT_TMP/held" "$IT_TMP/go"
    # a candidate 11x slower keeps C timing for several seconds, longer than the steps below
    # need; each engine's 6000 x 2 samples fit in the loopback socket's buffers, so the
    # engines end while rank 0 reads nothing
    it_start "status-late-$name" 4 "$IT_PLAN" --set candidate.variant=slowed \
        --set 'candidate.params={"base":"shm_twopass","fraction":10}' \
        --set workload.iters=6000 --set timeouts.arm_s=300
    wait_engines C 2
    wait_met $(echo $EPIDS)
    find_rank0
    hold "$RANK0" "$IT_TMP/held" "$IT_TMP/go" &
    HOLDER=$!
    for i in $(seq 100); do
        [ -e "$IT_TMP/held" ] && break
        kill -0 $HOLDER 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -e "$IT_TMP/held" ]; then
        wait $HOLDER || hrc=$?
        if [ "$hrc" = 77 ]; then stop_run; exit 77; fi
        fail "$name: rank 0's ZeroMQ threads were not held (exit $hrc)"
    fi
    for i in $(seq 1200); do [ -z "$(engine_pids C)" ] && break; sleep 0.1; done
    ended=$([ -z "$(engine_pids C)" ] && echo 1 || echo 0)
    sleep 0.3 # the agents report within 5 ms of their engine's end
    if [ -n "$term" ]; then
        kill -TERM "$RANK0"
        sleep 0.05
    fi
    touch "$IT_TMP/go"
    wait $HOLDER || fail "$name: the holder of rank 0's ZeroMQ threads failed"
    [ "$ended" = 1 ] || fail "$name: arm C's engines did not end within 120 s, rank 0's ZeroMQ threads held"
    it_wait
    expect_arm_whole 1 2 "$name: arm C did not stand whole when its statuses came after its reports"
    python3 - "$RECORD" "$term" <<'PY' || fail "$name: the run did not end as it should after arm C"
import json, sys
r, term = json.load(open(sys.argv[1])), sys.argv[2]
if term:
    assert r["verdict"] == "NO_DECISION", r["verdict"]
    assert r["stopped"] == "terminated by SIGTERM before arm B'", r["stopped"]
    assert [a["ran"] for a in r["arms"]] == [True, True, False, False, False], r["arms"]
else:
    assert all(a["ran"] for a in r["arms"]), [a["ran"] for a in r["arms"]]
PY
}

late plain
case $RC in 0|3|4) ;; *) fail "plain: the run exited $RC" ;; esac
expect_no_leftovers
late term
[ "$RC" != 0 ] || fail "term: a terminated run exited 0"
expect_terminated_clean
echo "PASS: statuses at least 0.3 s after the reports, alone and after a SIGTERM -> C stands whole"
