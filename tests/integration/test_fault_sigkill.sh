#!/usr/bin/env bash
# SIGKILL to rank 0 while arm C runs (what the OOM killer or a lost node does): no handler
# runs and rank 0 writes no final record, but the unfinished record it wrote before arm C
# is there: `unfinished` true, `stopped` naming arm C, arm B complete with its samples, C
# and later arms not run, NO_DECISION. `bracket score` and docs/rescore.py recompute it
# identical (score exits 4 and says it is unfinished); changed copies are refused by the
# field; no rank, engine, segment or private folder is left behind.
. "$(dirname "$0")/fault_lib.sh"
set -e
it_start sigkill 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=3000
wait_engines C 2
find_rank0
kill -KILL "$RANK0"
it_wait
[ "$RC" != 0 ] || fail "a run whose rank 0 was killed exited 0"
[ -n "$RECORD" ] || fail "no record left: the unfinished record before arm C is missing"
python3 - "$RECORD" <<'PY' || fail "the record left is not the unfinished one before arm C"
import json, os, sys
r = json.load(open(sys.argv[1]))
assert r["unfinished"] is True, r.get("unfinished")
assert r["stopped"] == "unfinished: written before arm C; the run did not replace it", r["stopped"]
assert r["verdict"] == "NO_DECISION" and r["status"] == "no_decision", (r["verdict"], r["status"])
assert r["reasons"].startswith("unfinished: the run ended during or before arm C without "
                               "writing its final record; "), r["reasons"]
b = r["arms"][0]
assert b["ran"] and b["ok"], b
assert all(p["samples_received"] == 3000 * 2 for p in b["processes"]), b["processes"]
assert [a["ran"] for a in r["arms"][1:]] == [False] * 4, [a["ran"] for a in r["arms"]]
# B's samples are in samples.msgpack: one block per lane rank and shape, 3000 samples each
raw = open(os.path.join(os.path.dirname(sys.argv[1]), "samples.msgpack"), "rb").read()
assert raw.count(b"\xa3arm\xa1B") == 2 * 2 and b"\xa3arm\xa1C" not in raw, "samples.msgpack"
PY
set +e
"$BK_BRACKET" score "$RECORD" >"$IT_TMP/score.log" 2>&1
SRC=$?
set -e
cat "$IT_TMP/score.log"
[ "$SRC" = 4 ] || fail "bracket score exited $SRC on the unfinished record, expected 4"
grep -q "identical to the record" "$IT_TMP/score.log" || fail "bracket score differs from the record"
grep -q "^note: .*unfinished: the run wrote this record before arm C" "$IT_TMP/score.log" ||
    fail "bracket score does not say the record is unfinished"
python3 "$BK_SOURCE_DIR/docs/rescore.py" "$RECORD" >"$IT_TMP/rescore.log" 2>&1 ||
    { cat "$IT_TMP/rescore.log"; fail "docs/rescore.py differs from the unfinished record"; }
cat "$IT_TMP/rescore.log"
grep -q ": identical: NO_DECISION (no_decision)" "$IT_TMP/rescore.log" ||
    fail "docs/rescore.py does not recompute NO_DECISION"
expect_no_ranks
expect_no_leftovers
expect_no_private_dirs

# changed copies of the unfinished record: refused, the field named
RUN=$(dirname "$RECORD")
tamper() { # NAME PY CODE PATTERN [RCODE RPATTERN]: bracket score on a copy changed by PY
    # exits CODE with a message matching PATTERN; docs/rescore.py (when given) RCODE, RPATTERN
    local d=$IT_TMP/case-$1 src
    rm -rf "$d"
    cp -r "$RUN" "$d"
    python3 - "$d/record.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(r, open(sys.argv[1], "w"), indent=2)
PY
    set +e
    "$BK_BRACKET" score --quiet "$d/record.json" >"$d/score.log" 2>&1
    src=$?
    set -e
    echo "---- $1: exit $src"
    cat "$d/score.log"
    [ "$src" = "$3" ] || fail "$1: bracket score exited $src, expected $3"
    grep -Eq -- "$4" "$d/score.log" || fail "$1: no message matching '$4'"
    ! grep -q "identical to the record" "$d/score.log" || fail "$1: called identical"
    [ $# -ge 6 ] || return 0
    set +e
    python3 "$BK_SOURCE_DIR/docs/rescore.py" "$d" >"$d/rescore.log" 2>&1
    src=$?
    set -e
    cat "$d/rescore.log"
    [ "$src" = "$5" ] || fail "$1: rescore.py exited $src, expected $5"
    grep -Eq -- "$6" "$d/rescore.log" || fail "$1: rescore.py: no message matching '$6'"
}
tamper named-ran 'r["stopped"] = "unfinished: written before arm B; the run did not replace it"' \
    1 "unfinished: the record says true, but arm B, before which stopped says it was written, ran" \
    1 ": unfinished: record true, recomputed false \(arm B, before which stopped says it was written, ran\)"
tamper other-arm 'r["stopped"] = "unfinished: written before arm T; the run did not replace it"' \
    1 "stopped: the record says 'unfinished: written before arm T; .*', its arms give 'unfinished: written before arm C; .*arm C is the first not run" \
    1 ": stopped: record \"unfinished: written before arm T; .*\", recomputed \"unfinished: written before arm C; "
tamper not-boolean 'r["unfinished"] = "true"' 2 "record.json: unfinished: must be true or false" \
    2 "cannot rescore: unfinished: must be true or false"
tamper final 'r["unfinished"] = False' 1 "stopped: the record says 'unfinished: written before arm C; .*', its arms give" \
    1 ": unfinished: record false, recomputed true \(stopped says the record was written before arm C\)"
tamper reasons 'r["reasons"] = r["reasons"].replace("during or before arm C", "during or before arm B", 1)' \
    1 "reasons: the record says" 1 ": reasons: record "
echo "PASS: SIGKILL to rank 0 -> the unfinished record before arm C, rescored, nothing left behind"
