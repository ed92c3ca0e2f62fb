#!/usr/bin/env bash
# Bad input: a clear error naming what is wrong and where, exit 2, nothing run,
# no record written.
. "$(dirname "$0")/lib.sh"
set -e
check() { # name expected-substring args...
    local name=$1 want=$2
    shift 2
    it_run "$name" "$@"
    [ "$RC" = 2 ] || fail "$name: exit $RC, expected 2"
    grep -qF -- "$want" "$OUT" || fail "$name: message lacks '$want'"
    [ -z "$RECORD" ] || fail "$name: a record was written"
}
check bad-tp "arena.tp: must be an integer >= 1, got 0" 2 "$IT_PLAN" --set arena.tp=0
check bad-variant "candidate.variant: no variant 'nope'" 2 "$IT_PLAN" --set candidate.variant=nope
check few-ranks "needs 4 ranks, mpirun started 2" 2 "$IT_PLAN"
check bad-syntax "bad-syntax.json:" 2 "$BK_SOURCE_DIR/tests/fixtures/plans/bad-syntax.json"
check bad-flag "unknown or incomplete option '--bogus'" 2 "$IT_PLAN" --bogus
check bad-param "candidate.params.fraction" 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"fraction":-1}'
# a plan whose samples cannot fit in rank 0's memory (10^7 iterations x 16 rounds, lanes of
# 64: about 1 TiB) is refused before any engine starts, not killed halfway
big=(--set workload.iters=10000000 --set protocol.repeats=16 --set arena.tp=64)
check too-big "rank 0 would hold about" 4 "$IT_PLAN" "${big[@]}"
grep -q "lower workload.iters, protocol.repeats or the number of shapes" "$OUT" ||
    fail "too-big: the message does not say what to lower"
"$BK_BRACKET" plan check "$IT_PLAN" "${big[@]}" >"$IT_TMP/big.log" ||
    fail "plan check on a valid but too big plan"
cat "$IT_TMP/big.log"
grep -q "GiB at its peak .*too much, .bracket run. refuses it" "$IT_TMP/big.log" ||
    fail "plan check does not warn of the too big plan"
# the output folder cannot be created: clear error, nothing runs
touch "$IT_TMP/file"
set +e
mpirun "${MPIRUN_FLAGS[@]}" -np 4 "$BK_BRACKET" run "$IT_PLAN" --out "$IT_TMP/file/sub" >"$IT_TMP/o.log" 2>&1
rc=$?
set -e
cat "$IT_TMP/o.log"
[ "$rc" = 2 ] || fail "unwritable output: exit $rc"
grep -q "cannot create output folder" "$IT_TMP/o.log" || fail "unwritable output: message"
# bracket plan check and bracket score on bad input
set +e
"$BK_BRACKET" plan check "$BK_SOURCE_DIR/tests/fixtures/plans/bad-unknown-key.json" >"$IT_TMP/p.log" 2>&1
rc=$?
"$BK_BRACKET" score "$IT_TMP/nope/record.json" >"$IT_TMP/s.log" 2>&1
rc2=$?
set -e
cat "$IT_TMP/p.log" "$IT_TMP/s.log"
[ "$rc" = 2 ] && grep -q "unknown key" "$IT_TMP/p.log" || fail "plan check on a bad plan"
[ "$rc2" = 2 ] && grep -q "cannot read" "$IT_TMP/s.log" || fail "score on a missing record"
"$BK_BRACKET" plan check "$IT_PLAN" | grep -q "valid" || fail "plan check on a good plan"
echo "PASS: bad input rejected with clear errors"
