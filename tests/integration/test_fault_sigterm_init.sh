#!/usr/bin/env bash
# SIGTERM to every rank while MPI_Init still runs: no run id exists yet, so there is nothing
# to record. Every rank leaves with status 4, rank 0 says so in one line, and no rank,
# engine, run folder or private folder is left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
for try in 1 2 3; do
    it_start sigterm-init-$try 4 "$IT_PLAN"
    # the ranks as soon as all four are inside MPI_Init (at most 10 s): their main has
    # begun (a signal before it would kill a rank, as it would any program) and Open MPI
    # has started its threads, long before its start-up exchange has ended
    for i in $(seq 2000); do
        RANKS=$(rank_pids)
        if [ "$(echo "$RANKS" | grep -c .)" = 4 ]; then
            n=0
            for p in $RANKS; do
                t=$(awk '/^Threads:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
                [ "${t:-1}" -ge 2 ] && n=$((n + 1))
            done
            [ "$n" = 4 ] && break
        fi
        sleep 0.005
    done
    [ "$(echo "$RANKS" | grep -c .)" = 4 ] || fail "expected 4 ranks, found: $RANKS"
    for p in $RANKS; do kill -TERM "$p" 2>/dev/null || true; done
    it_wait
    # on a slow start the signal can land after MPI_Init: that run is terminated before
    # arm B with a partial record (test_fault_sigterm_stopped's case), not this one
    grep -q "terminated by SIGTERM before arm\|terminated by SIGTERM during arm" "$OUT" ||
        break
    echo "---- the signal came after MPI_Init; again"
    [ "$try" = 3 ] && { echo "SKIP: the signal never landed within MPI_Init"; exit 77; }
done
[ "$RC" = 4 ] || fail "a run terminated during MPI_Init: expected exit 4, got $RC"
[ "$(grep -c "^bracket run: terminated by SIGTERM while MPI started, before the run had an id: no arm ran, nothing recorded$" "$OUT")" = 1 ] ||
    fail "no single line saying the run was terminated before it had an id"
grep -q "exited on signal" "$OUT" && fail "a rank died of the signal"
[ ! -e "$OUTDIR" ] || fail "a run folder was made: $(ls -R "$OUTDIR")"
expect_no_ranks
expect_no_leftovers --no-record
expect_no_private_dirs
echo "PASS: SIGTERM during MPI_Init -> exit 4, one line, nothing recorded, nothing left behind"
