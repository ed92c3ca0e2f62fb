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
# within tolerance, the quality line says A is not T bit for bit, and how far off it is
it_run corrupt-small 4 "$IT_PLAN" --set candidate.variant=corrupt \
    --set 'candidate.params={"base":"shm_oneshot_fused","magnitude":0.004}'
grep -q "^quality: pass (A differs from T bitwise in [1-9][0-9]* of 4 shape x output(s), within rtol 0.01, atol 0.01: max abs err" "$OUT" ||
    fail "a candidate within tolerance but not bitwise equal is not said to differ"
# the incumbent as candidate computes the same bits
it_run aa-bits 4 "$IT_PLAN" --set candidate.variant=shm_twopass
grep -q "^quality: pass (A equals T bit for bit)$" "$OUT" || fail "A/A is not said to be bit for bit"
expect_no_leftovers
echo "PASS: corrupt -> FAIL for quality; within tolerance it is said to differ bitwise"
