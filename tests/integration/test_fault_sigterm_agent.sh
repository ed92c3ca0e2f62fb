#!/usr/bin/env bash
# SIGTERM to one agent only (an MPI rank of the candidate lane, not rank 0) while arm C
# runs: that agent stops its engine and the arm fails; the reason names that agent and the
# signal it got instead of blaming a failed peer; no engine, rank or segment is left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
it_start sigterm-agent 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=6000
wait_engines C 2
agent_of_first_engine
kill -TERM "$AGENT"
it_wait
[ "$RC" != 0 ] || fail "a run whose agent was terminated exited 0"
[ -n "$RECORD" ] || fail "no record written"
python3 - "$RECORD" <<'PY' || fail "the reason does not name the agent that got SIGTERM"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION", r["verdict"]
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
assert "got SIGTERM and stopped the engine" in c["reason"], c["reason"]
PY
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
echo "PASS: SIGTERM to one agent -> its arm fails naming it, nothing left behind"
