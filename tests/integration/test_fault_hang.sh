#!/usr/bin/env bash
# An engine that hangs (stopped with SIGSTOP, as a wedged GPU context would stop) past the
# plan's timeouts.arm_s: its agent kills it, the lane is stopped, NO_DECISION with "timed
# out", the record intact, no process and no shared-memory segment left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# B must end well inside arm_s even on a loaded 2-core machine (arms of 4 ranks there ran
# 15-45x slower than alone, and 20000 iterations once timed B out at 8 s), while C must live
# long enough to be caught: 1000 iterations keep B near 0.1 s alone, and the `slowed`
# candidate (a busy wait of 10x the base time per iteration) keeps C's engines alive for
# over a second
it_start hang 4 "$IT_PLAN" --set timeouts.arm_s=10 --set timeouts.rendezvous_s=60 \
    --set workload.iters=1000 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}'
wait_engines C 2
HUNG=$(echo "$EPIDS" | head -n 1)
kill -STOP "$HUNG"
it_wait
expect_verdict NO_DECISION 4
grep -q "engine timed out after 10 s" "$OUT" || fail "the time-out is not reported"
python3 - "$RECORD" "$HUNG" <<'PY' || fail "the record does not show the hung engine"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
hung = [p for p in c["processes"] if p["pid"] == int(sys.argv[2])]
assert hung and hung[0]["timed_out"] and hung[0]["killed"], c["processes"]
# killed by its own agent at arm_s (10 s; 2 s of grace for SIGTERM), not by rank 0's last
# resort 15 s later: the engine lived well under 10 + 15 s
assert hung[0]["spawn_to_exit_s"] < 20, hung[0]
assert not r["arms"][2]["ran"], "B' ran after a failed C"
assert "timed out" in r["reasons"], r["reasons"]
PY
# its agent killed it at arm_s (10 s; 2 s more for SIGKILL after the SIGTERM a stopped process
# ignores): arm C ends before rank 0's hard deadline (arm_s + 15 s), which ends it only when
# the agents do not (their deadline taken from another timeout ended it at 29 s)
python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['arms'][1]['wall_s']; print('arm C wall_s', w); sys.exit(not 10 <= w < 25)" \
    "$RECORD" || fail "arm C did not end at timeouts.arm_s: wall_s not in [10, 25) s"
kill -0 "$HUNG" 2>/dev/null && fail "the hung engine $HUNG is still there"
expect_no_leftovers
echo "PASS: hung engine -> killed at arm_s, NO_DECISION, nothing left behind"
