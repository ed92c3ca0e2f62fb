#!/usr/bin/env bash
# A/A: the candidate is the incumbent itself. It must never PASS (two seeds).
# The drift policy is `strict`: under `exclude_later` a B' that drifts past the
# limit is excluded and B vs C decides alone, so on a machine whose load changes
# between arms (other jobs, a 2-core CI box) an A/A can cross the bar by noise;
# strict turns that drift into NO_DECISION, which is what this test pins down.
. "$(dirname "$0")/lib.sh"
set -e
for seed in 11 12; do
    it_run_settled "aa$seed" 4 "$IT_PLAN" --set candidate.variant=shm_twopass --set workload.seed=$seed \
        --set protocol.drift_policy=strict
    grep -q "^verdict: " "$OUT" || fail "no verdict"
    if grep -q "^verdict: PASS" "$OUT" || [ "$RC" = 0 ]; then fail "A/A gave PASS"; fi
    [ "$RC" = 3 ] || [ "$RC" = 4 ] || fail "A/A exit $RC is not FAIL or NO_DECISION"
    expect_rescore
done
expect_no_leftovers
echo "PASS: A/A never PASS"
