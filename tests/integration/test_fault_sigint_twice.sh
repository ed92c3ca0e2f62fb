#!/usr/bin/env bash
# Two SIGINTs to mpirun in quick succession while arm C runs (a double Ctrl-C at a
# terminal). Open MPI's mpirun (4.1) answers the first with SIGCONT to the ranks and relays
# SIGTERM only about 1 s later; the second, 50 ms after the first, makes it exit at once,
# and every rank's runtime then ends the process itself (exit_group, lost contact with
# mpirun): no rank sees a signal, so rank 0 writes no partial record. What is left is the
# unfinished record rank 0 wrote before arm C (never the orderly terminated one): B
# complete with its samples, C and later arms not run, NO_DECISION; `bracket score` and
# docs/rescore.py recompute it identical; the janitors remove the ranks' private folders;
# no rank, engine, segment or private folder is left behind, nor Open MPI's own
# shared-memory segments (which Open MPI leaves when mpirun ends at once).
. "$(dirname "$0")/fault_lib.sh"
set -e
SEGS_BEFORE=$(mpi_segments)
it_start sigint-twice 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":10}' --set workload.iters=3000
wait_engines C 2
MPIRUN=$(pgrep -P "$PID" -x mpirun || true)
[ -n "$MPIRUN" ] || fail "no mpirun under $PID"
kill -INT "$MPIRUN"
sleep 0.05
kill -INT "$MPIRUN" 2>/dev/null || true
it_wait
[ "$RC" != 0 ] || fail "a run interrupted twice exited 0"
[ -n "$RECORD" ] || fail "no record left after a double Ctrl-C"
python3 - "$RECORD" <<'PY' || fail "the record left is not the unfinished one before arm C"
import json, sys
r = json.load(open(sys.argv[1]))
print("record left: unfinished %s, stopped %r" % (r.get("unfinished"), r["stopped"]))
assert r["unfinished"] is True, r.get("unfinished")
assert r["stopped"] == "unfinished: written before arm C; the run did not replace it", r["stopped"]
assert r["verdict"] == "NO_DECISION", r["verdict"]
assert r["arms"][0]["ran"] and r["arms"][0]["ok"], r["arms"][0]
assert [a["ran"] for a in r["arms"][1:]] == [False] * 4, [a["ran"] for a in r["arms"]]
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
expect_no_new_mpi_segments "$SEGS_BEFORE"
echo "PASS: a double Ctrl-C to mpirun -> the unfinished record before arm C, nothing left behind"
