# fault_lib.sh - helpers for the fault tests (tests/integration/test_fault_*.sh): runs in the
# background, bounded waits for this test's own engines. Sourced after lib.sh's settings.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# (lib.sh has made $IT_TMP this test's TMPDIR: its engines and private folders are in it)

# fail, as lib.sh's, after ending the run it_start began when it still runs: left alone its
# mpirun and ranks would outlive the failed test by up to 600 s (timeout 600)
fail() {
    echo "FAIL: $*" >&2
    stop_run
    exit 1
}

# stop_run: end and reap the run it_start began, if it is still running. SIGTERM to
# `timeout`, which relays it to mpirun and to its own process group (ranks included; a
# second SIGTERM makes mpirun kill the ranks at once); after 10 s, SIGKILL to that group.
# Only a running job of this shell is signalled, never a reaped PID reused since.
stop_run() {
    [ -n "${PID:-}" ] && jobs -rp | grep -qx "$PID" || return 0
    kill -TERM "$PID" 2>/dev/null || true
    local i
    for i in $(seq 100); do
        jobs -rp | grep -qx "$PID" || break
        sleep 0.1
    done
    if jobs -rp | grep -qx "$PID"; then
        kill -KILL -- "-$PID" 2>/dev/null || kill -KILL "$PID" 2>/dev/null || true
    fi
    wait "$PID" 2>/dev/null || true
}

# free_port_pair: prints a port P such that P and P + 1 are free on 127.0.0.1 (or nothing).
# Taken below the kernel's ephemeral range (ip_local_port_range): a bind to port 0 (mpirun's
# and Open MPI's own sockets, started between this probe and the coordinator's bind) is
# never handed one of them. A pair inside that range was once taken that way, and the run
# then failed with "port P ... is already in use" before any arm.
free_port_pair() {
    python3 -c '
import socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
start = max(1024, low - 2000) & ~1
for p in range(start, start + 2000, 2):
    ss = []
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); ss.append(s)
        print(p); break
    except OSError:
        pass
    finally:
        for s in ss: s.close()'
}

# it_start NAME NP [bracket run args...]: like it_run, in the background; sets PID, OUT
it_start() {
    local name=$1 np=$2
    shift 2
    OUT=$IT_TMP/$name.log
    OUTDIR=$IT_TMP/out-$name
    timeout 600 mpirun "${MPIRUN_FLAGS[@]}" -np "$np" "$BK_BRACKET" run "$@" --out "$OUTDIR" \
        --quiet >"$OUT" 2>&1 &
    PID=$!
}

# it_wait: wait for the run it_start began; sets RC and RECORD, prints its output
it_wait() {
    set +e
    wait "$PID"
    RC=$?
    set -e
    RECORD=$(ls -d "$OUTDIR"/*/record.json 2>/dev/null | head -n 1 || true)
    echo "---- exit $RC"
    cat "$OUT"
}

# engine_pids ARM: pids of this test's engines of arm ARM (none: empty)
engine_pids() {
    pgrep -f "bracket engine --plan $IT_TMP/[^ ]* --run [^ ]* --arm $1 " || true
}

# wait_engines ARM N: until N engines of arm ARM run (at most 120 s); sets EPIDS
wait_engines() {
    local i
    for i in $(seq 1200); do
        EPIDS=$(engine_pids "$1")
        [ "$(echo "$EPIDS" | grep -c .)" -ge "$2" ] && return 0
        if ! kill -0 "$PID" 2>/dev/null; then
            it_wait
            fail "the run ended before arm $1 started"
        fi
        sleep 0.1
    done
    fail "no $2 engines of arm $1 within 120 s"
}

# rank_pids: this test's bracket ranks (not mpirun, not timeout)
rank_pids() {
    pgrep -f "^$BK_BRACKET run .*--out $IT_TMP/" || true
}

# expect_no_ranks: within 5 s no rank of this test is left
expect_no_ranks() {
    local i
    for i in $(seq 50); do [ -z "$(rank_pids)" ] && break; sleep 0.1; done
    [ -z "$(rank_pids)" ] || fail "ranks left behind: $(rank_pids)"
}

# find_rank0: sets RANK0, the MPI rank 0 of the run it_start began: the rank whose environment
# says OMPI_COMM_WORLD_RANK=0 (rank_pids does not list the janitors: they blank their command
# lines)
find_rank0() {
    local p
    RANK0=
    for p in $(rank_pids); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && RANK0=$p
    done
    [ -n "$RANK0" ] || fail "no MPI rank 0 among the ranks $(rank_pids)"
}

# engines_met PID...: 0 when every one of these cpu engines maps its lane's segments, all of
# them unlinked ("(deleted)"). Its lane has met then, past the rendezvous: from there on an
# engine needs rank 0 only to read what it sends
engines_met() {
    local p maps
    for p in "$@"; do
        maps=$(grep ' /dev/shm/bk-' "/proc/$p/maps" 2>/dev/null) || return 1
        ! grep -qv ' (deleted)$' <<<"$maps" || return 1
    done
}
# wait_met PID...: until engines_met, at most 30 s
wait_met() {
    local i
    for i in $(seq 600); do engines_met "$@" && return 0; sleep 0.05; done
    fail "the engines $* did not meet within 30 s"
}

# agent_of_first_engine: sets AGENT, the agent (an MPI rank) whose engine is the first of
# EPIDS (wait_engines)
agent_of_first_engine() {
    AGENT=$(ps -o ppid= -p "$(echo "$EPIDS" | head -n 1)" | tr -d ' ')
    [ -n "$AGENT" ] || fail "no agent for the engine $(echo "$EPIDS" | head -n 1)"
}

# final_record: 0 when the run it_start began has written its final record, in which arm C
# ran (the unfinished record written before arm C has it not run)
final_record() {
    local rec
    rec=$(ls -d "$OUTDIR"/*/record.json 2>/dev/null | head -n 1 || true)
    [ -n "$rec" ] && python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['arms'][1]['ran'] else 1)" "$rec"
}

