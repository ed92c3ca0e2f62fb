#!/usr/bin/env bash
# The output folder read-only, then full: `bracket run` stops before any arm with a clear
# error (exit 2) naming the folder and the cause, and the previous record in that folder
# stays intact; so does a folder with room for the record's JSON but not for the plan's
# samples; full only by the end of the run: the verdict is printed with the line that
# it has no record (and that the unfinished record written before arm C remains), exit 1.
# Needs root to mount a small tmpfs (skipped otherwise).
. "$(dirname "$0")/fault_lib.sh"
set -e
MNT=$IT_TMP/mnt
mkdir -p "$MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=16m bk-outdir "$MNT" 2>/dev/null; then
    echo "SKIP: cannot mount a tmpfs here (needs root)"
    exit 77
fi
trap 'umount "$MNT" 2>/dev/null || true; rm -rf "$IT_TMP"' EXIT

# a first, good run leaves a record
run_into() { # NAME [ARGS...]: a run whose output folder is $MNT/out (at most $RUN_S seconds)
    local name=$1
    shift
    OUT=$IT_TMP/$name.log
    set +e
    timeout "${RUN_S:-600}" mpirun "${MPIRUN_FLAGS[@]}" -np 4 "$BK_BRACKET" run "$IT_PLAN" \
        --out "$MNT/out" --quiet "$@" >"$OUT" 2>&1
    RC=$?
    set -e
    echo "---- $name: exit $RC"
    cat "$OUT"
}
run_into first
RECORD=$(ls -d "$MNT"/out/*/record.json | head -n 1)
[ -f "$RECORD" ] || fail "the first run wrote no record"
SUM=$(sha256sum "$RECORD" "$(dirname "$RECORD")/samples.msgpack")
runs() { ls "$MNT/out" | wc -l; }
[ "$(runs)" = 1 ] || fail "expected one run folder"

# read-only
mount -o remount,ro "$MNT"
run_into readonly
[ "$RC" = 2 ] || fail "read-only output folder: expected exit 2, got $RC"
grep -q "output folder $MNT/out is not writable: Read-only file system" "$OUT" ||
    fail "read-only: no clear error"
grep -q "^verdict:" "$OUT" && fail "read-only: arms ran"
mount -o remount,rw "$MNT"
[ "$(sha256sum "$RECORD" "$(dirname "$RECORD")/samples.msgpack")" = "$SUM" ] ||
    fail "read-only: the previous record changed"
[ "$(runs)" = 1 ] || fail "read-only: a run folder was left"

# full: fill the tmpfs (bounded by its 16 MiB)
dd if=/dev/zero of="$MNT/filler" bs=64k >/dev/null 2>&1 || true
run_into full
[ "$RC" = 2 ] || fail "full output folder: expected exit 2, got $RC"
grep -Eq "output folder $MNT/out (cannot hold the record: reserving [0-9.]+ MiB failed: No space left on device|.*No space left on device)" "$OUT" ||
    fail "full: no clear error"
grep -q "^verdict:" "$OUT" && fail "full: arms ran"
[ "$(sha256sum "$RECORD" "$(dirname "$RECORD")/samples.msgpack")" = "$SUM" ] ||
    fail "full: the previous record changed"
[ "$(runs)" = 1 ] || fail "full: a run folder was left"
rm -f "$MNT/filler"

# room for the 1 MiB of JSON but not for the plan's samples (2 shapes x 3 timed arms x 2
# ranks x 9 bytes an iteration: 400000 iterations need about 41 MiB, the tmpfs holds 16):
# the reservation grows with the plan, so this too is refused before any arm, exit 2
RUN_S=120 run_into nosamples --set workload.iters=400000
[ "$RC" = 2 ] || fail "no room for the samples: expected exit 2, got $RC"
grep -Eq "output folder $MNT/out cannot hold the record: reserving 4[0-9.]+ MiB failed: No space left on device" "$OUT" ||
    fail "no room for the samples: no clear error"
grep -q "^verdict:" "$OUT" && fail "no room for the samples: arms ran"
[ "$(runs)" = 1 ] || fail "no room for the samples: a run folder was left"

# full only once the arms run: the record cannot be written at the end. The verdict may be
# printed only with the line that says it has no record (stdout, right after it), exit 1
OUT=$IT_TMP/full-late.log
OUTDIR=$MNT/out
timeout 600 mpirun "${MPIRUN_FLAGS[@]}" -np 4 "$BK_BRACKET" run "$IT_PLAN" --out "$MNT/out" \
    --set workload.iters=3000 --quiet >"$OUT" 2>&1 &
PID=$!
wait_engines C 2
dd if=/dev/zero of="$MNT/filler" bs=64k >/dev/null 2>&1 || true
it_wait
[ "$RC" = 1 ] || fail "full at the end: expected exit 1, got $RC"
grep -A20 "^verdict:" "$OUT" | grep -q "^record: NOT WRITTEN (cannot write .*: No space left on device): the verdict above has no record; the unfinished record written before arm C remains$" ||
    fail "full at the end: the verdict is not followed by the line that it has no record"
grep -q "^record: /" "$OUT" && fail "full at the end: a record path was printed"
# what remains of this run is the unfinished record written before arm C (the disk was
# full only after it), and it rescores as such
[ "$(ls "$MNT"/out/*/record.json | wc -l)" = 2 ] || fail "full at the end: no unfinished record beside the first"
LEFT=$(ls "$MNT"/out/*/record.json | grep -v "^$RECORD$")
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['unfinished'] is True and r['stopped'].startswith('unfinished: written before arm C;'), r['stopped']" \
    "$LEFT" || fail "full at the end: the record left is not the unfinished one before arm C"
set +e
"$BK_BRACKET" score --quiet "$LEFT" >"$IT_TMP/score-left.log" 2>&1
SRC=$?
set -e
cat "$IT_TMP/score-left.log"
[ "$SRC" = 4 ] && grep -q "identical to the record" "$IT_TMP/score-left.log" ||
    fail "full at the end: the unfinished record does not rescore (exit $SRC)"
ls "$MNT"/out/*/*.tmp.* 2>/dev/null && fail "full at the end: temporary files left"
[ "$(sha256sum "$RECORD" "$(dirname "$RECORD")/samples.msgpack")" = "$SUM" ] ||
    fail "full at the end: the previous record changed"
rm -f "$MNT/filler"

# the run's own folder removed while arm B runs: no unfinished record remains either, so
# the line says only that the verdict has none (it once said the unfinished one remained)
OUT=$IT_TMP/gone.log
timeout 600 mpirun "${MPIRUN_FLAGS[@]}" -np 4 "$BK_BRACKET" run "$IT_PLAN" --out "$MNT/out" \
    --set workload.iters=3000 --quiet >"$OUT" 2>&1 &
PID=$!
wait_engines B 2
GONE=""
for d in "$MNT"/out/*/; do
    d=${d%/}
    [ "$d" = "$(dirname "$RECORD")" ] || [ "$d" = "$(dirname "$LEFT")" ] || GONE=$d
done
[ -n "$GONE" ] && [ -f "$GONE/record.json" ] || fail "gone: no unfinished record before arm B"
rm -rf "$GONE"
it_wait
[ "$RC" = 1 ] || fail "run folder removed: expected exit 1, got $RC"
grep -A20 "^verdict:" "$OUT" | grep -q "^record: NOT WRITTEN (.*): the verdict above has no record$" ||
    fail "run folder removed: the line that the verdict has no record is missing or says more"
grep -q "remains" "$OUT" && fail "run folder removed: says an unfinished record remains"
[ ! -e "$GONE" ] || fail "run folder removed: it was made again"
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
echo "PASS: read-only and full output folders -> clear errors, previous record intact; full at the end -> verdict marked as without record"
