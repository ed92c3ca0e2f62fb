#!/usr/bin/env bash
# A candidate 20% slower than the incumbent (diagnostic `slowed`) is FAIL, and
# `bracket score` reproduces it from the raw samples.
. "$(dirname "$0")/lib.sh"
set -e
it_run slowed 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":0.2}'
expect_verdict FAIL 3
grep -q "slower or no material gain" "$OUT" || fail "FAIL without the speed reason"
expect_rescore
expect_no_leftovers
echo "PASS: slowed 20% -> FAIL"
