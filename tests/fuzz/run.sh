#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [BUILD] - every libFuzzer harness of tests/fuzz for SECONDS each
# (default 60), on a clang build with AddressSanitizer and UBSan in BUILD (default
# build-fuzz). Corpora grow in BUILD/fuzz/corpus-NAME between runs; a crash, a leak or a
# broken property leaves its input in BUILD/fuzz/ (crash-*, leak-*) and fails the run.
# Needs clang (Debian's `clang` package; not one of the build's dependencies).
set -euo pipefail
secs=${1:-60}
build=${2:-build-fuzz}
cd "$(dirname "$0")/../.."
command -v clang >/dev/null || { echo "fuzz: needs clang (apt-get install clang)"; exit 2; }
[ -f "$build/CMakeCache.txt" ] || CC=clang cmake -S . -B "$build" -DBK_FUZZ=ON -DBK_SANITIZE=ON \
    -DBK_CUDA=OFF -DBK_TESTS=OFF -DBK_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
build=$(cd "$build" && pwd)
work=$build/fuzz
mkdir -p "$work"
"$build/fuzz_seeds" "$work/seeds"
mkdir -p "$work/seeds/plan" "$work/seeds/topo" "$work/seeds/rec" "$work/seeds/samples" \
    "$work/seeds/bind" "$work/seeds/xml" "$work/seeds/record-topology"
cp tests/fixtures/topo/*.xml "$work/seeds/xml/"
cp plans/*.json tests/fixtures/plans/*.json "$work/seeds/plan/"
# the snapshots, less the 128-host one (each run of it takes milliseconds)
find tests/fixtures/topo -name '*.json' ! -name 'cluster128x8.json' -exec cp {} "$work/seeds/topo/" \;
for d in tests/fixtures/records/*/; do
    cp "$d/record.json" "$work/seeds/rec/$(basename "$d").json"
    cp "$d/samples.msgpack" "$work/seeds/samples/$(basename "$d").msgpack"
    [ ! -f "$d/topology.json" ] || cp "$d/topology.json" "$work/seeds/record-topology/$(basename "$d").json"
done
# dictionaries: the keys and short strings of the seed files
python3 - "$work" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
def words(o, acc):
    if isinstance(o, dict):
        for k, v in o.items():
            acc.add(k); words(v, acc)
    elif isinstance(o, list):
        for v in o: words(v, acc)
    elif isinstance(o, str) and len(o) < 24:
        acc.add(o)
for name in ("plan", "topo", "rec"):
    acc = set()
    for f in glob.glob(os.path.join(work, "seeds", name, "*.json")):
        try:
            words(json.load(open(f)), acc)
        except ValueError:
            pass
    with open(os.path.join(work, name + ".dict"), "w") as d:
        for i, w in enumerate(sorted(acc)):
            q = json.dumps(w)
            if q.isascii() and q.isprintable():
                d.write('w%d="%s"\n' % (i, q.replace("\\", "\\\\").replace('"', '\\"')))
PY
# what earlier campaigns kept (tests/fuzz/corpus) seeds this one too
for p in tests/fuzz/corpus/*.pack; do
    rm -rf "$work/seeds/kept-$(basename "$p" .pack)"
    tests/fuzz/pack.py --unpack "$p" "$work/seeds/kept-$(basename "$p" .pack)"
done
rc=0
# run NAME HARNESS SEEDS [DICT] [ENV...]
run() {
    local name=$1 bin=$2 seeds=$3 dict=${4:-}
    shift 4 || shift $#
    mkdir -p "$work/corpus-$name"
    echo "== $name ($secs s)"
    if (cd "$work" && env "$@" "$build/$bin" -max_total_time="$secs" -close_fd_mask=3 \
            -print_final_stats=1 ${dict:+-dict=$dict} "corpus-$name" "$seeds" \
            "seeds/kept-$name" >"$name.log" 2>&1); then
        grep -E "^stat::(number_of_executed_units|new_units_added)" "$work/$name.log" | tr '\n' ' '
        echo
    else
        echo "fuzz: $name FAILED: $(grep -m1 -E 'ERROR|abort|SUMMARY' "$work/$name.log")"
        echo "      log: $work/$name.log; the input: $(ls -t "$work"/crash-* "$work"/leak-* 2>/dev/null | head -1)"
        rc=1
    fi
}
run wire fuzz_wire seeds/wire ""
run plan fuzz_plan seeds/plan plan.dict
run topo fuzz_topo seeds/topo topo.dict
run record fuzz_record seeds/rec rec.dict
run samples fuzz_record seeds/samples "" BK_FUZZ_FILE=samples
run record-topology fuzz_record seeds/record-topology topo.dict BK_FUZZ_FILE=topology
run mem fuzz_mem seeds/mem ""
run bind fuzz_bind seeds/bind ""
run xml fuzz_xml seeds/xml ""
exit $rc
