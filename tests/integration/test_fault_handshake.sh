#!/usr/bin/env bash
# One engine's tcp connection to rank 0 broken while rank 0 cannot answer (stopped: a
# debugger on it, a descheduled coordinator), in the middle of arm C. ZeroMQ connects again,
# but the new connection's CURVE handshake cannot complete until rank 0 runs again, and a
# send waits for a completed one. That engine's sends of its work no longer wait for it:
# what they could not send goes again, with the rest of its samples, before its status. Its
# lane peer, at the next barrier, is not left waiting for it.
# Before, the engine's next send of samples waited (up to 60 s) while its peer, at the next
# barrier, gave up after rendezvous_s (here 4 s): C failed, "barrier: rank R did not arrive
# within 4.0 s", for a link that had only to be made again. Now C stands with every sample,
# some of them came again (the record's wire.repeated), and the run goes on to its verdict.
# Needs root and a kernel with socket destroy (ss -K); skipped, saying which, otherwise.
. "$(dirname "$0")/fault_lib.sh"
set -e
[ "$(id -u)" = 0 ] || { echo "SKIP: ss -K needs root"; exit 77; }
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2)"; exit 77; }

rdv_s=4 stop_s=10 # the stop: past the peer's barrier bound (rendezvous_s) with room
PORT=$(free_port_pair)
[ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"
# C: a 4x slower candidate, 60000 iterations a shape (some 20 s on an idle machine here, 10 s
# once with 30000, which the 10 s stop outlasted): still at work after
# the stop; samples go every 256 iterations, each after a barrier of the lane
it_start handshake 4 "$IT_PLAN" --iface lo --port "$PORT" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":3}' --set workload.iters=60000 \
    --set timeouts.rendezvous_s=$rdv_s --set timeouts.arm_s=300
wait_engines C 2
EP=$(echo $EPIDS)
wait_met $EP
ENG=$(echo "$EPIDS" | head -n 1)
find_rank0
# the engine's samples connection (to PORT + 1): its local port, from its own socket
conn() {
    ss -t -n -p -H state established "( dport = :$((PORT + 1)) )" 2>/dev/null |
        awk -v p="pid=$ENG," 'index($0, p) { print $3; exit }'
}
LOCAL=$(conn)
[ -n "$LOCAL" ] || fail "no samples connection of engine $ENG to port $((PORT + 1))"
kill -STOP "$RANK0"
out=$(ss -K -t -n state established "( sport = :${LOCAL##*:} or dport = :${LOCAL##*:} )" 2>&1) || {
    kill -CONT "$RANK0"; stop_run; echo "SKIP: ss -K failed: $out"; exit 77; }
if ! grep -q "127.0.0.1" <<<"$out"; then
    kill -CONT "$RANK0"
    stop_run
    echo "SKIP: this kernel cannot destroy sockets (ss -K: $(tail -n 1 <<<"$out"))"
    exit 77
fi
echo "broke engine $ENG's samples connection $LOCAL with rank 0 ($RANK0) stopped"
sleep "$stop_s"
# the connection made again has not completed (rank 0 cannot answer), and both of C's engines
# still run: the lane's peer at its barriers too, not only the broken engine resending at
# its end (where a send may wait, and the old engine would have passed)
[ "$(engine_pids C | grep -c .)" -ge 2 ] || { kill -CONT "$RANK0"; fail "C's engines ended while rank 0 was stopped: nothing was tested (give C more iterations)"; }
kill -CONT "$RANK0"
it_wait
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
expect_arm_whole 1 2 "arm C did not stand whole after a connection was made again past its peer's barrier bound"
python3 - "$RECORD" <<'PY' || fail "no sample came again, or an arm did not run (above)"
import json, sys
r = json.load(open(sys.argv[1]))
assert all(a["ran"] for a in r["arms"]), [(a["name"], a["ran"]) for a in r["arms"]]
assert r["wire"]["repeated"] > 0, ("no sample came again: nothing was left to send again", r["wire"])
print("samples that came again: %d; verdict %s" % (r["wire"]["repeated"], r["verdict"]))
PY
grep -Eq "^wire: +came again \(sent again after a connection to rank 0 broke or was not ready\), each taken once: [0-9]+ samples" "$OUT" ||
    fail "the report does not say that samples came again: $(grep '^wire:' "$OUT")"
expect_rescore
grep -q "arm [A-Z]'* failed" "$OUT" || expect_verdict_from_record
expect_no_leftovers
expect_no_private_dirs
echo "PASS: a connection to rank 0 made again past the lane's barrier bound -> the engine did not wait for it; C stands whole"
