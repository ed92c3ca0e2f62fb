#!/usr/bin/env bash
# `bracket score` on a record written before protocol.repeats existed (tests/fixtures/records/
# pre-repeats: the cpu backend at commit 276c7ff; no arms[].rounds, no round in its samples):
# read as one round each, it is recomputed bit for bit, with the record's verdict and exit.
. "$(dirname "$0")/lib.sh"
set -e
src=$BK_SOURCE_DIR/tests/fixtures/records/pre-repeats
cp "$src/record.json" "$src/samples.msgpack" "$IT_TMP/"
python3 - "$IT_TMP/record.json" <<'PY' || fail "the fixture is not a pre-repeats record"
import json, sys
r = json.load(open(sys.argv[1]))
assert all("rounds" not in a for a in r["arms"]), "fixture has rounds"
assert "repeats" not in r["plan"]["protocol"], "fixture has repeats"
PY
set +e
"$BK_BRACKET" score "$IT_TMP/record.json" >"$IT_TMP/score.log" 2>&1
rc=$?
set -e
cat "$IT_TMP/score.log"
want=$(python3 -c "import json,sys; print({'PASS':0,'FAIL':3,'NO_DECISION':4}[json.load(open(sys.argv[1]))['verdict']])" "$IT_TMP/record.json")
[ "$rc" = "$want" ] || fail "bracket score exited $rc, the record's verdict says $want"
grep -q "identical to the record" "$IT_TMP/score.log" || fail "the old record is not recomputed identically"
echo "PASS: a record from before protocol.repeats re-scores bit for bit"

# A record written before 2026-12-04 cut a long reason where its bytes ran out (mid-word:
# byte-cut-reasons, the cpu backend at 4ae1f8d, a `lazy` candidate whose arm C reason fills
# its 256-byte buffer: "... arm C l; arm B' missing"); reasons are now cut after a whole word. Both `bracket score` and
# docs/rescore.py recompute it as identical, saying how its reasons were cut.
src=$BK_SOURCE_DIR/tests/fixtures/records/byte-cut-reasons
mkdir -p "$IT_TMP/bc"
cp "$src/record.json" "$src/samples.msgpack" "$src/topology.json" "$IT_TMP/bc/"
python3 - "$IT_TMP/bc/record.json" <<'PY' || fail "the fixture's reasons are not cut mid-word"
import json, sys
r = json.load(open(sys.argv[1]))
assert "; arm C l; arm B' missing" in r["reasons"] and "..." not in r["reasons"], r["reasons"][-60:]
PY
set +e
"$BK_BRACKET" score "$IT_TMP/bc/record.json" >"$IT_TMP/bc.log" 2>&1
rc=$?
set -e
cat "$IT_TMP/bc.log"
[ "$rc" = 3 ] || fail "bracket score of the byte-cut record exited $rc, its verdict FAIL says 3"
grep -q "identical to the record" "$IT_TMP/bc.log" || fail "the byte-cut record is not recomputed identically"
grep -q "^note: its reasons are cut where the bytes ran out" "$IT_TMP/bc.log" ||
    fail "score does not say the record's reasons were cut by bytes"
python3 "$BK_SOURCE_DIR/docs/rescore.py" "$IT_TMP/bc/record.json" >"$IT_TMP/bc-py.log" 2>&1 ||
    { cat "$IT_TMP/bc-py.log"; fail "docs/rescore.py does not recompute the byte-cut record"; }
grep -q "cut where the bytes ran out" "$IT_TMP/bc-py.log" || fail "rescore.py does not say how the reasons were cut"
echo "PASS: a record whose reasons were cut by bytes re-scores identically, with a note"
