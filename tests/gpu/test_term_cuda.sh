#!/usr/bin/env bash
# SIGTERM to mpirun while a cuda arm runs (label gpu): the run must write its final
# terminated record (NO_DECISION, `stopped` "terminated by SIGTERM during arm C"), not leave
# only the unfinished one, although mpirun sends SIGKILL 1 s after it relays the SIGTERM
# (Open MPI's odls_base_sigkill_timeout) and a cuda engine takes longer than a cpu one to
# end; `bracket score` reproduces it, and no rank, engine or private folder is left.
# Prints how long mpirun took to exit after the signal.
# Skips (exit 77) with the reason where there is no GPU or no cuda build.
. "$(dirname "$0")/../integration/fault_lib.sh"
set -e
help=$("$BK_BRACKET" --help 2>&1) || fail "$BK_BRACKET --help: exit $?: $help"
if ! grep -q "backends in this build: cpu cuda" <<<"$help"; then
    echo "SKIP: this build has no cuda backend (no CUDA toolkit found at configure time)"; exit 77
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no NVIDIA GPU visible (nvidia-smi -L failed)"; exit 77
fi
export NCCL_NVLS_ENABLE=0
ngpu=$(nvidia-smi -L | grep -c '^GPU')
plan=$BK_SOURCE_DIR/plans/demo-cuda.json
if [ "$ngpu" -ge 2 ]; then
    np=$(( ngpu / 2 * 2 )); sets=(--set "arena.tp=$(( ngpu / 2 ))"); nc=$(( ngpu / 2 ))
else
    np=1; sets=(--set arena.tp=1 --set lanes.policy=shared); nc=1
fi
# an A/A with many iterations: arm C runs for seconds
it_start term "$np" "$plan" "${sets[@]}" --set candidate.variant=nccl_then_rmsnorm \
    --set workload.iters=20000 --set protocol.repeats=1
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
