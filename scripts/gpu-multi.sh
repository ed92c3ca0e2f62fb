#!/usr/bin/env bash
# gpu-multi.sh - the brackets only a machine of several GPUs can run, for the few minutes such a
# machine may be lent: the topology, then brackets of the demo plan (B on one lane, C on the
# other), each one of:
#   one-graph  ipc_oneshot_fused against nccl_then_rmsnorm, graph mode (the demo plan)
#   two-graph  ipc_twoshot_fused against it, graph mode
#   aa-graph   nccl_then_rmsnorm against itself, graph mode: the lanes' own difference
#   one-eager  ipc_oneshot_fused against it, eager mode
#   aa-eager   the A/A in eager mode (the plan's default): the incumbent's eager step,
#              NCCL's host launch included, beside its graph step above
# in the order of issue 4's goals: one-graph and two-graph at TP 2, 4 ... up to half the GPUs
# on disjoint lanes, then at TP = all the GPUs (TP 8 on eight) on shared lanes (B and C take
# turns on the same GPUs: arms run one after the other, so the times are real, only the lanes
# are not disjoint); then aa-graph, one-eager and aa-eager at those TPs; then all of them at
# TP 1. A line per bracket goes to $OUT/multi-summary.txt as soon as it ends (TP, name,
# verdict, speed-up and its interval, drift, per shape the medians of B and C in us), so a
# call cut short keeps what ran. Expects a build in $BK_BUILD (scripts/gpu-run.sh build).
# Records stay in $BK_RUNS.
#   scripts/gpu-multi.sh [NAME...]   (default: all the names above)
# Environment:
#   BK_MULTI_TPS       the TPs to run (default: 1, 2, 4 ... up to all the GPUs)
#   BK_MULTI_BUDGET_S  seconds from the script's start after which no bracket starts that
#                      would not end in time, judged by the longest one so far, and none runs
#                      past (default 540: a device call's 600 s, less a margin); those left are
#                      named at the end, and the exit status is then 1. Build in a call of its
#                      own: after `gpu-run.sh build` (2-3 minutes) in the same call, give the
#                      time that is left (BK_MULTI_BUDGET_S=380)
#   BK_MULTI_PLAN      the plan (default plans/demo-cuda.json)
#   BK_MULTI_DRY=1     print the brackets in their order and exit (BK_MULTI_NGPU: the GPU
#                      count to plan for, instead of nvidia-smi's)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
runs=${BK_RUNS:-/tmp/bk-multi}
all_names="one-graph two-graph aa-graph one-eager aa-eager"
names=${*:-$all_names}
budget=${BK_MULTI_BUDGET_S:-540}
plan=${BK_MULTI_PLAN:-plans/demo-cuda.json}
for n in $names; do
  case " $all_names " in *" $n "*) ;; *) echo "gpu-multi: no bracket '$n' (names: $all_names)" >&2; exit 2 ;; esac
done
case $budget in '' | *[!0-9]*) echo "gpu-multi: BK_MULTI_BUDGET_S '$budget': a whole number of seconds" >&2; exit 2 ;; esac

if [ "${BK_MULTI_DRY:-}" = 1 ] && [ -n "${BK_MULTI_NGPU:-}" ]; then
  ngpu=$BK_MULTI_NGPU
else
  ngpu=$(nvidia-smi -L | grep -c '^GPU ')
fi
if [ "$ngpu" -lt 2 ]; then
  echo "gpu-multi: $ngpu GPU(s): needs 2 or more"
  exit 77
fi

# the brackets, "TP POLICY NAME" each, in the goals' order (above)
want_tp() { [ -z "${BK_MULTI_TPS:-}" ] || case " $BK_MULTI_TPS " in *" $1 "*) true ;; *) false ;; esac; }
want_name() { case " $names " in *" $1 "*) true ;; *) false ;; esac; }
queue=()
add() { want_tp "$1" && want_name "$3" && queue+=("$1 $2 $3"); return 0; }
for (( tp = 2; 2 * tp <= ngpu; tp *= 2 )); do
  for n in one-graph two-graph; do add "$tp" disjoint "$n"; done
done
for n in one-graph two-graph; do add "$ngpu" shared "$n"; done
for (( tp = 2; 2 * tp <= ngpu; tp *= 2 )); do
  for n in aa-graph one-eager aa-eager; do add "$tp" disjoint "$n"; done
