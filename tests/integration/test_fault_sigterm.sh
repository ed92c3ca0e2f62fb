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
term_mpirun
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
expect_terminated_clean
echo "PASS: SIGTERM -> partial record, NO_DECISION (terminated), nothing left behind"
