#!/usr/bin/env bash
# An engine that aborts inside the timed loop: NO_DECISION with the reason, the
# record intact, no process and no shared-memory segment left behind.
. "$(dirname "$0")/lib.sh"
set -e
it_run crash 4 "$IT_PLAN" --set candidate.variant=crash \
    --set 'candidate.params={"base":"shm_oneshot_fused","at_iter":5}'
expect_verdict NO_DECISION 4
grep -q "engine crashed: signal 6" "$OUT" || fail "the crash reason is not reported"
python3 - "$RECORD" <<'PY' || fail "record does not show the crash"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["arms"][1]
assert c["name"] == "C" and c["ran"] and not c["ok"], c
assert any(p["signal"] == 6 for p in c["processes"]), c["processes"]
# every rank aborts at at_iter: one that died of its own SIGABRT was not killed by the
# runner, even when the runner's kill (after the first crash) reached it unreaped
own = [p for p in c["processes"] if p["signal"] == 6]
assert all(not p["killed"] and "killed" not in p["ended"] for p in own), own
assert not r["arms"][2]["ran"], "B' ran after a failed C"
assert "crashed" in r["reasons"], r["reasons"]
PY
expect_rescore
expect_no_leftovers
echo "PASS: crash -> NO_DECISION, nothing left behind"
