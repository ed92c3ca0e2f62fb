#!/usr/bin/env bash
# SIGTERM to rank 0 alone while an agent of arm C's lane does not answer (SIGSTOP): rank 0
# gives the agents' reports 500 ms after the signal, not the arm's time-out and the 25 s
# after it, so the partial record (NO_DECISION, terminated by SIGTERM during arm C) is
# written at once; the job then ends (MPI_Abort), and once the agent runs again nothing of
# the run is left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# arm_s 60: a rank 0 that waited for the silent agent would write nothing for 85 s; the
# silent agent's engine, which no one can stop, ends on its own once its peer is gone (its
# barrier's bound, rendezvous_s)
it_start term-stopped 4 "$IT_PLAN" --set timeouts.arm_s=60 --set timeouts.rendezvous_s=2 \
    --set workload.iters=3000 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}'
wait_engines C 2
agent_of_first_engine
find_rank0
[ "$RANK0" != "$AGENT" ] || fail "rank 0 ($RANK0) is an agent of arm C's lane"
kill -STOP "$AGENT"
t0=$(date +%s%N)
kill -TERM "$RANK0"
for i in $(seq 150); do final_record && break; sleep 0.1; done
waited_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if ! final_record; then
    kill -CONT "$AGENT" 2>/dev/null || true # mpirun may have ended it already
    fail "no record $waited_ms ms after SIGTERM to rank 0 (an agent of arm C stopped)"
fi
echo "---- the partial record came $waited_ms ms after SIGTERM to rank 0"
kill -CONT "$AGENT" 2>/dev/null || true # mpirun may have ended it already
it_wait
[ "$RC" != 0 ] || fail "a terminated run exited 0"
python3 - "$RECORD" <<'PY' || fail "the partial record is not NO_DECISION, terminated during arm C"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["reasons"].startswith("terminated by SIGTERM"), r["reasons"]
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
assert "terminated by SIGTERM during arm C" in c["reason"], c["reason"]
assert not r["arms"][2]["ran"], "B' ran after a terminated C"
# the silent agent's report is missing, and the reason names it
silent = [p for p in c["processes"] if not p["reported"]]
assert len(silent) == 1, c["processes"]
want = "no report from the agent of MPI rank %d" % silent[0]["mpi_rank"]
assert want in c["reason"], (want, c["reason"])
PY
expect_terminated_clean
echo "PASS: SIGTERM to rank 0 with a silent agent: the partial record in $waited_ms ms"
