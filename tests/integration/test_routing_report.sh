#!/usr/bin/env bash
# A workload the candidate serves in part: its C arm runs the incumbent for the shape outside
# its domain, and the report says so on that shape's line (and only there), with the share
# of the weight, and record.json names who served each shape; the speed-up line gives the
# baseline's cost, so the speed-up can be recomputed from the report (baseline cost / C's
# cost); a B' excluded for drifting more than twice the limit gets a note.
. "$(dirname "$0")/lib.sh"
set -e
it_run routing 4 "$IT_PLAN" --set workload.iters=50 \
    --set 'workload.shapes=[{"tokens":1,"hidden":4096,"weight":0.5},{"tokens":600,"hidden":4096,"weight":0.5}]'
[ -n "$RECORD" ] || fail "no record (exit $RC)"
C=$(sed -n '/^  C /,/^  B. /p' "$OUT")
echo "$C" | grep -q "shape 1 (tokens 600, .*(ran the incumbent: .*tokens 600 > max 512" ||
    fail "C's line for the 600-token shape does not say it ran the incumbent"
echo "$C" | grep "shape 0 (tokens 1," | grep -q "ran the incumbent" &&
    fail "C's line for a shape the candidate serves says it ran the incumbent"
grep -q "the candidate serves 50.0% of the workload's weight" "$OUT" || fail "no routing share"
# the record says who served each shape: the candidate where its domain takes the shape, the
# incumbent (with the candidate's bound as the reason) where it does not
python3 - "$RECORD" <<'PY' || fail "record.json's routing.shapes do not name who served each shape"
import json, sys
r = json.load(open(sys.argv[1]))["routing"]
got = [(s["shape"], s["tokens"], s["served_by"], s["why"]) for s in r["shapes"]]
assert got == [(0, 1, "shm_oneshot_fused", ""), (1, 600, "shm_twopass", "tokens 600 > max 512")], got
assert abs(r["candidate_share"] - 0.5) < 1e-12, r["candidate_share"]
PY
# and what each engine said it served with the incumbent (its status), as the run checked it:
# C's and A's engines shape 1, those of the incumbent's arms none
python3 - "$RECORD" <<'PY' || fail "the processes' routed_shapes are not the engines' routing"
import json, sys
for a in json.load(open(sys.argv[1]))["arms"]:
    want = [1] if a["name"] in ("C", "A") else []
    assert a["ran"] and a["ok"], a["name"]
    for p in a["processes"]:
        assert p["routed_shapes"] == want, (a["name"], p)
PY
# a record whose engine is said to have routed otherwise is judged again and refused
TAMPER=$IT_TMP/tampered-routing
cp -r "$(dirname "$RECORD")" "$TAMPER"
python3 - "$TAMPER/record.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["arms"][1]["processes"][0]["routed_shapes"] = []
json.dump(r, open(sys.argv[1], "w"))
PY
set +e
"$BK_BRACKET" score "$TAMPER/record.json" >"$IT_TMP/tamper.log" 2>&1
TRC=$?
set -e
cat "$IT_TMP/tamper.log"
[ "$TRC" = 1 ] && grep -q "engine served shape(s) none with the incumbent; the variant's domain routes 1" "$IT_TMP/tamper.log" ||
    fail "a record with C's routing edited: score exit $TRC, or the routing not named"
if grep -q "^speed-up:" "$OUT"; then
    python3 - "$OUT" "$RECORD" <<'PY' || fail "the speed-up does not follow from the printed costs"
import json, re, sys
out = open(sys.argv[1]).read()
m = re.search(r"^speed-up: ([0-9.]+) .* vs baseline \S+ \(cost ([0-9.]+) us\)", out, re.M)
assert m, "no baseline cost on the speed-up line"
c = float(re.search(r"^  C .* cost +([0-9.]+) us", out, re.M).group(1))
assert abs(float(m.group(2)) / c - float(m.group(1))) < 2e-3 * float(m.group(1)), (m.groups(), c)
r = json.load(open(sys.argv[2]))
assert abs(r["score"]["baseline_cost_ns"] / 1e3 - float(m.group(2))) < 0.01
PY
fi
# a B' excluded for drifting more than twice the limit gets a note, and only then
python3 - "$OUT" "$RECORD" <<'PY' || fail "the drift note does not follow the record's drift"
import json, sys
out, sc = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))["score"]
far = sc["bp_excluded"] and abs(sc.get("drift", 0)) > 2 * sc["thresholds"]["drift_limit"]
assert far == ("times the drift limit from B" in out), (far, sc)
PY
expect_rescore
expect_no_leftovers
echo "PASS: partial routing is shown per shape, the speed-up follows from the printed costs"
