#!/usr/bin/env bash
# gpu-bracket.sh - the whole program on a GPU machine, in one call: build (gpu-run.sh build),
# the topology snapshot, `make demo`'s cuda bracket, an A/A in graph mode (drift and
# spawn-to-first-iteration), `bracket verify` eager vs graph at lane sizes 1, 2 and 4 on
# the visible GPUs, and the gpu-labelled bracket test. Logs and files go to $OUT.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
runs=${BK_RUNS:-/tmp/bk-runs} # records stay outside $OUT (the device tool returns 8 files)
mkdir -p "$out" "$runs"
export NCCL_NVLS_ENABLE=0 OUT=$out BK_BUILD=$build
"$src/scripts/gpu-run.sh" build || exit 1
. "$src/scripts/gpu-env.sh"
trap pack_out EXIT # all of $out also in $out/0-all.tgz
b=$build/bracket
flags=(-q --oversubscribe --bind-to none --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
rc=0
step() { echo "=== $* ($(date -u +%H:%M:%S))"; }
step topo
"$b" topo | tee -a "$out/bracket.txt"
"$b" topo --save "$out/h200-topology.json" || rc=1
step demo
(cd "$src" && mpirun "${flags[@]}" -np 1 "$b" run plans/demo-cuda.json --set arena.tp=1 \
   --set lanes.policy=shared --out "$runs" --quiet) | tee -a "$out/bracket.txt"
step "A/A graph, 3 brackets"
BK_RUNS=$runs/aa "$src/scripts/gpu-aa.sh" 3 "BK_CUDA_GATE=1" | tee -a "$out/bracket.txt"
step verify
for w in 1 2 4; do
  for v in ipc_oneshot_fused ipc_twoshot_fused; do
    # lanes of 2 and 4 share the one GPU: NCCL refuses that, so no probe past the domain
    # (which the NCCL incumbent would serve) at those sizes
    extra=(); [ "$w" -gt 1 ] && [ "$(nvidia-smi -L | grep -c '^GPU')" -lt "$w" ] && extra=(--no-domain-shapes)
    (cd "$src" && "$b" verify plans/demo-cuda.json --variant $v --world $w --checks 1 "${extra[@]}") 2>&1 | tail -12 | tee -a "$out/bracket.txt"
  done
done
step "gpu bracket test"
(cd "$build" && ctest -R gpu_it_ --output-on-failure) 2>&1 | tail -15 | tee -a "$out/bracket.txt"
step summary
python3 - "$runs" <<'PY'
import glob, json, sys
for rec in sorted(glob.glob(sys.argv[1] + "/**/record.json", recursive=True)):
    r = json.load(open(rec))
    s = r["score"]
    first = [p["engine_start_to_first_iter_s"] for a in r["arms"] if a["ran"] and not a["audit"] for p in a["processes"]]
    print(r["plan"]["candidate"]["variant"], r["verdict"], "speedup", s.get("speedup"), s.get("speedup_interval"),
          "drift", s.get("drift"), "start->first iter s", [round(x, 3) for x in first])
PY
exit $rc
