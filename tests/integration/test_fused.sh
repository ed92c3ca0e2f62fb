#!/usr/bin/env bash
# shm_oneshot_fused against shm_twopass on the cpu backend, v8, 4 ranks: the
# verdict it earns. Measured on the 2-core CI machine (docs/BENCHMARKS.md): the
# one-shot fused variant needs one barrier-separated pass instead of three and
# wins clearly at both shapes: PASS (status reproduction_pending).
. "$(dirname "$0")/lib.sh"
set -e
it_run fused 4 "$IT_PLAN"
expect_verdict PASS 0
grep -q "reproduction_pending" "$OUT" || fail "PASS without status reproduction_pending"
python3 - "$RECORD" <<'PY' || fail "record contents"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "bracket.record/1"
assert [a["ran"] for a in r["arms"]] == [True] * 5, "all five arms ran under v8"
assert r["quality"]["state"] == "pass"
assert r["lanes"]["baseline"] == [0, 1] and r["lanes"]["candidate"] == [2, 3]
assert r["score"]["speedup_interval"][0] > 1.05
assert r["routing"]["candidate_share"] == 1.0
for a in r["arms"]:
    for p in a["processes"]:
        assert p["exit_code"] == 0 and p["status_ok"], p
PY
expect_rescore
expect_no_leftovers
echo "PASS: oneshot fused vs twopass -> PASS"
