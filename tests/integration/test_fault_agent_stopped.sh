#!/usr/bin/env bash
# An agent that stops answering (SIGSTOP) while its engine runs arm C: rank 0 waits for its
# report no longer than timeouts.arm_s + 25 s (the lane is stopped at arm_s + 15 s, the
# report given up 10 s later), then writes the record, NO_DECISION naming the silent agent's
# MPI rank; the run ends once that agent answers again, and nothing is left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# C long enough to be caught running; the silent agent's engine, which no one can stop, ends
# on its own once its peer is gone (its barrier's bound, rendezvous_s). arm_s 10: B takes up to
# 3 s under the sanitizers on a busy 2-core machine (with 3 s it timed out there)
arm_s=10
it_start agent-stopped 4 "$IT_PLAN" --set timeouts.arm_s=$arm_s --set timeouts.rendezvous_s=4 \
    --set workload.iters=3000 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}'
wait_engines C 2
agent_of_first_engine
kill -STOP "$AGENT"
t0=$(date +%s)
for i in $(seq 900); do final_record && break; sleep 0.1; done
waited=$(( $(date +%s) - t0 ))
final_record || { kill -CONT "$AGENT"; fail "no record $waited s after the agent stopped answering"; }
echo "---- the record came $waited s after the agent was stopped"
[ "$waited" -ge $((arm_s + 15)) ] || { kill -CONT "$AGENT"; fail "the record came after $waited s, before arm_s + 15 s"; }
kill -CONT "$AGENT"
it_wait
expect_verdict NO_DECISION 4
python3 - "$RECORD" <<'PY' || fail "the record does not name the silent agent"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
silent = [p for p in c["processes"] if not p["reported"]]
assert len(silent) == 1, c["processes"]
want = "no report from the agent of MPI rank %d" % silent[0]["mpi_rank"]
assert want in c["reason"], (want, c["reason"])
assert not r["arms"][2]["ran"], "B' ran after a failed C"
PY
expect_no_ranks
expect_no_leftovers
echo "PASS: a silent agent is given up on after arm_s + 25 s, NO_DECISION naming it"
