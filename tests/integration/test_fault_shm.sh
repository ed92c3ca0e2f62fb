#!/usr/bin/env bash
# A /dev/shm too small for the cpu engines' peer memory (a container's is often 64 MiB): each
# engine takes its pages when it makes the segment and, short of room, fails with a line
# that names /dev/shm, the bytes and the room there. Before, the segment was only sized
# (ftruncate), and the first touch past the room killed the engine with SIGBUS: the arm
# read "engine crashed: signal 7 (Bus error)", blaming the variant. The run ends
# NO_DECISION (exit 4) with that reason, its record complete and rescored identically.
# Needs root and a mount namespace (unshare -m) for a small tmpfs on /dev/shm; skipped
# otherwise.
. "$(dirname "$0")/lib.sh"
set -e
if [ "$(id -u)" != 0 ] || ! unshare -m sh -c 'mount -t tmpfs -o size=256k bk-shm /dev/shm' \
    2>/dev/null; then
    echo "SKIP: cannot mount a small tmpfs on /dev/shm in a mount namespace (needs root)"
    exit 77
fi
OUT=$IT_TMP/run.log
set +e
# the MPI library's own shared memory kept out of the small /dev/shm (vader's backing
# files in this test's folder): only bracket's segments meet the limit
timeout 300 unshare -m bash -c 'mount -t tmpfs -o size=256k bk-shm /dev/shm && exec "$@"' \
    shm mpirun "${MPIRUN_FLAGS[@]}" --mca btl_vader_backing_directory "$IT_TMP" -np 4 \
    "$BK_BRACKET" run "$IT_PLAN" --out "$IT_TMP/out" >"$OUT" 2>&1
RC=$?
set -e
echo "---- exit $RC"
cat "$OUT"
[ "$RC" = 4 ] || fail "expected NO_DECISION (exit 4), got $RC"
grep -q "Bus error" "$OUT" && fail "an engine died of SIGBUS"
grep -Eq "engine failed \(exit 1\): shared memory for rank [01]: [0-9]+ bytes \([0-9.]+ KiB\) cannot be had in /dev/shm: No space left on device; /dev/shm has [0-9.]+ KiB free of 256.0 KiB" "$OUT" ||
    fail "no line naming /dev/shm, the bytes and its room"
grep -q "^verdict: NO_DECISION" "$OUT" || fail "no NO_DECISION verdict"
RECORD=$(ls "$IT_TMP"/out/*/record.json)
python3 - "$RECORD" <<'EOF' || fail "the record does not carry the reason"
import json, sys
r = json.load(open(sys.argv[1]))
a = r["arms"][0]
assert a["ran"] and not a["ok"], a
assert "cannot be had in /dev/shm" in a["reason"], a["reason"]
assert r["verdict"] == "NO_DECISION", r["verdict"]
EOF
"$BK_BRACKET" score --quiet "$RECORD" || [ $? = 4 ] || fail "bracket score of the record"
"$BK_BRACKET" score --quiet "$RECORD" 2>&1 | grep -q "identical to the record" ||
    fail "the record is not rescored identically"
echo "PASS"
