#!/usr/bin/env bash
# An engine that aborts inside the timed loop: NO_DECISION with the reason, the
# record intact, no process and no shared-memory segment left behind; every rank exits with
# the run's status; under protocol.repeats the failed round ends the arm.
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

# every rank exits with the run's status (rank 0 sends it to the agents at the end), not
# only rank 0: a launcher that reports each rank's exit sees the verdict's code everywhere
# (mpirun told not to end the other ranks once one exits non-zero, so that each says its
# own; mpirun itself then exits 0)
cat >"$IT_TMP/rank.sh" <<'SH'
"$@"
rc=$?
echo "${OMPI_COMM_WORLD_RANK:-?} $rc" >>"$RANK_RCS"
exit $rc
SH
export RANK_RCS=$IT_TMP/rank-rcs
run_apps ranks --mca orte_abort_on_non_zero_status 0 -np 4 -x RANK_RCS \
    sh "$IT_TMP/rank.sh" "$BK_BRACKET" run "$IT_PLAN" --set candidate.variant=crash \
    --set 'candidate.params={"base":"shm_oneshot_fused","at_iter":5}' \
    --out "$IT_TMP/out-ranks" --quiet
grep -q "^verdict: NO_DECISION " "$OUT" || fail "ranks: expected verdict NO_DECISION"
[ "$(sort "$RANK_RCS" | tr '\n' ' ')" = "0 4 1 4 2 4 3 4 " ] ||
    fail "the ranks' exit statuses: $(sort "$RANK_RCS" | tr '\n' ' ')"

# with protocol.repeats, a round that failed ends the arm: rounds 2 and 3 of C never start
# (no processes spawned, the reason is round 1's), and B' does not run
it_run rounds 4 "$IT_PLAN" --set candidate.variant=crash --set protocol.repeats=3 \
    --set 'candidate.params={"base":"shm_oneshot_fused","at_iter":5}'
expect_verdict NO_DECISION 4
python3 - "$RECORD" <<'PY' || fail "a failed round did not end the arm"
import json, sys
r = json.load(open(sys.argv[1]))
b, c = r["arms"][0], r["arms"][1]
assert b["ok"] and b["rounds"] == 3 and all(p["pid"] for p in b["processes"]), b
assert c["ran"] and not c["ok"] and c["rounds"] == 3, c
assert [p["round"] for p in c["processes"] if p["pid"] or p["reported"]] == [1, 1], c["processes"]
assert c["reason"].startswith("round 1 of 3: ") and "round 2" not in c["reason"], c["reason"]
assert not r["arms"][2]["ran"], "B' ran after a failed C"
PY
expect_no_leftovers
echo "PASS: crash -> NO_DECISION (every rank exits 4; a failed round ends the arm), nothing left behind"
