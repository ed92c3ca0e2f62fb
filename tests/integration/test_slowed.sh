#!/usr/bin/env bash
# A candidate 20% slower than the incumbent (diagnostic `slowed`) is FAIL, and
# `bracket score` reproduces it from the raw samples. Drift policy strict, repeated while
# B and B' disagree (it_run_settled): the assertion is about a settled measurement.
. "$(dirname "$0")/lib.sh"
set -e
it_run_settled slowed 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":0.2}' --set protocol.drift_policy=strict
expect_verdict FAIL 3
grep -q "slower or no material gain" "$OUT" || fail "FAIL without the speed reason"
expect_rescore
expect_no_leftovers
echo "PASS: slowed 20% -> FAIL"
