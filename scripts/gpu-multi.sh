#!/usr/bin/env bash
# gpu-multi.sh - the brackets only a machine of several GPUs can run, in one call, for the
# few minutes such a machine may be lent: the topology, then at each TP of 1, 2, 4 ... up to
# half the GPUs, on two disjoint lanes (B on one half, C on the other):
#   aa-graph   nccl_then_rmsnorm against itself, graph mode: the lanes' own difference
#   aa-eager   the same in eager mode (the plan's default): the incumbent's eager step,
#              NCCL's host launch included, beside its graph step above
#   one-graph  ipc_oneshot_fused against nccl_then_rmsnorm, graph mode (the demo plan)
#   two-graph  ipc_twoshot_fused against it, graph mode
#   one-eager  ipc_oneshot_fused against it, eager mode
# and at TP = all the GPUs (TP 8 on eight) one-graph and two-graph on shared lanes (a
# rehearsal: B and C take turns on the same GPUs). Then one line per bracket: TP, name,
# verdict, speed-up and its interval, drift, and per shape the medians of B and C (us).
# Expects a build in $BK_BUILD (scripts/gpu-run.sh build). Records stay in $BK_RUNS.
#   scripts/gpu-multi.sh [NAME...]   (default: all the names above)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
runs=${BK_RUNS:-/tmp/bk-multi}
names=${*:-aa-graph aa-eager one-graph two-graph one-eager}
mkdir -p "$out" "$runs"
export NCCL_NVLS_ENABLE=0
. "$src/scripts/gpu-env.sh"
trap pack_out EXIT # all of $out also in $out/0-all.tgz
b=$build/bracket
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$ngpu" -lt 2 ]; then
  echo "gpu-multi: $ngpu GPU(s): needs 2 or more"
  exit 77
fi
flags=(-q --oversubscribe --bind-to none --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
rc=0
"$b" topo | tee "$out/multi-topo.txt"

# one TP POLICY NAME: a bracket of the demo plan at that TP and lane policy, as NAME says
one() {
  local tp=$1 policy=$2 name=$3 np=$(( 2 * $1 )) set=()
  [ "$policy" = shared ] && np=$tp
  case $name in
    aa-*) set+=(--set candidate.variant=nccl_then_rmsnorm) ;;
    two-*) set+=(--set candidate.variant=ipc_twoshot_fused) ;;
  esac
  case $name in *-eager) set+=(--set arena.graph_mode=eager) ;; esac
  echo "=== tp $tp $policy $name ($(date -u +%H:%M:%S))"
  mkdir -p "$runs/tp$tp-$name"
  (cd "$src" && timeout -k 10 300 mpirun "${flags[@]}" -np "$np" "$b" run plans/demo-cuda.json \
     --set arena.tp="$tp" --set lanes.policy="$policy" ${set[@]+"${set[@]}"} \
     --out "$runs/tp$tp-$name" --quiet) >"$out/multi-tp$tp-$name.log" 2>&1
  local r=$?
  case $r in 0|3|4) ;; *) rc=1; echo "tp $tp $name: exit $r"; tail -5 "$out/multi-tp$tp-$name.log" ;; esac
}

for (( tp = 1; 2 * tp <= ngpu; tp *= 2 )); do
  for n in $names; do one "$tp" disjoint "$n"; done
done
for n in $names; do
  case $n in one-graph|two-graph) one "$ngpu" shared "$n" ;; esac
done

python3 - "$runs" <<'PY' | tee "$out/multi-summary.txt"
import glob, json, os, sys
print("%-16s %-12s %-5s %-10s %-17s %-8s %s" % ("run", "candidate", "mode", "verdict",
      "speed-up [int]", "drift", "per shape: tokens B/C us"))
for rec in sorted(glob.glob(sys.argv[1] + "/*/*/record.json")):
    r = json.load(open(rec))
    s, p = r["score"], r["plan"]
    arms = {a["name"]: a for a in r["arms"] if a["ran"] and not a["audit"]}
    shapes = [sh["tokens"] for sh in p["workload"]["shapes"]]
    def med(name):
        a = arms.get(name)
        return a["summary"]["median_ns"] if a else [float("nan")] * len(shapes)
    mb, mc = med("B"), med("C")
    per = " ".join("%d:%.2f/%.2f" % (t, b / 1e3, c / 1e3) for t, b, c in zip(shapes, mb, mc))
    iv = s.get("speedup_interval") or [float("nan")] * 2
    sp = s.get("speedup")
    print("%-16s %-12s %-5s %-10s %-17s %-8s %s" % (
        os.path.basename(os.path.dirname(os.path.dirname(rec))),
        p["candidate"]["variant"].replace("_fused", ""), p["arena"]["graph_mode"],
        r["verdict"], "%.3f [%.3f,%.3f]" % (sp if sp is not None else float("nan"), *iv),
        "%.2f%%" % (100 * s["drift"]) if s.get("drift") is not None else "-", per))
PY
exit $rc
