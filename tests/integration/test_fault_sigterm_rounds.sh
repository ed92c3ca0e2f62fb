#!/usr/bin/env bash
# SIGTERM while round 2 of 3 of arm C runs (protocol.repeats): the partial record keeps B's
# three rounds, C's first round whole, its second marked terminated and its third never
# started; verdict NO_DECISION; `bracket score` recomputes it; nothing is left behind (no
# engine, no rank, no shared-memory segment of any round). C's lane rank 1 alone is slowed,
# so round 1 ends well with a straggler note: the reason still starts with round 2's
# termination (after the note, it was read as a failure: "arm C failed; later arms not run").
. "$(dirname "$0")/fault_lib.sh"
set -e
# a candidate 11x slower keeps each round of C running for about 3 s (mpirun relays a SIGTERM
# after ~1 s). On a loaded box a round can take a minute: arm_s 300 keeps round 1 from
# timing out (the SIGTERM, not the time-out, ends this run)
it_start sigterm-rounds 4 "$IT_PLAN" --set protocol.repeats=3 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10,"rank":1}' --set workload.iters=3000 \
    --set timeouts.arm_s=300
wait_engines 'C#2' 2
term_mpirun
python3 - "$RECORD" <<'PY' || fail "the partial record does not show the rounds as they ran"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["reasons"].startswith("terminated"), r["reasons"]
b, c = r["arms"][0], r["arms"][1]
assert b["ran"] and b["ok"] and b["rounds"] == 3, b
assert all(p["exit_code"] == 0 and p["status_ok"] for p in b["processes"]), b["processes"]
assert c["ran"] and not c["ok"] and c["rounds"] == 3 and len(c["processes"]) == 6, c
assert c["reason"].startswith("round 2 of 3: terminated by SIGTERM during arm C#2"), c["reason"]
assert "; round 1 of 3: straggler: lane rank 1 " in c["reason"], c["reason"]
assert r["stopped"] == "terminated by SIGTERM during arm C; later arms not run", r["stopped"]
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
for p in c["processes"][:2]:   # round 1: whole
    assert p["round"] == 1 and p["exit_code"] == 0 and p["samples_received"] == want, p
for p in c["processes"][2:4]:  # round 2: stopped by the signal
    assert p["round"] == 2 and p["reported"] and p["samples_received"] < want, p
for p in c["processes"][4:]:   # round 3: never started
    assert p["round"] == 3 and not p["reported"] and p["pid"] == 0, p
assert not r["arms"][2]["ran"], "B' ran after the termination"
PY
grep -q "C   slowed  *FAILED  3 rounds, round 2 r2:" "$OUT" ||
    fail "the report does not show the round that was stopped"
expect_terminated_clean
echo "PASS: SIGTERM in round 2 of 3 -> partial record with every round as it ran, nothing left behind"
