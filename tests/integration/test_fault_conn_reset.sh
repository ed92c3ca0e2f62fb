#!/usr/bin/env bash
# The engines' tcp connections to the coordinator broken again and again while arm C runs
# (`ss -K` destroys them, both ends, as a reset on a flaky link would; ZeroMQ connects
# again). What was in flight on a broken connection is lost, so an engine that saw its
# connection break sends all its samples again before its status, and rank 0 takes each
# once (counted in the record's wire.repeated).
# 1. Breaks until C's engines are gone, some 100 of them: no sample is lost silently. Each
#    arm has every sample of every rank, or fails naming the rank and the count ("samples
#    missing: got G, sent S") or the status it lacks, and then the run is NO_DECISION; the
#    run ends by itself with the verdict its record gives, leaving nothing behind. Here C
#    lost samples in each of 8 runs before engines sent them again (whole messages of 256);
#    with samples sent again before the status only, C failed in 2 of 10 (one for its
#    lost status); sent again after the status too (it may have been in flight), and rank
#    0 waiting for them past the engines' ends, C was whole in 9 of 9.
# 2. Breaks during C's first second only (C lasts about 3 s): C has every sample, some of
#    them came again, and the run decides as its samples give (without the resending, C
#    lost samples in 1 of 6 runs, and none came again in any).
# 3. Breaks of the samples connections during the audit A's first second (A sends 16 MiB
#    output tensors a shape and rank, 2 s in all): A has every tensor, some of them came
#    again (the record's wire.repeated_tensors), and the run decides as its record gives.
# 4. Breaks of the rendezvous connections through a whole run of 4 rounds an arm (14
#    rendezvous): an engine whose connection broke says hello again, and rank 0 answers it
#    on the new connection (wire.repeated_hellos); every arm stands. Before, a hello or an
#    answer lost on a broken connection left its lane waiting out rendezvous_s, and the arm
#    failed (B in 4 of 4 runs).
# Needs root and a kernel with socket destroy (ss -K); skipped, saying which, otherwise.
. "$(dirname "$0")/fault_lib.sh"
set -e
[ "$(id -u)" = 0 ] || { echo "SKIP: ss -K needs root"; exit 77; }
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2)"; exit 77; }

# start NAME: a run over tcp on loopback whose C (a 4x slower candidate, 8000 iterations a
# shape) lasts about 3 s; returns once C's engines run
start() {
    PORT=$(free_port_pair)
    [ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"
    it_start "$1" 4 "$IT_PLAN" --iface lo --port "$PORT" --set candidate.variant=slowed \
        --set 'candidate.params={"base":"shm_twopass","fraction":3}' --set workload.iters=8000
    wait_engines C 2
}
# churn N [ARM [samples]]: break every connection to both endpoints (rendezvous, samples;
# with `samples`, that one only), both ends, as often as ss can (some 30 times a second
# here) while ARM (default C) runs, N times at most; KILLED counts the connections broken
churn() {
    local i out arm=${2:-C} filter
    filter="dport = :$PORT or dport = :$((PORT + 1)) or sport = :$PORT or sport = :$((PORT + 1))"
    [ "${3:-}" = samples ] && filter="dport = :$((PORT + 1)) or sport = :$((PORT + 1))"
    KILLED=0
    for i in $(seq "$1"); do
        [ -n "$(engine_pids "$arm")" ] || break
        out=$(ss -K -t -n state established "( $filter )" 2>&1) ||
            { stop_run; echo "SKIP: ss -K failed: $out"; exit 77; }
        if grep -q "Operation not supported\|Invalid argument" <<<"$out" &&
            ! grep -q "127.0.0.1" <<<"$out"; then
            stop_run
            echo "SKIP: this kernel cannot destroy sockets (ss -K: $(tail -n 1 <<<"$out"))"
            exit 77
        fi
        KILLED=$((KILLED + $(tail -n +2 <<<"$out" | grep -c "127.0.0.1" || true)))
        sleep 0.01
    done
    echo "connections broken while $arm ran: $KILLED"
    [ "$KILLED" -ge 2 ] || fail "no engine connection was broken while $arm ran: nothing was tested"
}
# expect_came_again KEY WHAT: the report says how many WHATs came again, as the record's
# wire.KEY counts them
expect_came_again() {
    local n
    n=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["wire"][sys.argv[2]])' "$RECORD" "$1")
    grep -Eq "^wire: +came again \(sent again after a connection to rank 0 broke or was not ready\), each taken once:.* $n $2s?(,|\$)" "$OUT" ||
        fail "the report does not say that $n ${2}s came again: $(grep '^wire:' "$OUT")"
}
# check WHOLE: the record against the rules above; WHOLE=1: C must have every sample
check() {
    python3 - "$RECORD" "$RC" "$1" <<'PY' || fail "samples lost without the arm failing, or not sent again (above)"
import json, re, sys
r = json.load(open(sys.argv[1]))
rc, whole = int(sys.argv[2]), sys.argv[3] == "1"
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
failed = []
for a in r["arms"]:
    if not a["ran"] or a["audit"]:
        continue
    short = [p for p in a["processes"] if p["samples_received"] != want or p["samples_sent"] != want]
    if a["ok"]:
        assert not short, ("an arm with samples lost counted as whole", a["name"], short)
    else:
        failed.append(a["name"])
        m = re.search(r"samples missing: got (\d+), sent (\d+), expected (\d+)", a["reason"])
        if m:  # else its status was lost ("no final status received")
            got, sent = int(m.group(1)), int(m.group(2))
            assert any(p["samples_received"] == got and p["samples_sent"] == sent for p in short), (m.group(0), short)
            assert got < sent == want, m.group(0)
        else:  # its status was lost: loud, the arm fails, naming it. (A rank's send of its
            # work no longer waits for a connection made again, so its peers do not give up
            # at a barrier for it: test_fault_handshake.)
            assert "no final status received" in a["reason"], a["reason"]
assert not (whole and failed), ("arms failed though breaks stopped early", failed, r["reasons"])
if failed:
    assert r["verdict"] == "NO_DECISION" and rc == 4, (r["verdict"], rc, failed)
    reasons = r["reasons"] if isinstance(r["reasons"], str) else "; ".join(r["reasons"])
    assert all("arm %s failed: " % n in reasons for n in failed), reasons
assert r["wire"]["repeated"] > 0, ("no sample came again: no engine sent its samples again", r["wire"])
print("arms failed: %s; samples that came again: %d; verdict %s" % (failed or "none", r["wire"]["repeated"], r["verdict"]))
PY
    expect_came_again repeated sample
    expect_rescore # the same verdict, and the same came-again line
    # a run whose arms all stand decides as its samples give
    grep -q "arm [A-Z]'* failed" "$OUT" || expect_verdict_from_record
    expect_no_leftovers
    expect_no_private_dirs
}

