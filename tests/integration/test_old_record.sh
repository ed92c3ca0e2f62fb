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
