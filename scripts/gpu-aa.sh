#!/usr/bin/env bash
# gpu-aa.sh - A/A brackets in graph mode on a GPU machine (the demo plan's incumbent against
# itself, TP 1, lanes shared): N rounds, each running one bracket per SETTING (environment
# assignments for the engines, e.g. "BK_CUDA_GATE=0"), interleaved; then one line per
# bracket: setting, verdict, drift, speed-up and its interval, per-shape medians of B, C and
# B'. Expects a build in $BK_BUILD (scripts/gpu-run.sh build).
#   scripts/gpu-aa.sh [N [SETTING...]]   (default 4 rounds of "BK_CUDA_GATE=1" "BK_CUDA_GATE=0")
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
runs=${BK_RUNS:-/tmp/bk-aa}
n=${1:-4}
shift || true
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=("BK_CUDA_GATE=1" "BK_CUDA_GATE=0")
mkdir -p "$out" "$runs"
export NCCL_NVLS_ENABLE=0
. "$src/scripts/gpu-env.sh"
for i in $(seq 1 "$n"); do
  for k in "${!settings[@]}"; do
    mkdir -p "$runs/s$k"
    echo "${settings[$k]}" >"$runs/s$k/setting"
    xs=(); for a in ${settings[$k]}; do xs+=(-x "${a%%=*}"); done
    (cd "$src" && env ${settings[$k]} mpirun -q --oversubscribe --bind-to none --allow-run-as-root \
       -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "${xs[@]}" -np 1 "$build/bracket" run plans/demo-cuda.json \
       --set arena.tp=1 --set lanes.policy=shared --set candidate.variant=nccl_then_rmsnorm \
       --set protocol.drift_policy=strict --out "$runs/s$k" --quiet) >"$runs/s$k-$i.txt" 2>&1
  done
done
python3 - "$runs" <<'PY' | tee "$out/aa.txt"
import glob, json, os, sys
print("| setting | verdict | drift | speed-up [interval] | B medians us | C medians us | B' medians us |")
print("|---|---|---|---|---|---|---|")
for d in sorted(glob.glob(os.path.join(sys.argv[1], "s*/"))):
    setting = open(os.path.join(d, "setting")).read().strip()
    for rec in sorted(glob.glob(os.path.join(d, "*", "record.json")), key=os.path.getmtime):
        r = json.load(open(rec))
        s = r["score"]
        med = {}
        for a in r["arms"]:
            if a.get("ran") and not a.get("audit"):
                med[a["name"]] = [round(x / 1e3, 3) for x in a["summary"]["median_ns"]]
        iv = s.get("speedup_interval") or [None, None]
        f = lambda x: "%.4f" % x if isinstance(x, float) else str(x)
        print("| %s | %s | %s | %s [%s, %s] | %s | %s | %s |" % (
            setting, r["verdict"], f(s.get("drift")), f(s.get("speedup")), f(iv[0]), f(iv[1]),
            med.get("B"), med.get("C"), med.get("B'")))
PY
