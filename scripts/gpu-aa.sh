#!/usr/bin/env bash
# gpu-aa.sh - A/A brackets in graph mode on a GPU machine (the demo plan's incumbent against
# itself, TP 1, lanes shared): N rounds, each running one bracket per SETTING (environment
# assignments for the engines, e.g. "BK_CUDA_GATE=0", and plan settings as set:PATH=VALUE,
# e.g. "set:incumbent.variant=ipc_oneshot_fused"), interleaved; then one line per
# bracket: setting, verdict, drift, speed-up and its interval, per-shape medians of B, C and
# B'; then per setting the mean |drift|, the brackets under 0.3%, the sd of all arms'
# costs, the sd of each shape's arm medians, the lag-1 autocorrelation of each shape's
# batch medians and its first quarter's median minus its second half's (these two where
# Python has msgpack); and what the GPU's clocks, power and
# temperature were during each arm. Expects a build in $BK_BUILD (scripts/gpu-run.sh build).
# The demo plan runs every timed arm in 3 rounds of fresh engines (protocol.repeats, the
# eleventh session); "set:protocol.repeats=1" gives one round, as before.
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
# The GPU's clocks, power and temperature every 100 ms while the brackets run, and each
# arm's start time (the arm lines bracket prints, stamped here), so that the table below
# can say what the GPU did during each arm. Stopped when this script ends.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv,noheader,nounits -lms 100 >"$runs/clocks.csv" 2>/dev/null &
smi=$!
trap 'kill $smi 2>/dev/null; pack_out' EXIT # pack_out: gpu-env.sh
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }
for i in $(seq 1 "$n"); do
  for k in "${!settings[@]}"; do
    mkdir -p "$runs/s$k"
    echo "${settings[$k]}" >"$runs/s$k/setting"
    xs=(); env=(); sets=()
    for a in ${settings[$k]}; do
      case $a in
      set:*) sets+=(--set "${a#set:}") ;;
      *) env+=("$a"); xs+=(-x "${a%%=*}") ;;
      esac
    done
    (cd "$src" && env "${env[@]}" mpirun -q --oversubscribe --bind-to none --allow-run-as-root \
       -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE "${xs[@]}" -np 1 "$build/bracket" run plans/demo-cuda.json \
       --set arena.tp=1 --set lanes.policy=shared --set candidate.variant=nccl_then_rmsnorm \
       --set protocol.drift_policy=strict "${sets[@]}" --out "$runs/s$k" 2>&1; echo "bracket: end") \
       | stamp >"$runs/s$k-$i.txt"
  done
done
kill $smi 2>/dev/null
python3 - "$runs" <<'PY' | tee "$out/aa.txt"
import datetime, glob, json, os, re, sys
runs = sys.argv[1]
clk = []  # (unix time, sm MHz, mem MHz, W, C)
for line in open(os.path.join(runs, "clocks.csv")):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        clk.append((t, float(f[1]), float(f[2]), float(f[3]), float(f[4])))
    except (ValueError, IndexError):
        pass
def during(t0, t1):
    s = [c for c in clk if t0 <= c[0] < t1]
    if not s:
        return "-"
    m = lambda k: sum(c[k] for c in s) / len(s)
    return "%.0f/%.0f MHz %.0f W %.0f C" % (m(1), m(2), m(3), m(4))
