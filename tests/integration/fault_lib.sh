# fault_lib.sh - helpers for the fault tests (tests/integration/test_fault_*.sh): runs in the
# background, bounded waits for this test's own engines. Sourced after lib.sh's settings.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# engines' plan copies and the coordinator's ipc folder live in this test's folder, so
# pgrep can find this test's processes and no other's
export TMPDIR=$IT_TMP

# it_start NAME NP [bracket run args...]: like it_run, in the background; sets PID, OUT
it_start() {
    local name=$1 np=$2
    shift 2
    OUT=$IT_TMP/$name.log
    OUTDIR=$IT_TMP/out-$name
    timeout 600 mpirun "${MPIRUN_FLAGS[@]}" -np "$np" "$BK_BRACKET" run "$@" --out "$OUTDIR" \
        --quiet >"$OUT" 2>&1 &
    PID=$!
}

# it_wait: wait for the run it_start began; sets RC and RECORD, prints its output
it_wait() {
    set +e
    wait "$PID"
    RC=$?
    set -e
    RECORD=$(ls -d "$OUTDIR"/*/record.json 2>/dev/null | head -n 1 || true)
    echo "---- exit $RC"
    cat "$OUT"
}

# engine_pids ARM: pids of this test's engines of arm ARM (none: empty)
engine_pids() {
    pgrep -f "bracket engine --plan $IT_TMP/[^ ]* --run [^ ]* --arm $1 " || true
}

# wait_engines ARM N: until N engines of arm ARM run (at most 120 s); sets EPIDS
wait_engines() {
    local i
    for i in $(seq 1200); do
        EPIDS=$(engine_pids "$1")
        [ "$(echo "$EPIDS" | grep -c .)" -ge "$2" ] && return 0
        kill -0 "$PID" 2>/dev/null || fail "the run ended before arm $1 started"
        sleep 0.1
    done
    fail "no $2 engines of arm $1 within 120 s"
}

# rank_pids: this test's bracket ranks (not mpirun, not timeout)
rank_pids() {
    pgrep -f "^$BK_BRACKET run .*--out $IT_TMP/" || true
}

# expect_no_private_dirs: no agent folder (plan copy, key file) and no coordinator folder
# of this test's runs is left in $TMPDIR
expect_no_private_dirs() {
    local left
    left=$(ls -d "$IT_TMP"/bracket-* 2>/dev/null || true)
    [ -z "$left" ] || fail "private folders left behind: $left"
}
