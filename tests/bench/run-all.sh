#!/usr/bin/env bash
# run-all.sh BUILD - `make bench`: every benchmark program that runs on this machine.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
echo "machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%dT%H:%MZ)"
for b in "$build"/tests/bench_*; do
    [ -x "$b" ] || continue
    echo; echo "== $(basename "$b")"
    "$b"
done
echo; echo "== bench_run.sh"
tests/bench/bench_run.sh "$build" 5
echo; echo "== bench_busy.sh"
tests/bench/bench_busy.sh "$build"
