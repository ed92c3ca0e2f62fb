#!/usr/bin/env bash
# bracket verify: the cpu candidates pass against the float64 reference across their
# domain (one probe past the domain is served by the incumbent); a corrupting variant
# fails with exit 3; engines leave nothing behind.
. "$(dirname "$0")/lib.sh"
set -e
v() { set +e; "$BK_BRACKET" verify "$@" >"$IT_TMP/v.log" 2>&1; RC=$?; set -e; cat "$IT_TMP/v.log"; }
v "$IT_PLAN" --checks 2
[ "$RC" = 0 ] || fail "verify of shm_oneshot_fused exited $RC"
grep -q "^PASSED" "$IT_TMP/v.log" || fail "no PASSED line"
grep -Eq " 513 +4096 +shm_twopass " "$IT_TMP/v.log" || fail "the shape past the domain was not routed to the incumbent"
v "$IT_PLAN" --variant shm_twopass --checks 1 --world 4 --no-domain-shapes
[ "$RC" = 0 ] || fail "verify of shm_twopass at world 4 exited $RC"
v "$IT_PLAN" --set candidate.variant=corrupt --set 'candidate.params={"base":"shm_oneshot_fused"}' --checks 1
[ "$RC" = 3 ] || fail "verify of corrupt exited $RC, expected 3"
grep -q "FAILED" "$IT_TMP/v.log" || fail "corrupt not reported"
v "$IT_PLAN" --variant nope
[ "$RC" = 2 ] || fail "unknown variant exited $RC"
grep -q "candidate.variant" "$IT_TMP/v.log" || fail "unknown variant message"
if pgrep -f "bracket engine .*verify-" >/dev/null; then fail "engines left behind"; fi
echo "PASS: verify"
