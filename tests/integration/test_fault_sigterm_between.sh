#!/usr/bin/env bash
# SIGTERM to rank 0 between two rounds of arm C (protocol.repeats 3). Round 1's engines had all
# ended well with every sample before the signal, so round 1 stands whole; round 2 is never
# started (no engine of it spawned), and C's reason is "terminated by SIGTERM before round 2
# of 3"; verdict NO_DECISION; `bracket score` recomputes it; nothing is left behind.
#
# The signal is put between the rounds by stopping rank 0 (SIGSTOP) while round 1 times, once
# round 1's engines have met (their segments unlinked: past the rendezvous, the last thing
# they need rank 0 for), waiting for those engines to end, then sending SIGTERM and SIGCONT:
# rank 0 wakes with the signal pending and round 1's samples, statuses and reports queued.
. "$(dirname "$0")/fault_lib.sh"
set -e

# a candidate 11x slower keeps round 1 of C timing for several seconds, longer than the
# steps below need; arm_s 300 keeps it from timing out on a loaded box
it_start term-between 4 "$IT_PLAN" --set protocol.repeats=3 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=6000 \
    --set timeouts.arm_s=300
wait_engines C 2
EP=$(echo $EPIDS)
wait_met $EP
find_rank0
kill -STOP "$RANK0"
for i in $(seq 1200); do [ -z "$(engine_pids C)" ] && break; sleep 0.1; done
if [ -n "$(engine_pids C)" ]; then
    kill -CONT "$RANK0"
    fail "round 1's engines did not end within 120 s with rank 0 stopped"
fi
[ -z "$(engine_pids 'C#2')" ] || { kill -CONT "$RANK0"; fail "round 2 started with rank 0 stopped"; }
kill -TERM "$RANK0"
kill -CONT "$RANK0"
it_wait_terminated
python3 - "$RECORD" <<'PY' || fail "the partial record does not show round 1 whole and round 2 never started"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["reasons"].startswith("terminated by SIGTERM"), r["reasons"]
assert r["stopped"] == "terminated by SIGTERM during arm C; later arms not run", r["stopped"]
b, c = r["arms"][0], r["arms"][1]
assert b["ran"] and b["ok"] and b["rounds"] == 3, b
assert c["ran"] and not c["ok"] and c["rounds"] == 3 and len(c["processes"]) == 6, c
assert c["reason"] == "terminated by SIGTERM before round 2 of 3", c["reason"]
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
for p in c["processes"][:2]:   # round 1: whole, its status in
    assert p["round"] == 1 and p["exit_code"] == 0 and p["status_ok"], p
    assert p["samples_received"] == want, (p["samples_received"], want)
for p in c["processes"][2:]:   # rounds 2 and 3: never started
    assert p["round"] in (2, 3) and not p["reported"] and p["pid"] == 0, p
assert [a["ran"] for a in r["arms"][2:]] == [False] * 3, [a["ran"] for a in r["arms"]]
PY
expect_terminated_clean
echo "PASS: SIGTERM between rounds 1 and 2 of C -> round 1 whole, round 2 never started"
