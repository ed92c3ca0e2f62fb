#!/usr/bin/env bash
# More MPI ranks than the lanes take (mpirun -np 6 for lanes of 2 + 2): the ranks in neither
# lane are named once at the start, by rank 0, and not under --quiet; none when all are used.
# Each arm's progress line names the variant it runs (A and T marked audits), not under --quiet.
# Lanes all on rank 0's host keep the coordinator on ipc:// (no tcp without --iface); the
# run's folder is named by its run id, which starts with the UTC date.
. "$(dirname "$0")/lib.sh"
set -e
# idle NAME NP [args...]: a short run without --quiet, output in $IT_TMP/NAME.log
idle() {
    local name=$1 np=$2
    shift 2
    set +e
    timeout 300 mpirun "${MPIRUN_FLAGS[@]}" -np "$np" "$BK_BRACKET" run "$IT_PLAN" \
        --set workload.iters=20 --out "$IT_TMP/out-$name" "$@" >"$IT_TMP/$name.log" 2>&1
    local rc=$?
    set -e
    echo "---- $name: exit $rc"
    cat "$IT_TMP/$name.log"
    case "$rc" in 0|3|4) ;; *) fail "$name: exit $rc" ;; esac
}
idle six 6
[ "$(grep -c "idle" "$IT_TMP/six.log")" = 1 ] || fail "six: the idle ranks not said once"
grep -q "^  idle       MPI ranks 4,5: in neither lane, no engine runs there (the lanes take 4 of the 6 ranks)$" \
    "$IT_TMP/six.log" || fail "six: the idle ranks not named"
idle quiet 6 --quiet
! grep -q "idle" "$IT_TMP/quiet.log" || fail "quiet: the idle ranks named under --quiet"
# a progress line ends "on N rank(s)..."; a straggler note ("bracket: arm B: straggler: ...")
# is a warning, printed with or without --quiet, and comes when the machine is loaded
PROGRESS='^bracket: arm [^:]* on [0-9]+ rank\(s\)\.\.\.$'
! grep -Eq "$PROGRESS" "$IT_TMP/quiet.log" || fail "quiet: per-arm progress under --quiet"
idle four 4
# one progress line per arm, in run order, naming the variant it runs; the audits marked
grep -E "$PROGRESS" "$IT_TMP/four.log" >"$IT_TMP/four-arms.txt" || true
printf '%s\n' "bracket: arm B (shm_twopass) on 2 rank(s)..." \
    "bracket: arm C (shm_oneshot_fused) on 2 rank(s)..." \
    "bracket: arm B' (shm_twopass) on 2 rank(s)..." \
    "bracket: arm A (shm_oneshot_fused, audit) on 2 rank(s)..." \
    "bracket: arm T (shm_twopass, audit) on 2 rank(s)..." | diff - "$IT_TMP/four-arms.txt" ||
    fail "four: the arms' progress lines do not name each arm's variant in run order"
! grep -q "idle" "$IT_TMP/four.log" || fail "four: idle ranks named though every rank is in a lane"
# every lane on rank 0's host and no --iface: the coordinator stays on ipc://, no tcp (a
# NIC of the topology is taken only for lanes on other hosts)
! grep -q "transport tcp" "$IT_TMP/four.log" || fail "four: tcp chosen with every lane on one host"
grep -q "both on one host" "$IT_TMP/four.log" || fail "four: the lanes are not said to be on one host"
# the run's folder is its run id: UTC date and time, the plan's name, 6 hex digits
DAY=$(date -u +%Y%m%d)
ID=$(ls "$IT_TMP/out-four")
[[ "$ID" =~ ^[0-9]{8}T[0-9]{6}Z-it-cpu-[0-9a-f]{6}$ ]] || fail "four: run id '$ID' is not DATE T TIME Z-PLAN-HEX"
[ "${ID:0:8}" = "$DAY" ] || [ "${ID:0:8}" = "$(date -u -d yesterday +%Y%m%d)" ] ||
    fail "four: run id '$ID' is not of today's UTC date $DAY"
echo "PASS: idle ranks named at the start"
