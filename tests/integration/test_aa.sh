#!/usr/bin/env bash
# A/A: the candidate is the incumbent itself. It must never PASS (two seeds).
. "$(dirname "$0")/lib.sh"
set -e
for seed in 11 12; do
    it_run "aa$seed" 4 "$IT_PLAN" --set candidate.variant=shm_twopass --set workload.seed=$seed
    grep -q "^verdict: " "$OUT" || fail "no verdict"
    if grep -q "^verdict: PASS" "$OUT" || [ "$RC" = 0 ]; then fail "A/A gave PASS"; fi
    [ "$RC" = 3 ] || [ "$RC" = 4 ] || fail "A/A exit $RC is not FAIL or NO_DECISION"
    expect_rescore
done
expect_no_leftovers
echo "PASS: A/A never PASS"
