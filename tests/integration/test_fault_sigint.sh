#!/usr/bin/env bash
# SIGINT delivered to every rank while arm C runs (what srun does with a Ctrl-C), and SIGHUP
# (a rank signalled, a run without mpirun whose terminal closed): a partial
# record with verdict NO_DECISION and reason `terminated` (by the signal), a nonzero exit, no
# engine, rank or shared-memory segment left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# signal_in_c NAME SIG: a run whose arm C is slowed, every rank sent SIG while C runs: a
# partial record, NO_DECISION, terminated by SIG, B whole, C failed saying so (not that a
# peer failed: the engines were stopped by the termination)
signal_in_c() {
    local name=$1 sig=$2
    it_start "$name" 4 "$IT_PLAN" --set candidate.variant=slowed \
        --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=6000
    wait_engines C 2
    RANKS=$(rank_pids)
    [ "$(echo "$RANKS" | grep -c .)" = 4 ] || fail "$name: expected 4 ranks, found: $RANKS"
    for p in $RANKS; do kill -"$sig" "$p"; done
    it_wait
    [ "$RC" != 0 ] || fail "$name: a terminated run exited 0"
    [ -n "$RECORD" ] || fail "$name: no partial record written"
    python3 - "$RECORD" "SIG$sig" <<'PY' || fail "$name: the partial record is not NO_DECISION / terminated by SIG$sig"
import json, sys
r, sig = json.load(open(sys.argv[1])), sys.argv[2]
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["reasons"].startswith("terminated by " + sig), r["reasons"]
assert not r["unfinished"], "the unfinished record was left"
assert r["arms"][0]["ok"], r["arms"][0]
c = r["arms"][1]
assert c["ran"] and not c["ok"] and "terminated by %s during arm C" % sig in c["reason"], c
assert "after a peer failed" not in c["reason"], c["reason"]
PY
}
signal_in_c sigint INT
expect_no_ranks

# the same while arm B runs, where rank 0's own engine is in the lane (rank 0 stops it
# itself, no agent reports a signal for it): its line too says the run was terminated,
# not that a peer failed
it_start sigint-b 4 "$IT_PLAN" --set workload.iters=60000
wait_engines B 2
for p in $(rank_pids); do kill -INT "$p"; done
it_wait
[ "$RC" != 0 ] || fail "sigint-b: an interrupted run exited 0"
python3 - "$RECORD" <<'PY' || fail "sigint-b: arm B's reason does not say the run was terminated"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["reasons"].startswith("terminated by SIGINT"), r["reasons"]
b = r["arms"][0]
assert b["ran"] and not b["ok"] and not r["arms"][1]["ran"], r["arms"][:2]
assert "lane rank 0 " in b["reason"] and "as the run was terminated" in b["reason"], b["reason"]
assert "after a peer failed" not in b["reason"], b["reason"]
PY
expect_no_ranks

# SIGHUP to every rank (what reaches a rank a user or a launcher signals, or a run without
# mpirun whose terminal closed; under mpirun a hang-up reaches mpirun alone, which relays
# SIGTERM) is a termination too, not a death that leaves the unfinished record
signal_in_c sighup HUP
expect_terminated_clean
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
# ... unless SIGHUP was ignored from the start (nohup bracket run, no mpirun: mpirun gives its
# ranks the default): then the run outlives the hang-up, and a SIGTERM still ends it
OUT=$IT_TMP/nohup.log
OUTDIR=$IT_TMP/out-nohup
(trap '' HUP; exec "$BK_BRACKET" run "$IT_PLAN" --set arena.tp=1 \
    --set lanes.policy=shared --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=6000 \
    --out "$OUTDIR" --quiet >"$OUT" 2>&1) &
PID=$!  # bracket itself (timeout would give it SIGHUP's default again); killed below
BK=$PID
wait_engines C 1
grep -q "^SigIgn:.*[13579bdf]$" /proc/$BK/status || fail "nohup: SIGHUP not ignored in the run"
kill -HUP "$BK"
sleep 1
kill -0 "$BK" 2>/dev/null || fail "nohup: an ignored SIGHUP ended the run"
kill -TERM "$BK"
it_wait
[ "$RC" != 0 ] || fail "nohup: a terminated run exited 0"
python3 - "$RECORD" <<'PY' || fail "nohup: not terminated by SIGTERM (the ignored SIGHUP counted)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["reasons"].startswith("terminated by SIGTERM"), r["reasons"]
PY
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
echo "PASS: SIGINT in arm C, then in arm B, SIGHUP in arm C -> partial records, NO_DECISION (terminated), nothing left behind"
