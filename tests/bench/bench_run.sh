#!/usr/bin/env bash
# bench_run.sh BUILD [RUNS] - whole-run numbers on the cpu backend: wall time of the demo
# bracket (after the build) and, per arm and rank, arm start -> first sample at the
# coordinator and engine start -> first timed iteration, read from the records.
set -euo pipefail
build=${1:-build}
runs=${2:-5}
cd "$(dirname "$0")/../.."
out=$(mktemp -d "${TMPDIR:-/tmp}/bk-bench-XXXXXX")
trap 'rm -rf "$out"' EXIT
flags=(-q --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
printf "%-4s %-12s %-9s\n" run wall_s verdict
for i in $(seq 1 "$runs"); do
    t0=$(date +%s.%N)
    set +e
    mpirun "${flags[@]}" -np 4 "$build/bracket" run plans/demo-cpu.json --out "$out" --quiet >"$out/log" 2>&1
    rc=$?
    set -e
    t1=$(date +%s.%N)
    printf "%-4s %-12.3f %-9s\n" "$i" "$(echo "$t1 - $t0" | bc -l)" "$(grep -o '^verdict: [A-Z_]*' "$out/log" | cut -d' ' -f2) (exit $rc)"
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
first, start = {}, {}
for rec in glob.glob(sys.argv[1] + "/*/record.json"):
    r = json.load(open(rec))
    for a in r["arms"]:
        if not a["ran"] or a["audit"]:
            continue
        for p in a["processes"]:
            first.setdefault(a["name"], []).append(1e3 * p["arm_start_to_first_sample_s"])
            start.setdefault(a["name"], []).append(1e3 * p["engine_start_to_first_iter_s"])
print()
print("%-4s %-6s %-30s %-30s" % ("arm", "n", "arm start->first sample ms", "engine start->first iter ms"))
for arm in ("B", "C", "B'"):
    f, s = first.get(arm, []), start.get(arm, [])
    if f:
        print("%-4s %-6d median %6.1f  max %6.1f       median %6.1f  max %6.1f" % (
            arm, len(f), statistics.median(f), max(f), statistics.median(s), max(s)))
PY
