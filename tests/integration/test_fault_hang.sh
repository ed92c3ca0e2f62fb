#!/usr/bin/env bash
# An engine that hangs (stopped with SIGSTOP, as a wedged GPU context would stop):
# 1. one engine of a lane of 2: its peer stops waiting for it before timeouts.arm_s ends
#    (a fifth of arm_s earlier, even with rendezvous_s longer than the arm), and the arm fails
#    naming the rank it waited for; the runner then kills the hung engine, not its agent's
#    time-out. NO_DECISION.
# 2. both engines of the lane: no one is left to name the other; their agents kill them at
#    arm_s, NO_DECISION with "timed out".
# Either way the record is intact, no process and no shared-memory segment left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# B must end well inside arm_s even on a loaded 2-core machine (arms of 4 ranks there ran
# 15-45x slower than alone, and 20000 iterations once timed B out at 8 s), while C must live
# long enough to be caught: 1000 iterations keep B near 0.1 s alone, and the `slowed`
# candidate (a busy wait of 10x the base time per iteration) keeps C's engines alive for
# over a second
hang() { # NAME ARM_S
    it_start "$1" 4 "$IT_PLAN" --set timeouts.arm_s="$2" --set timeouts.rendezvous_s=60 \
        --set workload.iters=1000 --set candidate.variant=slowed \
        --set 'candidate.params={"base":"shm_twopass","fraction":10}'
    wait_engines C 2
    # past the rendezvous: a stop before it, under the sanitizers' slow start, leaves the
    # peer waiting there for the coordinator's answer, which names no peer (the arm's end
    # cuts that wait too, "rendezvous: no answer ...", but not with the rank this test wants)
    wait_met $EPIDS
}

# ---- 1. one engine hangs: arm_s 30, so its peer stops waiting 6 s before it (at 24 s of its
# life) and the runner's kill (SIGKILL 2 s after a SIGTERM the stopped engine cannot act on)
# comes well before the agent's time-out at 30 s, even on a loaded machine
hang hang-one 30
HUNG=$(echo "$EPIDS" | head -n 1)
kill -STOP "$HUNG"
it_wait
expect_verdict NO_DECISION 4
# the peer waited to 24 s of its life (30 s less a fifth), not rendezvous_s's 60 s, and arm C
# ended before timeouts.arm_s (30 s)
expect_hang_named "$HUNG" 2 "barrier: rank %d did not arrive within" 20 30
kill -0 "$HUNG" 2>/dev/null && fail "the hung engine $HUNG is still there"
expect_no_leftovers

# ---- 2. the whole lane hangs: arm_s 10
hang hang-all 10
for p in $EPIDS; do kill -STOP "$p"; done
it_wait
expect_verdict NO_DECISION 4
grep -q "engine timed out after 10 s" "$OUT" || fail "the time-out is not reported"
python3 - "$RECORD" $EPIDS <<'PY' || fail "the record does not show the hung engines"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
pids = set(int(p) for p in sys.argv[2:])
hung = [p for p in c["processes"] if p["pid"] in pids]
assert len(hung) == 2, c["processes"]
for h in hung:
    # killed by its own agent at arm_s (10 s; 2 s of grace for SIGTERM), not by rank 0's
    # last resort 15 s later: the engine lived well under 10 + 15 s
    assert h["timed_out"] and h["killed"], h
    assert h["spawn_to_exit_s"] < 20, h
assert not r["arms"][2]["ran"], "B' ran after a failed C"
assert "timed out" in r["reasons"], r["reasons"]
PY
# their agents killed them at arm_s (10 s; 2 s more for SIGKILL after the SIGTERM a stopped
# process ignores): arm C ends before rank 0's hard deadline (arm_s + 15 s), which ends it only
# when the agents do not (their deadline taken from another timeout ended it at 29 s)
python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['arms'][1]['wall_s']; print('arm C wall_s', w); sys.exit(not 10 <= w < 25)" \
    "$RECORD" || fail "arm C did not end at timeouts.arm_s: wall_s not in [10, 25) s"
for p in $EPIDS; do kill -0 "$p" 2>/dev/null && fail "the hung engine $p is still there"; done
expect_no_leftovers
echo "PASS: a hung engine is named by its peer before arm_s; a hung lane is killed at arm_s;" \
    "NO_DECISION, nothing left behind"