# Two things each B, C and B' arm's samples (rank 0) say per shape, averaged over the
# setting's arms: the lag-1 autocorrelation of its batch medians (64 timed iterations a
# batch; near 0: batches independent; 0.2-0.4 came with graphs captured anew per batch,
# docs/BENCHMARKS.md, A/A drift, eighth session), and the median of its first quarter of
# samples minus that of its second half, in us (a phase at the shape's start: at 1 token
# nccl_then_rmsnorm ran 0.1-0.2 us slower for its first ~150 ms, ninth session). Needs Python's
# msgpack; "-" without it.
def batch_stats(d):
    try:
        import msgpack
    except ImportError:
        return "- (no msgpack module)", "-"
    acs, early = {}, {}
    med = lambda v: sorted(v)[len(v) // 2]
    for f in glob.glob(os.path.join(d, "*", "samples.msgpack")):
        ns = {}
        with open(f, "rb") as fh:
            for m in msgpack.Unpacker(fh, raw=False):
                if isinstance(m, dict) and "ns" in m and m.get("arm") in ("B", "C", "B'") \
                        and m.get("rank", 0) == 0:
                    ns.setdefault((m["arm"], m.get("round", 1), m["shape"]), []).extend(m["ns"])
        for (arm, rnd, shape), v in ns.items():  # each round of an arm on its own
            bm = [med(v[i:i + 64]) for i in range(0, len(v) - 63, 64)]  # whole batches
            mu = sum(bm) / len(bm) if bm else 0
            c0 = sum((x - mu) ** 2 for x in bm)
            c1 = sum((bm[i] - mu) * (bm[i + 1] - mu) for i in range(len(bm) - 1))
            acs.setdefault(shape, []).append(c1 / c0 if c0 else 0.0)
            if len(v) >= 8:
                early.setdefault(shape, []).append((med(v[:len(v) // 4]) - med(v[len(v) // 2:])) / 1e3)
    means = lambda t, fmt: " / ".join(fmt % (sum(t[k]) / len(t[k])) for k in sorted(t)) if t else "-"
    return means(acs, "%.2f"), means(early, "%+.3f")
print("| setting | verdict | drift | speed-up [interval] | B medians us | C medians us | B' medians us |")
print("|---|---|---|---|---|---|---|")
arms = []
summary = []  # per setting: drifts, arm costs, each shape's arm medians, batch_stats
for d in sorted(glob.glob(os.path.join(runs, "s*/"))):
    setting = open(os.path.join(d, "setting")).read().strip()
    for log in sorted(glob.glob(d.rstrip("/") + "-*.txt")):
        ev = [(float(l.split(" ", 1)[0]), l.split(" ", 1)[1]) for l in open(log)
              if re.match(r"^[0-9.]+ bracket: (arm|end)", l)]
        names = [re.search(r"arm (\S+)", e[1]).group(1) if "arm " in e[1] else "end" for e in ev]
        row = ["%s %s" % (names[i], during(ev[i][0], ev[i + 1][0])) for i in range(len(ev) - 1)
               if names[i] in ("B", "C", "B'")]
        arms.append("%s, %s: %s" % (setting, os.path.basename(log), "; ".join(row)))
    drifts, costs, shapes = [], [], []
    for rec in sorted(glob.glob(os.path.join(d, "*", "record.json")), key=os.path.getmtime):
        r = json.load(open(rec))
        s = r["score"]
        med = {}
        for a in r["arms"]:
            if a.get("ran") and not a.get("audit"):
                med[a["name"]] = [round(x / 1e3, 3) for x in a["summary"]["median_ns"]]
                costs.append(a["summary"]["cost_ns"])
                for k, x in enumerate(a["summary"]["median_ns"]):
                    if len(shapes) <= k:
                        shapes.append([])
                    shapes[k].append(x / 1e3)
        if isinstance(s.get("drift"), float):
            drifts.append(s["drift"])
        iv = s.get("speedup_interval") or [None, None]
        f = lambda x: "%.4f" % x if isinstance(x, float) else str(x)
        print("| %s | %s | %s | %s [%s, %s] | %s | %s | %s |" % (
            setting, r["verdict"], f(s.get("drift")), f(s.get("speedup")), f(iv[0]), f(iv[1]),
            med.get("B"), med.get("C"), med.get("B'")))
    summary.append((setting, drifts, costs, shapes) + batch_stats(d))
print()
# The arm-to-arm noise: every arm of an A/A runs the same thing, so the sd of the arm
# costs (B, C and B' of every bracket) is the noise a real B/C comparison carries; the sd
# of each shape's arm medians says which shapes it comes from.
def sd(xs):
    n = len(xs)
    m = sum(xs) / n if n else 0
    return (sum((x - m) ** 2 for x in xs) / (n - 1)) ** 0.5 if n > 1 else float("nan"), m
print("| setting | brackets | mean abs drift | under 0.3% | arms | arm cost sd | sd of each shape's arm medians, us | lag-1 autocorrelation of batch medians | first quarter minus second half, us |")
print("|---|---|---|---|---|---|---|---|---|")
for setting, drifts, costs, shapes, ac, early in summary:
    csd, m = sd(costs)
    md = sum(abs(x) for x in drifts) / len(drifts) if drifts else float("nan")
    print("| %s | %d | %.2f%% | %d | %d | %.2f%% | %s | %s | %s |" % (
        setting, len(drifts), 100 * md, sum(abs(x) < 0.003 for x in drifts), len(costs),
        100 * csd / m if m else float("nan"), " / ".join("%.3f" % sd(x)[0] for x in shapes), ac, early))
print()
print("GPU during each arm (mean SM/memory clock, power, temperature; nvidia-smi every 100 ms):")
for a in arms:
    print("- " + a)
PY
