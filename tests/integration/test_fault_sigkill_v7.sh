#!/usr/bin/env bash
# SIGKILL to rank 0 during an audit arm of a v7 run whose B/C decided (B' not run): the
# unfinished record left passes over the B' that B/C made unnecessary. The candidate is four
# times as slow (test_v7.sh), so B' never runs; rank 0 is killed as soon as the record it
# wrote before arm A (or, if A was too quick to see, T) is there, so the record left is the
# one written before that arm (or, should rank 0 have got further, the next one: T's). `bracket score` and docs/rescore.py recompute it identical; nothing is
# left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
# 3000 iterations: C (about 4 x 28 us x 2 shapes x iters) runs for most of a second, long
# enough for wait_engines' 0.1 s polls to see it; with the plan's 300 the whole run took
# 1.6 s on an idle machine and C ended between two polls
it_start sigkill-v7 4 "$IT_PLAN" --set protocol.version=v7 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":3}' --set workload.iters=3000
wait_engines C 2
find_rank0
ARM=
for i in $(seq 6000); do # 10 ms polls, at most 60 s: the record rank 0 wrote before A or T
    ARM=$(sed -n 's/.*"stopped": "unfinished: written before arm \([AT]\);.*/\1/p' \
        "$OUTDIR"/*/record.json 2>/dev/null | head -n 1)
    [ -z "$ARM" ] || break
    kill -0 "$RANK0" 2>/dev/null || break
    sleep 0.01
done
[ -n "$ARM" ] || { it_wait; fail "no unfinished record before arm A or T seen before the run ended"; }
kill -KILL "$RANK0"
it_wait
[ "$RC" != 0 ] || fail "a run whose rank 0 was killed exited 0"
[ -n "$RECORD" ] || fail "no record left: the unfinished record before arm $ARM is missing"
python3 - "$RECORD" "$ARM" <<'PY' || fail "the record left is not the unfinished one before arm $ARM"
import json, re, sys
r, seen = json.load(open(sys.argv[1])), sys.argv[2]
print("record left: unfinished %s, stopped %r" % (r.get("unfinished"), r["stopped"]))
assert r["unfinished"] is True, r.get("unfinished")
m = re.fullmatch(r"unfinished: written before arm ([AT]); the run did not replace it", r["stopped"])
assert m, r["stopped"]
arm = m.group(1)
# the one seen, or T's when rank 0 wrote it between the poll and the kill (a loaded machine)
assert arm == seen or (seen, arm) == ("A", "T"), (seen, arm)
assert r["verdict"] == "NO_DECISION", r["verdict"]
ran = [a["ran"] for a in r["arms"]]
assert ran == ([True, True, False, False, False] if arm == "A" else [True, True, False, True, False]), ran
assert all(a["ok"] for a in r["arms"] if a["ran"]), r["arms"]
PY
set +e
"$BK_BRACKET" score --quiet "$RECORD" >"$IT_TMP/score.log" 2>&1
SRC=$?
set -e
cat "$IT_TMP/score.log"
[ "$SRC" = 4 ] && grep -q "identical to the record" "$IT_TMP/score.log" ||
    fail "bracket score exited $SRC on the record left, expected 4 and identical"
python3 "$BK_SOURCE_DIR/docs/rescore.py" "$RECORD" ||
    fail "docs/rescore.py differs from the record left"
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs
echo "PASS: SIGKILL to rank 0 during arm $ARM of a v7 run -> the unfinished record, B' passed over"
