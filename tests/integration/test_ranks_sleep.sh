#!/usr/bin/env bash
# Ranks wait without spinning (DESIGN: a waiting agent sleeps between its MPI tests): with
# arm C's two engines stopped (SIGSTOP) for 1 s, nothing else has work, and each of the 4
# ranks (rank 0, the coordinator; the agents of C's engines, waiting for them to end; lane
# B's, waiting for the next arm) uses under 10% of a CPU. A rank that polls MPI without its
# 5 ms nap takes a whole core then (Open MPI's MPI_Test only yields). The engines go on, and
# the run ends as usual. (While the engines run, a spinning rank hardly shows: it yields
# the cores to them.)
. "$(dirname "$0")/fault_lib.sh"
set -e
# C long enough to be caught running (2 shapes x 3000 iterations of a twopass of about
# 28 us, times 10)
it_start ranks-sleep 4 "$IT_PLAN" --set workload.iters=3000 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}'
wait_engines C 2
RANKS=$(rank_pids)
[ "$(echo "$RANKS" | grep -c .)" = 4 ] || fail "expected 4 ranks, found: $RANKS"
kill -STOP $EPIDS
HZ=$(getconf CLK_TCK)
# cpu PID: the rank's user + system time so far, in clock ticks
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A before
for p in $RANKS; do before[$p]=$(cpu "$p"); done
t0=$(date +%s%N)
sleep 1
declare -A after
for p in $RANKS; do after[$p]=$(cpu "$p"); done
t1=$(date +%s%N)
kill -CONT $EPIDS
for p in $RANKS; do
    share=$(python3 -c 'import sys; b, a, hz, t0, t1 = map(float, sys.argv[1:])
print(round(100 * (a - b) / hz / ((t1 - t0) / 1e9), 1))' \
        "${before[$p]}" "${after[$p]}" "$HZ" "$t0" "$t1")
    echo "---- rank pid $p: ${share}% of a CPU while arm C's engines were stopped"
    python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 10)" "$share" ||
        fail "rank $p used ${share}% of a CPU while it waited (a rank that spins?)"
done
it_wait
case "$RC" in 0|3|4) ;; *) fail "the run exited $RC" ;; esac
[ -f "$RECORD" ] || fail "no record"
expect_no_ranks
expect_no_leftovers
echo "PASS: every rank slept while it waited for arm C's engines"