# mpi_segments: Open MPI's shared-memory segments in /dev/shm (btl vader / sm), sorted
mpi_segments() {
    ls /dev/shm 2>/dev/null | grep -E '^(vader|sm)_segment\.' | sort || true
}

# expect_no_new_mpi_segments BEFORE: within 5 s, no segment of Open MPI's that was not
# there in BEFORE (mpi_segments' output before the run): the ranks' janitors remove their
# own when Open MPI could not (janitor.h, bk_janitor_add_mpi_segments)
expect_no_new_mpi_segments() {
    local new i
    for i in $(seq 50); do
        new=$(comm -13 <(echo "$1") <(mpi_segments))
        [ -z "$new" ] && return 0
        sleep 0.1
    done
    fail "Open MPI's shared-memory segments left in /dev/shm: $(echo $new)"
}

# expect_no_private_dirs: no agent folder (plan copy, key file) and no coordinator folder
# of this test's runs is left in $TMPDIR
expect_no_private_dirs() {
    local left
    left=$(ls -d "$IT_TMP"/bracket-* 2>/dev/null || true)
    [ -z "$left" ] || fail "private folders left behind: $left"
}

# term_mpirun: SIGTERM to the mpirun of the run it_start began, then it_wait; the run must
# exit nonzero and leave a (partial) record. Signal mpirun itself: `timeout` would relay the
# signal twice (to its child and to its process group), and a second SIGTERM makes mpirun
# kill the ranks at once.
term_mpirun() {
    local mpirun
    mpirun=$(pgrep -P "$PID" -x mpirun || true)
    [ -n "$mpirun" ] || fail "no mpirun under $PID"
    kill -TERM "$mpirun"
    it_wait_terminated
}

# it_wait_terminated: it_wait for a run that was terminated: it must exit nonzero and leave a
# (partial) record
it_wait_terminated() {
    it_wait
    [ "$RC" != 0 ] || fail "a terminated run exited 0"
    [ -n "$RECORD" ] || fail "no partial record written"
}

# expect_arm_whole IDX N WHY: arm IDX of $RECORD ran and stands: ok, its N processes ended
# with exit 0, their statuses in and every sample received (else fail WHY)
expect_arm_whole() {
    python3 - "$RECORD" "$1" "$2" <<'PY' || fail "$3"
import json, sys
r, i, n = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
a = r["arms"][i]
assert a["ran"] and a["ok"], a.get("reason")
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
assert len(a["processes"]) == n, a["processes"]
for p in a["processes"]:
    assert p["exit_code"] == 0 and p["status_ok"] and p["samples_received"] == want, p
PY
}

# expect_hang_named HUNG N WANT LO HI: arm C of $RECORD (N processes) failed because the
# engine HUNG (a pid) hung: the runner killed it (not its agent's time-out), and its lane peers
# named its lane rank in their failed statuses, WANT with %d for that rank, saying the arm's
# time ran out; they and arm C ended within [LO, HI) s of their starts; B' did not run
expect_hang_named() {
    python3 - "$RECORD" "$@" <<'PY' || fail "the record does not name the hung engine through its peers"
import json, sys
r = json.load(open(sys.argv[1]))
pid, n, fmt = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lo, hi = float(sys.argv[5]), float(sys.argv[6])
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
hung = [p for p in c["processes"] if p["pid"] == pid]
peers = [p for p in c["processes"] if p["pid"] != pid]
assert len(hung) == 1 and len(peers) == n - 1, c["processes"]
hung = hung[0]
# killed by the runner after its peers failed, before its agent's time-out
assert hung["killed"] and not hung["timed_out"], hung
want = fmt % hung["lane_rank"]
named = [p for p in peers if want in p["status_message"]]
assert named, (want, [p["status_message"] for p in peers])
for p in named:
    assert "the arm's time ran out" in p["status_message"], p["status_message"]
    assert not p["timed_out"] and p["status_seen"] and not p["status_ok"], p
    assert lo <= p["spawn_to_exit_s"] < hi, (lo, hi, p)
assert want in c["reason"], (want, c["reason"])
assert lo <= c["wall_s"] < hi, ("arm C's wall_s", lo, hi, c["wall_s"])
assert not r["arms"][2]["ran"], "B' ran after a failed C"
print("named by %d peer(s): %s" % (len(named), named[0]["status_message"]))
PY
}

# expect_terminated_clean: `stopped` names the signal and the arm it stopped; `bracket score`
# recomputes the partial record's verdict from its samples; and no rank, engine, segment or
# private folder of this test is left behind
expect_terminated_clean() {
    python3 - "$RECORD" <<'PY' || fail "stopped does not say the run was terminated"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["stopped"].startswith("terminated by SIG"), r["stopped"]
assert " during arm " in r["stopped"] or " before arm " in r["stopped"], r["stopped"]
PY
    "$BK_BRACKET" score "$RECORD" >"$IT_TMP/score.log" 2>&1 || true
    cat "$IT_TMP/score.log"
    grep -q "identical to the record" "$IT_TMP/score.log" || fail "bracket score differs from the record"
    local i
    for i in $(seq 50); do [ -z "$(rank_pids)$(engine_pids '.*')" ] && break; sleep 0.1; done
    [ -z "$(rank_pids)" ] || fail "ranks left behind: $(rank_pids)"
    expect_no_leftovers
    expect_no_private_dirs
}
