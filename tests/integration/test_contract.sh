#!/usr/bin/env bash
# A candidate that breaks its contract FAILs on quality, whatever its speed:
#  - lazy does its work only in untimed calls: the engine poisons the outputs before the
#    last timed call and checks them against an untimed call's (arm C fails, quality fail);
#  - mutate changes its input: audit A runs with --check-inputs (quality fail), and
#    `bracket verify` reports it as a failed check (exit 3), not as its own failure.
# An incumbent that mutates its input on a shape routed to it in A is not held against the
# candidate (NO_DECISION). The records rescore to the same verdict from their evidence.
. "$(dirname "$0")/lib.sh"
set -e
it_run lazy 4 "$IT_PLAN" --set candidate.variant=lazy \
    --set 'candidate.params={"base":"shm_oneshot_fused"}'
expect_verdict FAIL 3
grep -q "^quality: fail: the candidate broke its contract in arm C" "$OUT" ||
    fail "lazy: quality is not failed for the broken contract"
grep -q "its last timed call left output 'out' element 0 unwritten" "$OUT" ||
    fail "lazy: the unwritten output is not named"
python3 - "$RECORD" <<'PY' || fail "lazy: record"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["quality"]["state"] == "fail", r["quality"]
c = r["arms"][1]
assert not c["ok"] and c["processes"] and all(p["broke_contract"] for p in c["processes"]), \
    c["processes"]
assert not any(p["broke_contract"] for p in r["arms"][0]["processes"])
PY
expect_rescore
expect_no_leftovers

it_run mutate 4 "$IT_PLAN" --set candidate.variant=mutate \
    --set 'candidate.params={"base":"shm_oneshot_fused","element":5}'
expect_verdict FAIL 3
grep -q "^quality: fail: the candidate broke its contract in arm A" "$OUT" ||
    fail "mutate: quality is not failed for the mutated input"
grep -q "mutate mutated its input 'x'" "$OUT" || fail "mutate: the input is not named"
python3 - "$RECORD" <<'PY' || fail "mutate: record"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["quality"]["state"] == "fail", r["quality"]
assert r["arms"][1]["ok"], "C (timed) sees one input every call: it must complete"
assert any(p["broke_contract"] for p in r["arms"][3]["processes"])
PY
expect_rescore
expect_no_leftovers

# the same record with the flag cleared must not rescore as it was: the flag is evidence
python3 - "$RECORD" "$IT_TMP/cleared.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["arms"][3]["processes"]:
    p["broke_contract"] = False
json.dump(r, open(sys.argv[2], "w"))
PY
cp "$(dirname "$RECORD")/samples.msgpack" "$IT_TMP/samples.msgpack"
set +e
"$BK_BRACKET" score "$IT_TMP/cleared.json" > "$IT_TMP/cleared.log" 2>&1
RC=$?
set -e
[ "$RC" = 1 ] || { cat "$IT_TMP/cleared.log"; fail "a record without its broke_contract flag rescored (exit $RC)"; }
grep -q "quality" "$IT_TMP/cleared.log" || fail "the rescore does not name the quality state"

# the incumbent breaking the contract on a shape it serves for the candidate (600 tokens is
# outside shm_oneshot_fused's domain) is not the candidate's: A fails, quality is missing,
# NO_DECISION - never a FAIL held against the candidate
it_run inc-mutate 4 "$IT_PLAN" --set incumbent.variant=mutate \
    --set 'incumbent.params={"base":"shm_twopass"}' --set workload.iters=100 \
    --set 'workload.shapes=[{"tokens":1,"hidden":4096,"weight":0.5},{"tokens":600,"hidden":4096,"weight":0.5}]'
expect_verdict NO_DECISION 4
grep -q "^quality: missing: audit A did not complete" "$OUT" ||
    fail "an incumbent's broken contract on a routed shape was held against the candidate"
python3 - "$RECORD" <<'PY' || fail "inc-mutate: record"
import json, sys
r = json.load(open(sys.argv[1]))
a = r["arms"][3]
assert not a["ok"] and not any(p["broke_contract"] for p in a["processes"]), a["processes"]
PY
expect_rescore
expect_no_leftovers

set +e
"$BK_BRACKET" verify "$IT_PLAN" --set candidate.variant=mutate \
    --set 'candidate.params={"base":"shm_oneshot_fused"}' --checks 1 > "$IT_TMP/v.log" 2>&1
RC=$?
set -e
[ "$RC" = 3 ] || { cat "$IT_TMP/v.log"; fail "verify of mutate exited $RC, expected 3"; }
grep -q "^FAILED: seed .*the variant broke its contract: mutate mutated its input 'x'" \
    "$IT_TMP/v.log" || fail "verify: the mutated input is not reported as a failed check"
expect_no_leftovers
echo "PASS: lazy and mutate -> FAIL for quality (broken contract); verify of mutate exit 3"