done
for n in $all_names; do add 1 disjoint "$n"; done
if (( ${#queue[@]} == 0 )); then
  echo "gpu-multi: no bracket to run: BK_MULTI_TPS '${BK_MULTI_TPS:-}' (blank-separated, from" \
    "1, 2, 4 ... up to $ngpu) and the names '$names' leave none" >&2
  exit 2
fi
if [ "${BK_MULTI_DRY:-}" = 1 ]; then
  printf '%s\n' "${queue[@]}"
  exit 0
fi

mkdir -p "$out" "$runs"
export NCCL_NVLS_ENABLE=0
. "$src/scripts/gpu-env.sh"
trap pack_out EXIT # all of $out also in $out/0-all.tgz
b=$build/bracket
flags=(-q --oversubscribe --bind-to none --allow-run-as-root -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
rc=0
t0=$SECONDS
"$b" topo | tee "$out/multi-topo.txt"

summary() { # summary [RUN_DIR]: the header, or the line of one bracket's record
  python3 - "$@" <<'PY'
import glob, json, os, sys
if len(sys.argv) < 2:
    print("%-22s %-12s %-5s %-10s %-17s %-8s %s" % ("run", "candidate", "mode", "verdict",
          "speed-up [int]", "drift", "per shape: tokens B/C us"))
    sys.exit(0)
recs = sorted(glob.glob(sys.argv[1] + "/*/record.json"))
if not recs:
    print("%-22s no record" % os.path.basename(sys.argv[1]))
    sys.exit(0)
r = json.load(open(recs[-1]))
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
print("%-22s %-12s %-5s %-10s %-17s %-8s %s" % (
    os.path.basename(sys.argv[1]), p["candidate"]["variant"].replace("_fused", ""),
    p["arena"]["graph_mode"], r["verdict"],
    "%.3f [%.3f,%.3f]" % (sp if sp is not None else float("nan"), *iv),
    "%.2f%%" % (100 * s["drift"]) if s.get("drift") is not None else "-", per))
PY
}

# one TP POLICY NAME: a bracket of the demo plan at that TP and lane policy, as NAME says
one() {
  local tp=$1 policy=$2 name=$3 limit=$4 np=$(( 2 * $1 )) set=() dir
  [ "$policy" = shared ] && np=$tp
  case $name in
    aa-*) set+=(--set candidate.variant=nccl_then_rmsnorm) ;;
    two-*) set+=(--set candidate.variant=ipc_twoshot_fused) ;;
  esac
  case $name in *-eager) set+=(--set arena.graph_mode=eager) ;; esac
  dir=$runs/tp$tp-$policy-$name
  echo "=== tp $tp $policy $name ($(date -u +%H:%M:%S))"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$src" && timeout -k 10 "$limit" mpirun "${flags[@]}" -np "$np" "$b" run "$plan" \
     --set arena.tp="$tp" --set lanes.policy="$policy" ${set[@]+"${set[@]}"} \
     --out "$dir" --quiet) >"$out/multi-tp$tp-$policy-$name.log" 2>&1
  local r=$?
  case $r in
    0|3|4) ;;
    124|137) rc=1; echo "tp $tp $name: cut after $limit s (300, or what was left of the budget)" ;;
    *) rc=1; echo "tp $tp $name: exit $r"; tail -5 "$out/multi-tp$tp-$policy-$name.log" ;;
  esac
  summary "$dir" | tee -a "$out/multi-summary.txt"
}

summary | tee "$out/multi-summary.txt"
longest=60 ended=0 # a guess until one bracket has ended
left=()
for q in "${queue[@]}"; do
  if (( SECONDS - t0 + longest > budget )); then
    left+=("$q")
    continue
  fi
  s0=$SECONDS
  # each bracket bounded by 300 s and by what is left of the budget, so that the summary and
  # the list of those left come back even when one bracket takes far longer than the others
  limit=$(( budget - (SECONDS - t0) ))
  (( limit > 300 )) && limit=300
  one $q "$limit"
  (( SECONDS - s0 > longest || !ended )) && longest=$(( SECONDS - s0 ))
  ended=1
done
if (( ${#left[@]} )); then
  (( ended )) && took="the longest bracket ${longest} s" || took="a bracket guessed at ${longest} s"
  echo "gpu-multi: left for lack of time (BK_MULTI_BUDGET_S $budget, $took):" \
    | tee -a "$out/multi-summary.txt"
  printf '  %s\n' "${left[@]}" | tee -a "$out/multi-summary.txt"
  rc=1 # not all of them ran
fi
exit $rc
