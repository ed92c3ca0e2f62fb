#!/usr/bin/env bash
# protocol.repeats: every timed arm runs in that many rounds, each in fresh engine processes
# (the audits once); the record keeps every round's processes and samples, the score is the
# mean over rounds of each shape's median, `bracket score` reproduces it bit for bit, and a
# record whose rounds do not match its processes is refused naming the arm. A v7 bracket with
# repeats runs B and C in rounds and leaves B' out when they decide.
. "$(dirname "$0")/lib.sh"
set -e
# the plan check says how many rounds; a count out of range is refused naming the field
"$BK_BRACKET" plan check "$IT_PLAN" --set protocol.repeats=3 | grep -q ", 3 rounds of each timed arm," ||
    fail "plan check does not show the rounds"
"$BK_BRACKET" plan check "$IT_PLAN" --set protocol.repeats=1 | grep -q ", 1 round of each timed arm," ||
    fail "plan check does not show one round (its help says the line always does)"
set +e
bad=$("$BK_BRACKET" plan check "$IT_PLAN" --set protocol.repeats=17 2>&1)
brc=$?
set -e
[ "$brc" = 2 ] && grep -q "protocol.repeats: must be an integer <= 16, got 17" <<<"$bad" ||
    fail "repeats 17: exit $brc, \"$bad\""
it_run repeats 4 "$IT_PLAN" --set protocol.repeats=3
expect_verdict_from_record
grep -q "n 1800 .* 3 rounds, round 3 r0:exit 0" "$OUT" || fail "the report does not show the rounds"
python3 - "$RECORD" <<'PY' || fail "record contents"
import json, os, sys
import collections
r = json.load(open(sys.argv[1]))
assert r["plan"]["protocol"]["repeats"] == 3
iters = r["plan"]["workload"]["iters"]
pids = set()
for a in r["arms"]:
    assert a["ran"] and a["ok"], a
    want = 1 if a["audit"] else 3
    assert a["rounds"] == want, (a["rounds"], want)
    procs = a["processes"]
    assert len(procs) == want * 2, len(procs)
    assert [(p["round"], p["lane_rank"]) for p in procs] == \
        [(k, q) for k in range(1, want + 1) for q in range(2)], procs
    for p in procs:
        assert p["exit_code"] == 0 and p["status_ok"], p
        assert p["pid"] not in pids, "a round reused a process"  # fresh processes each round
        pids.add(p["pid"])
        if not a["audit"]:
            assert p["samples_received"] == p["samples_sent"] == iters * 2, p
        # the timings of every round's processes, rank 0's own engine and the agents' alike:
        # from spawn to exit (the agent's clock), to the first timed iteration (the engine's
        # status; 0 for audits, which time nothing), to the first samples (rank 0's clock)
        assert p["spawn_to_exit_s"] > 0, p
        if a["audit"]:
            assert p["engine_start_to_first_iter_s"] == 0 == p["arm_start_to_first_sample_s"], p
        else:
            assert 0 < p["engine_start_to_first_iter_s"] < p["spawn_to_exit_s"], p
            assert p["arm_start_to_first_sample_s"] > 0, p
    if not a["audit"]:
        assert a["summary"]["n"] == [3 * iters] * 2, a["summary"]
PY
# every round's samples, read from samples.msgpack's bytes (no msgpack module needed): each
# block is a map of 5 whose keys come in the writer's order (runner/record.c), its samples an
# array of 300 (array 16: 0xdc 0x01 0x2c)
python3 - "$RECORD" <<'PY' || fail "samples.msgpack rounds"
import os, re, sys
raw = open(os.path.join(os.path.dirname(sys.argv[1]), "samples.msgpack"), "rb").read()
block = re.compile(rb"\x85\xa3arm(\xa1B|\xa1C|\xa2B')\xa5round([\x01-\x7f])\xa4rank([\x00-\x7f])"
                   rb"\xa5shape([\x00-\x7f])\xa2ns\xdc(..)", re.S)
n = {}
for m in block.finditer(raw):
    key = (m.group(1)[1:].decode(), m.group(2)[0])
    n.setdefault(key, []).append((m.group(3)[0], m.group(4)[0], int.from_bytes(m.group(5), "big")))
assert sorted(n) == sorted((a, k) for a in ("B", "C", "B'") for k in (1, 2, 3)), sorted(n)
for key, blocks in n.items():  # 2 ranks x 2 shapes, 300 iterations each, once
    assert sorted(blocks) == [(q, s, 300) for q in range(2) for s in range(2)], (key, blocks)
PY
expect_rescore
expect_no_leftovers

# a record that says 2 rounds but keeps 3 rounds of processes is refused, naming the arm
cp "$RECORD" "$IT_TMP/record-bad.json"
python3 - "$IT_TMP/record-bad.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["arms"][2]["rounds"] = 2
json.dump(r, open(sys.argv[1], "w"))
PY
cp "$(dirname "$RECORD")/samples.msgpack" "$IT_TMP/samples.msgpack"
set +e
"$BK_BRACKET" score "$IT_TMP/record-bad.json" >"$IT_TMP/bad.log" 2>&1
brc=$?
set -e
cat "$IT_TMP/bad.log"
[ "$brc" != 0 ] || fail "bracket score took a record whose rounds do not match its processes"
grep -q "arms\[2\] (B'): rounds 1..16" "$IT_TMP/bad.log" || fail "the refusal does not name the arm"

# every round's processes are judged, not only the first: round 3 of C exited 139 while the
# record still says the arm ended well
cp "$RECORD" "$IT_TMP/record-round.json"
python3 - "$IT_TMP/record-round.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["arms"][1]["processes"]) == 6  # 3 rounds x 2 lane ranks
r["arms"][1]["processes"][4]["exit_code"] = 139  # round 3, lane rank 0
json.dump(r, open(sys.argv[1], "w"))
PY
set +e
"$BK_BRACKET" score "$IT_TMP/record-round.json" >"$IT_TMP/round.log" 2>&1
brc=$?
set -e
cat "$IT_TMP/round.log"
[ "$brc" = 1 ] || fail "bracket score took a record whose third round failed (exit $brc)"
grep -q "arms\[1\].ok: the record says true, its processes say false .*exit 139" "$IT_TMP/round.log" ||
    fail "the refusal does not name the failed round's arm"

# v7 with repeats: B/C decide a four times slower candidate, B' is not run
it_run v7rep 4 "$IT_PLAN" --set protocol.version=v7 --set protocol.repeats=2 \
    --set candidate.variant=slowed --set 'candidate.params={"base":"shm_twopass","fraction":3}'
expect_verdict FAIL 3
python3 - "$RECORD" <<'PY' || fail "v7 with repeats"
import json, sys
r = json.load(open(sys.argv[1]))
assert [a["ran"] for a in r["arms"]] == [True, True, False, True, True], [a["ran"] for a in r["arms"]]
assert [a.get("rounds") for a in r["arms"] if a["ran"]] == [2, 2, 1, 1]
PY
expect_rescore
expect_no_leftovers
echo "PASS: repeats run every timed arm in rounds of fresh processes, kept and re-scored"
