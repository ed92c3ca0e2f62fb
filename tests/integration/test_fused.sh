#!/usr/bin/env bash
# shm_oneshot_fused against shm_twopass on the cpu backend, v8, 4 ranks (2 lanes of 2):
# the verdict it earns. Measured on the 2-core CI-like machine (docs/BENCHMARKS.md,
# 2026-12-02, engines pinned one per core): at 1 and 32 tokens x 4096 the two are at
# parity (about 8 us and 230-300 us each): the one-shot sums every peer's whole tensor,
# twice the reduction work of the reduce-scatter at 2 ranks, and that eats what its
# saved barriers and fused epilogue win. No material gain: FAIL when B and B' agree,
# NO_DECISION when they drift past the limit (drift policy strict here, so a drifting B
# can not hand the decision to B vs C alone). Never PASS.
. "$(dirname "$0")/lib.sh"
set -e
it_run fused 4 "$IT_PLAN" --set protocol.drift_policy=strict \
    --set 'workload.shapes=[{"tokens":1,"hidden":4096,"weight":0.5},{"tokens":32,"hidden":4096,"weight":0.5}]'
grep -q "^verdict: PASS" "$OUT" && fail "the one-shot earned no PASS on the cpu backend"
if grep -q "^verdict: FAIL" "$OUT"; then
    expect_verdict FAIL 3
    grep -q "slower or no material gain" "$OUT" || fail "FAIL without the speed reason"
else
    expect_verdict NO_DECISION 4
    grep -Eq "drift|straddles" "$OUT" || fail "NO_DECISION without a drift or interval reason"
fi
python3 - "$RECORD" <<'PY' || fail "record contents"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "bracket.record/1"
assert [a["ran"] for a in r["arms"]] == [True] * 5, "all five arms ran under v8"
assert r["quality"]["state"] == "pass", r["quality"]
assert r["lanes"]["baseline"] == [0, 1] and r["lanes"]["candidate"] == [2, 3]
if not r["score"].get("drift_exceeded"):
    assert r["score"]["speedup_interval"][0] <= 1.05, r["score"]
assert r["routing"]["candidate_share"] == 1.0
assert r["plan"]["candidate"]["variant"] == "shm_oneshot_fused"
for a in r["arms"]:
    for p in a["processes"]:
        assert p["exit_code"] == 0 and p["status_ok"], p
    if not a["audit"]:
        for p in a["processes"]:
            assert p["samples_received"] == 600, p
PY
expect_rescore
expect_no_leftovers
echo "PASS: oneshot fused vs twopass on cpu -> no material gain, as measured"
