#!/usr/bin/env bash
# SIGTERM to the job's launcher while arm C runs (scancel, a Slurm time limit, a user's
# kill): a partial record with verdict NO_DECISION and reason `terminated`, a nonzero exit,
# and no engine, rank or shared-memory segment left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# a candidate 11x slower over 6000 iterations keeps arm C running for seconds (mpirun relays a SIGTERM after ~1 s)
it_start sigterm 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=6000
wait_engines C 2
# signal mpirun itself: `timeout` would relay the signal twice (to its child and to its
# process group), and a second SIGTERM makes mpirun kill the ranks at once
MPIRUN=$(pgrep -P "$PID" -x mpirun || true)
[ -n "$MPIRUN" ] || fail "no mpirun under $PID"
kill -TERM "$MPIRUN"
it_wait
[ "$RC" != 0 ] || fail "a terminated run exited 0"
[ -n "$RECORD" ] || fail "no partial record written"
python3 - "$RECORD" <<'PY' || fail "the partial record is not NO_DECISION / terminated"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["reasons"].startswith("terminated"), r["reasons"]
assert r["arms"][0]["ran"] and r["arms"][0]["ok"], "B should be complete"
c = r["arms"][1]
assert c["ran"] and not c["ok"] and "terminated" in c["reason"], c
assert not r["arms"][2]["ran"], "B' ran after the termination"
PY
# the verdict is the samples' too: `bracket score` recomputes NO_DECISION from the record
"$BK_BRACKET" score "$RECORD" >"$IT_TMP/score.log" 2>&1 || true
cat "$IT_TMP/score.log"
grep -q "identical to the record" "$IT_TMP/score.log" || fail "bracket score differs from the record"
for i in $(seq 50); do [ -z "$(rank_pids)$(engine_pids '.*')" ] && break; sleep 0.1; done
[ -z "$(rank_pids)" ] || fail "ranks left behind: $(rank_pids)"
expect_no_leftovers
expect_no_private_dirs
echo "PASS: SIGTERM -> partial record, NO_DECISION (terminated), nothing left behind"
