#!/usr/bin/env bash
# scripts/list-skips.sh, which `make test` and gpu-run.sh's test step use to say what a run
# skipped: every "SKIP:" / "SKIPPED:" reason and cmocka "[  SKIPPED ] test" line of a ctest
# log once, with its count, and nothing else; nothing at all for a log without skips; a log
# it cannot read is an error (exit 2) naming it, not an empty list.
. "$(dirname "$0")/lib.sh"
set -e
LS=$BK_SOURCE_DIR/scripts/list-skips.sh
log=$IT_TMP/LastTest.log
# as cmocka 1.1 writes a run with a skipped test: the skip after its RUN line, then again in
# the list at the end, which must not count it twice
cat >"$log" <<'LOG'
1/3 Testing: gpu_test_a
test_a: SKIP: no usable CUDA device
[==========] Running 2 test(s).
[ RUN      ] test_pdl
[  SKIPPED ] test_pdl
[ RUN      ] test_all
[       OK ] test_all
[==========] 2 test(s) run.
[  PASSED  ] 1 test(s).
[  SKIPPED ] 1 test(s), listed below:
[  SKIPPED ] test_pdl

 1 SKIPPED TEST(S)
test_b: SKIP: no usable CUDA device
it_test_c: SKIPPED: needs root (the NCCL-over-hosts test)
a line that says skip but is none: skipped nothing
LOG
got=$("$LS" "$log")
want=$(printf '%s\n' "      1 SKIPPED: needs root (the NCCL-over-hosts test)" \
                     "      2 SKIP: no usable CUDA device" \
                     "      1 [  SKIPPED ] test_pdl" | LC_ALL=C sort -k2)
[ "$(echo "$got" | LC_ALL=C sort -k2)" = "$want" ] ||
    fail "list-skips.sh listed:"$'\n'"$got"$'\n'"wanted (in any order):"$'\n'"$want"
printf '1/1 Testing: x\n[  PASSED  ] 3 test(s).\n' >"$log"
got=$("$LS" "$log") || fail "a log without skips: exit $?"
[ -z "$got" ] || fail "a log without skips listed: $got"
set +e
err=$("$LS" "$IT_TMP/none.log" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "a missing log: exit $rc, not 2"
case $err in *"$IT_TMP/none.log"*) ;; *) fail "a missing log's error does not name it: $err" ;; esac
echo "PASS: list-skips.sh lists each skip once with its count, nothing else"
