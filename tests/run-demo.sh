#!/usr/bin/env bash
# run-demo.sh BUILD [NP] [PLAN] - `make demo`: a real B -> C -> B' bracket on this machine.
# With NVIDIA GPUs and a CUDA build: the cuda backend (one GPU: lanes shared, a rehearsal;
# 2N GPUs: two disjoint lanes of N). Otherwise: the cpu backend, 4 ranks.
set -euo pipefail
build=${1:-build}
np=${2:-4}
plan=${3:-}
cd "$(dirname "$0")/.."
bracket=$build/bracket
flags=(-q --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
sets=()
if [ -z "$plan" ]; then
    ngpu=0
    if "$bracket" --help | grep -q "backends in this build: cpu cuda"; then
        if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
            ngpu=$(nvidia-smi -L | grep -c '^GPU')
        fi
    fi
    if [ "$ngpu" -ge 2 ] && [ -f plans/demo-cuda.json ]; then
        plan=plans/demo-cuda.json
        tp=$((ngpu / 2))
        np=$((2 * tp))
        sets=(--set "arena.tp=$tp" --set lanes.policy=disjoint)
        echo "bracket demo: $ngpu GPUs: cuda backend, two disjoint lanes of $tp"
    elif [ "$ngpu" -ge 1 ] && [ -f plans/demo-cuda.json ]; then
        plan=plans/demo-cuda.json
        np=1
        sets=(--set arena.tp=1 --set lanes.policy=shared)
        echo "bracket demo: one GPU: cuda backend, shared lane (a rehearsal, marked as such)"
    else
        plan=plans/demo-cpu.json
        echo "bracket demo: no GPU: cpu backend, $np ranks (a rehearsal of the process, not a GPU result)"
    fi
fi
echo "+ mpirun -np $np $bracket run $plan ${sets[*]:-} --out bracket-out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
mpirun "${flags[@]}" -np "$np" "$bracket" run "$plan" "${sets[@]}" --out bracket-out | tee "$log"
rc=${PIPESTATUS[0]}
set -e
case $rc in
    0|3|4) echo "bracket demo: finished with a verdict (exit $rc: 0 PASS, 3 FAIL, 4 NO_DECISION)" ;;
    *) echo "bracket demo: failed (exit $rc)"; exit "$rc" ;;
esac
# What a validator does with a record: recompute its verdict from the raw samples, refusing
# any identity it cannot check (--strict). It must agree with the run's own exit status.
record=$(sed -n 's/^record: \(.*record\.json\)$/\1/p' "$log" | tail -n 1)
if [ -z "$record" ]; then
    echo "bracket demo: the run named no record (it prints 'record: DIR/record.json')"
    exit 1
fi
echo "+ $bracket score --strict $record"
set +e
"$bracket" score --strict "$record"
src=$?
set -e
if [ "$src" != "$rc" ]; then
    echo "bracket demo: bracket score --strict exited $src, the run $rc: the record does not" \
         "stand on its own (exit 1: it differs from its evidence; 2: an identity it cannot check)"
    exit 1
fi
echo "bracket demo: the record's verdict recomputed from its samples (exit $src)"
