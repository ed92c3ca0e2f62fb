#!/usr/bin/env bash
# Garbage bytes at the coordinator's tcp endpoints while the arms run (a port scanner, a
# stranger speaking another protocol): ignored and counted, every sample still arrives, the
# run ends with the verdict its samples give (a 3x slower candidate: FAIL on a quiet machine;
# under outside CPU load B' once ran 16x slower than B and the verdict was NO_DECISION, so
# the verdict is checked against the record's own numbers; test_slowed.sh keeps the fixed FAIL).
# `bracket score` on its record says the same of the rejected messages.
. "$(dirname "$0")/fault_lib.sh"
set -e
# a free pair of ports on loopback (below the ephemeral range)
PORT=$(free_port_pair)
[ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"

# 3000 iterations keep C (4x slower) and B' running for over a second after C starts: the
# garbage below must all arrive while the coordinator listens (with 300, C's 0.1 s ended
# first and fewer than 40 were counted)
it_start garbage 4 "$IT_PLAN" --iface lo --port "$PORT" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":3}' --set workload.iters=3000
wait_engines C 2
# 20 connections per port, each sending bytes that are not ZMTP; every loop is bounded
python3 - "$PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])
for q in (port, port + 1):
    for i in range(20):
        s = socket.create_connection(("127.0.0.1", q), timeout=5)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" if i % 2 else bytes(range(256)) * 4)
        s.settimeout(2)
        try:
            s.recv(64)  # the server answers its greeting, then drops us
        except OSError:
            pass
        s.close()
PY
kill -0 "$PID" 2>/dev/null || fail "the run ended before all the garbage was sent: lengthen it"
it_wait
expect_verdict_from_record
python3 - "$RECORD" <<'PY' || fail "garbage not ignored and counted"
import json, sys
r = json.load(open(sys.argv[1]))
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
for a in r["arms"]:
    assert a["ran"] and a["ok"], a
    if not a["audit"]:
        for p in a["processes"]:
            assert p["samples_received"] == p["samples_sent"] == want, p
rej = r["wire"]["rejected"]
assert rej["malformed"] == 40, rej  # 20 connections x 2 ports
print("rejected:", rej)
PY
grep -q "rejected" "$OUT" || fail "the report does not mention rejected messages"
expect_rescore # its report says the same of them

expect_no_leftovers
echo "PASS: garbage at the endpoint ignored and counted, every sample in, FAIL as measured"
