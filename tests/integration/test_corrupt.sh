#!/usr/bin/env bash
# A candidate that perturbs its outputs past tolerance fails quality: FAIL,
# whatever its speed, with A and T's comparison in the record.
. "$(dirname "$0")/lib.sh"
set -e
it_run corrupt 4 "$IT_PLAN" --set candidate.variant=corrupt \
    --set 'candidate.params={"base":"shm_oneshot_fused","magnitude":1.0}'
expect_verdict FAIL 3
grep -q "^quality: fail" "$OUT" || fail "quality is not reported as failed"
python3 - "$RECORD" <<'PY' || fail "record quality section"
import json, sys
r = json.load(open(sys.argv[1]))
q = r["quality"]
assert q["state"] == "fail", q["state"]
assert sum(t["mismatches"] for t in q["tensors"]) > 0
assert r["arms"][3]["ran"] and r["arms"][4]["ran"]
PY
expect_rescore
expect_no_leftovers
echo "PASS: corrupt -> FAIL for quality"
