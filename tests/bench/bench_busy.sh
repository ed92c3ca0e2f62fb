#!/usr/bin/env bash
# bench_busy.sh BUILD [RUNS] [ITERS] - the cpu backend beside busy processes: the demo
# bracket (plans/demo-cpu.json, TP 2, 4 ranks) with 0, 1 and 2 CPU hogs (unpinned busy
# loops) running, RUNS times each (default 2) at ITERS iterations (default 2000). Prints,
# per run and arm, the arm's wall time and every shape's median iteration time.
# On a 2-core box a hog shares a core with one pinned engine of the lane; before the
# barrier's own-core spin phase an arm there ran 15-45x slower (docs/BENCHMARKS.md).
set -euo pipefail
build=${1:-build}
runs=${2:-2}
iters=${3:-2000}
cd "$(dirname "$0")/../.."
out=$(mktemp -d "${TMPDIR:-/tmp}/bk-busy-XXXXXX")
hogs=()
stop_hogs() {
    if [ ${#hogs[@]} -gt 0 ]; then
        kill "${hogs[@]}" 2>/dev/null || true
        wait "${hogs[@]}" 2>/dev/null || true
    fi
    hogs=()
}
trap 'stop_hogs; rm -rf "$out"' EXIT
flags=(-q --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
echo "$(nproc) cores; plans/demo-cpu.json, workload.iters=$iters"
printf "%-5s %-4s %-4s %-9s %s\n" hogs run arm wall_s "median us per shape"
for h in 0 1 2; do
    for i in $(seq 1 "$runs"); do
        for _ in $(seq 1 "$h"); do
            # a bounded busy loop: it stops by itself even if this script is killed
            timeout 300 bash -c 'while :; do :; done' &
            hogs+=($!)
        done
        rm -rf "$out/rec"
        rc=0
        timeout 300 mpirun "${flags[@]}" -np 4 "$build/bracket" run plans/demo-cpu.json \
            --set workload.iters="$iters" --out "$out/rec" --quiet >"$out/log" 2>&1 || rc=$?
        stop_hogs
        rec=$(ls "$out"/rec/*/record.json 2>/dev/null | head -n 1 || true)
        if [ -z "$rec" ]; then
            echo "run failed (exit $rc), no record:"; cat "$out/log"; exit 1
        fi
        python3 - "$rec" "$h" "$i" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for a in r["arms"]:
    if a["audit"] or not a["ran"]:
        continue
    med = (a.get("summary") or {}).get("median_ns") or []
    print("%-5s %-4s %-4s %-9.2f %s" % (sys.argv[2], sys.argv[3], a["name"], a["wall_s"],
          "  ".join("%.1f" % (m / 1e3) for m in med) or "(" + a["reason"] + ")"))
PY
    done
done