# 1. breaks until C ends
start churn
churn 600
it_wait
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
check 0

# 2. breaks during C's first second
start early
churn 30
it_wait
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
check 1
# 3. breaks during the audit A's first second
PORT=$(free_port_pair)
[ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"
it_start audit 4 "$IT_PLAN" --iface lo --port "$PORT" --set workload.iters=8 \
    --set 'workload.shapes=[{"tokens":512,"hidden":16384,"weight":1},{"tokens":504,"hidden":16384,"weight":1},{"tokens":496,"hidden":16384,"weight":1},{"tokens":488,"hidden":16384,"weight":1}]'
wait_engines A 2
churn 30 A samples
it_wait
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
python3 - "$RECORD" <<'PY' || fail "the audit lost tensors, or none came again (above)"
import json, sys
r = json.load(open(sys.argv[1]))
a = {x["name"]: x for x in r["arms"]}["A"]
assert a["ran"] and a["ok"], ("audit A failed though breaks stopped early", a["reason"])
assert r["wire"]["repeated_tensors"] > 0, ("no tensor came again", r["wire"])
print("audit tensors that came again: %d; verdict %s" % (r["wire"]["repeated_tensors"], r["verdict"]))
PY
expect_came_again repeated_tensors "audit tensor"
expect_rescore
grep -q "arm [A-Z]'* failed" "$OUT" || expect_verdict_from_record
expect_no_leftovers
expect_no_private_dirs
# 4. breaks of the rendezvous connections through a whole run
PORT=$(free_port_pair)
[ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"
it_start rendezvous 4 "$IT_PLAN" --iface lo --port "$PORT" --set protocol.repeats=4
KILLED=0
for i in $(seq 20000); do # ~0.01 s a turn; the run takes 5-8 s, and its own timeout bounds it
    kill -0 "$PID" 2>/dev/null || break
    out=$(ss -K -t -n state established "( dport = :$PORT or sport = :$PORT )" 2>&1 || true)
    KILLED=$((KILLED + $(tail -n +2 <<<"$out" | grep -c "127.0.0.1" || true)))
    sleep 0.005
done
echo "rendezvous connections broken: $KILLED"
it_wait
[ "$KILLED" -ge 2 ] || fail "no rendezvous connection was broken: nothing was tested"
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
python3 - "$RECORD" <<'PY' || fail "an arm failed, or no hello came again (above)"
import json, sys
r = json.load(open(sys.argv[1]))
failed = [(a["name"], a["reason"]) for a in r["arms"] if not (a["ran"] and a["ok"])]
assert not failed, ("arms failed or not run with the rendezvous broken", failed)
assert r["wire"]["repeated_hellos"] > 0, ("no hello came again", r["wire"])
print("hellos that came again: %d; verdict %s" % (r["wire"]["repeated_hellos"], r["verdict"]))
PY
expect_came_again repeated_hellos hello
expect_rescore
expect_verdict_from_record
expect_no_leftovers
expect_no_private_dirs
echo "PASS: connections broken mid-arm: samples, audit tensors and hellos sent again and taken once; none lost silently"
