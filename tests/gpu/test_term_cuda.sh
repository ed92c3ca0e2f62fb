#!/usr/bin/env bash
# SIGTERM to mpirun while a cuda arm runs (label gpu): the run must write its final
# terminated record (NO_DECISION, `stopped` "terminated by SIGTERM during arm C"), not leave
# only the unfinished one, although Open MPI SIGKILLs what has not ended 1 s after it relays
# the SIGTERM (odls_base_sigkill_timeout) and a cuda engine has a CUDA context and an NCCL
# communicator to end; `bracket score` reproduces it, and no rank, engine or private folder
# is left.
# Prints how long mpirun took to exit after the signal.
# Skips (exit 77) with the reason where there is no GPU or no cuda build.
. "$(dirname "$0")/../integration/fault_lib.sh"
set -e
. "$(dirname "$0")/gpu_lib.sh"
# an A/A with many iterations, so that arm C still runs when the signal comes (at 20000 the
# whole test took 11 s on one H200; 60000 leaves room for the faster steps of larger lanes)
it_start term "$np" "$plan" "${sets[@]}" --set candidate.variant=nccl_then_rmsnorm \
    --set workload.iters=60000 --set protocol.repeats=1
wait_engines C "$nc"
sleep 1 # inside C's timed loop, past its start-up
t0=$(date +%s.%N)
term_mpirun
t1=$(date +%s.%N)
echo "mpirun exited $(python3 -c "print(round($t1 - $t0, 2))") s after its SIGTERM (exit $RC)"
python3 - "$RECORD" <<'PY' || fail "not the final terminated record"
import json, sys
r = json.load(open(sys.argv[1]))
assert not r.get("unfinished"), "only the unfinished record was left: " + r["stopped"]
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["stopped"].startswith("terminated by SIGTERM during arm C"), r["stopped"]
assert r["arms"][0]["ran"] and r["arms"][0]["ok"], "B should be complete"
assert r["arms"][1]["ran"] and not r["arms"][1]["ok"], r["arms"][1]["reason"]
PY
expect_terminated_clean
echo "PASS: SIGTERM during a cuda arm -> the final terminated record, nothing left behind"
