#!/usr/bin/env bash
# The fault tests' own failure path: a test that fails while the run it_start began is
# still going (fault_lib.sh's fail) ends that run and reaps it, rather than leaving its
# mpirun and ranks behind for up to 600 s.
. "$(dirname "$0")/lib.sh"
set -e
cat >"$IT_TMP/failing.sh" <<'SH'
. "$BK_SOURCE_DIR/tests/integration/fault_lib.sh"
set -e
echo "$IT_TMP" >"$1"
it_start long 4 "$IT_PLAN" --set workload.iters=2000000 --set timeouts.arm_s=300
wait_engines B 2
echo "$PID" >>"$1"
fail "a deliberate failure with the run still going"
SH
set +e
timeout 120 bash "$IT_TMP/failing.sh" "$IT_TMP/info" >"$IT_TMP/failing.log" 2>&1
rc=$?
set -e
cat "$IT_TMP/failing.log"
[ "$rc" = 1 ] || fail "the failing test exited $rc, expected 1"
grep -q "FAIL: a deliberate failure" "$IT_TMP/failing.log" || fail "the failing test did not fail"
ctmp=$(sed -n 1p "$IT_TMP/info")
job=$(sed -n 2p "$IT_TMP/info")
[ -n "$ctmp" ] && [ -n "$job" ] || fail "the failing test did not start its run"
left=""
for i in $(seq 50); do
    left=$(pgrep -f -- "--out $ctmp/" || true)
    [ -z "$left" ] && break
    sleep 0.1
done
if [ -n "$left" ]; then
    ps -o pid,args -p "$(echo $left | tr ' ' ,)" || true
    # end what the failing test left, so this test leaves nothing either
    pgrep -x timeout | grep -qx "$job" && kill -TERM "$job" 2>/dev/null || true
    for i in $(seq 100); do [ -z "$(pgrep -f -- "--out $ctmp/")" ] && break; sleep 0.1; done
    fail "fail left the run's processes behind: $(echo $left)"
fi
echo "PASS: a failing fault test ends its run"
