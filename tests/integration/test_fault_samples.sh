#!/usr/bin/env bash
# samples.msgpack cannot be written (a folder of that name takes its place in the run folder
# while arm B runs): no record is written after that, since a record would name the digest
# of a samples file that is not there. Each unfinished record before a later arm says it
# was not written, the verdict is followed by the line that it has no record (exit 1), and
# the record.json left is the unfinished one written before the swap, unchanged. Needs no
# root (test_fault_outdir.sh's full disk fails both files alike, so it cannot tell).
. "$(dirname "$0")/fault_lib.sh"
set -e
it_start samples 4 "$IT_PLAN" --set workload.iters=20000
wait_engines B 2
RUNDIR=$(ls -d "$OUTDIR"/*/ | head -n 1)
[ -f "$RUNDIR/record.json" ] && [ -f "$RUNDIR/samples.msgpack" ] ||
    fail "no unfinished record before arm B in $RUNDIR"
rm "$RUNDIR/samples.msgpack"
mkdir "$RUNDIR/samples.msgpack" || fail "samples.msgpack came back while it was swapped"
touch "$RUNDIR/samples.msgpack/keep"
SUM=$(sha256sum "$RUNDIR/record.json")
# the arm the unfinished record left was written before (B, unless this machine ran B out
# before the swap)
ARM=$(python3 -c "import json,re,sys; print(re.match(r'unfinished: written before arm (\S+);', json.load(open(sys.argv[1]))['stopped']).group(1))" \
    "$RUNDIR/record.json") || fail "the record at the swap is not an unfinished one"
it_wait
[ "$RC" = 1 ] || fail "samples.msgpack not writable: expected exit 1, got $RC"
if [ "$ARM" != T ]; then
    grep -q "^bracket run: warning: the unfinished record before arm .* was not written: cannot rename .*samples.msgpack: Is a directory$" "$OUT" ||
        fail "no unfinished record after the swap says it was not written"
fi
grep -q "^bracket run: the record was not written: cannot rename .*samples.msgpack: Is a directory$" "$OUT" ||
    fail "the run does not say the record was not written"
grep -A20 "^verdict:" "$OUT" | grep -qF "): the verdict above has no record; the unfinished record written before arm $ARM remains" ||
    fail "the verdict is not followed by the line that it has no record"
grep -A20 "^verdict:" "$OUT" | grep -q "^record: NOT WRITTEN (cannot rename .*samples.msgpack: Is a directory)" ||
    fail "the line that the verdict has no record does not say why"
grep -q "^record: /" "$OUT" && fail "a record path was printed"
[ "$(sha256sum "$RUNDIR/record.json")" = "$SUM" ] ||
    fail "record.json was written after samples.msgpack could not be"
ls "$RUNDIR"/*.tmp.* 2>/dev/null && fail "temporary files left"
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
echo "PASS: samples.msgpack not writable -> no record after it, the verdict marked as without record, the unfinished record before arm $ARM intact"
