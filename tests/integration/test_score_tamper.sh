#!/usr/bin/env bash
# `bracket score` does not certify a record that was changed after the run: one real record
# (cpu backend), then copies of it each changed in one way. The untouched record (and one
# merely re-serialised, integral reals written as integers) scores identical; a record that
# disagrees with its own evidence (quality counts, digests, the topology snapshot, processes'
# exit codes, the recomputed summaries and score) exits 1 naming the field; a damaged samples
# file exits 2 naming the byte or the block.
. "$(dirname "$0")/lib.sh"
set -e
it_run tamper 4 "$IT_PLAN" --set workload.iters=50
[ -n "$RECORD" ] && [ -f "$RECORD" ] || fail "no record written (exit $RC)"
case "$RC" in 0|3|4) ;; *) fail "the run exited $RC" ;; esac
RUN=$(dirname "$RECORD")

# score DIR: runs bracket score on DIR/record.json (with $SCORE_FLAGS too); SRC its exit,
# LOG its output
SCORE_FLAGS=
score() {
    set +e
    # shellcheck disable=SC2086
    "$BK_BRACKET" score --quiet $SCORE_FLAGS "$1/record.json" >"$1/score.log" 2>&1
    SRC=$?
    set -e
    LOG=$1/score.log
}
# copy NAME: a fresh copy of the run folder in $D
copy() {
    D=$IT_TMP/case-$1
    rm -rf "$D"
    cp -r "$RUN" "$D"
}
# edit_record PY: run PY on the copy's record (r: the record, as a dict), write it back; PY
# may call redigest() to make plan_digest that of its edited plan, and fnv1a64(obj) for a
# topology digest (docs/record.md, "The digests")
edit_record() {
    python3 - "$D/record.json" "$1" <<'PY'
import hashlib, json, re, sys
r = json.load(open(sys.argv[1]))
def real(x):  # jansson's %.17g
    s = "%.17g" % x
    if "." not in s and "e" not in s:
        s += ".0"
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", s)
def compact(v):  # json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT)
    if isinstance(v, dict):
        return "{" + ",".join(compact(k) + ":" + compact(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(compact(x) for x in v) + "]"
    if isinstance(v, float):
        return real(v)
    return json.dumps(v, ensure_ascii=False)  # ints, plain strings, true, false, null
def redigest():
    r["plan_digest"] = "sha256:" + hashlib.sha256(compact(r["plan"]).encode()).hexdigest()
def fnv1a64(v, h=0xcbf29ce484222325):
    for c in compact(v).encode():
        h = ((h ^ c) * 0x100000001b3) % 2**64
    return "fnv1a64:%016x" % h
exec(sys.argv[2])
json.dump(r, open(sys.argv[1], "w"), indent=2)
PY
}
# edit_samples PY: run PY on the copy's samples (b: the bytes; B: the byte offset of each
# sample block), write the result `b` back
edit_samples() {
    python3 - "$D/samples.msgpack" "$1" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
B, i = [], b.find(b"\xa3arm")
while i >= 0:
    B.append(i - 1)  # the block's map header comes just before its first key
    i = b.find(b"\xa3arm", i + 1)
exec(sys.argv[2])
open(sys.argv[1], "wb").write(b)
PY
}
# expect NAME CODE PATTERN: the copy scores with exit CODE and a message matching PATTERN
expect() {
    score "$D"
    echo "---- $1: exit $SRC"
    cat "$LOG"
    [ "$SRC" = "$2" ] || fail "$1: bracket score exited $SRC, expected $2"
    grep -Eq -- "$3" "$LOG" || fail "$1: no message matching '$3'"
    if { [ "$2" = 1 ] || [ "$2" = 2 ]; } && grep -q "identical to the record" "$LOG"; then
        fail "$1: a changed record was called identical"
    fi
    # nor does it print a verdict line a script could take for the record's (nor does a
    # record --strict refuses)
    if { [ "$2" = 1 ] || [ "$2" = 2 ]; } && grep -q "^verdict: " "$LOG"; then
        fail "$1: a record that differs or is refused printed a verdict line"
    fi
}

# a complete run's record is a final one: `unfinished` false (docs/record.md)
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['unfinished'] is False" \
    "$RECORD" || fail "a complete run's record is not marked unfinished: false"
want=$(python3 -c "import json,sys; print({'PASS':0,'FAIL':3,'NO_DECISION':4}[json.load(open(sys.argv[1]))['verdict']])" "$RECORD")
copy untouched
expect untouched "$want" "identical to the record"
! grep -q "note:" "$LOG" || fail "untouched: a note on a fresh record"
# --quiet prints what its help says: the verdict line, then the check's outcome
[ "$(wc -l <"$LOG")" = 2 ] && grep -q "^verdict: " "$LOG" || fail "untouched: --quiet printed more"
"$BK_BRACKET" score --help | grep -q -- "--quiet .*the verdict line, then the check's outcome" ||
    fail "score --help does not say what --quiet prints"
# the run's folder names its record (with a trailing slash too)
set +e
"$BK_BRACKET" score --quiet "$D/" >"$IT_TMP/score-dir.log" 2>&1
SRC=$?
set -e
cat "$IT_TMP/score-dir.log"
[ "$SRC" = "$want" ] || fail "bracket score on the run's folder exited $SRC, expected $want"
grep -qF "recomputed from $D/record.json: identical to the record" "$IT_TMP/score-dir.log" ||
    fail "bracket score on the run's folder did not score its record.json"
# without --quiet the report comes with the run's header: its id, plan, lanes (from the
# record; the score printed none before 2026-12-06)
"$BK_BRACKET" score "$D" >"$IT_TMP/score-full.log" 2>&1 || true
rid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$D/record.json")
grep -q "^bracket [0-9.]*  run $rid$" "$IT_TMP/score-full.log" &&
    grep -Eq "^  lanes      baseline \[[0-9,]+\]  candidate \[[0-9,]+\]  ranks " "$IT_TMP/score-full.log" &&
    grep -q "^  routing    the candidate serves 100.0% of the workload's weight$" "$IT_TMP/score-full.log" ||
    fail "bracket score printed no header: $(head -n 12 "$IT_TMP/score-full.log")"
# a folder path longer than a run's folder may be is named, not cut short (the samples were
# then looked for in a parent folder)
LONG=$IT_TMP/$(printf 'l%.0s' $(seq 200))/$(printf 'm%.0s' $(seq 200))/$(printf 'n%.0s' $(seq 200))/$(printf 'o%.0s' $(seq 100))
mkdir -p "$LONG"
cp "$D"/* "$LONG/"
set +e
"$BK_BRACKET" score --quiet "$LONG/record.json" >"$IT_TMP/score-long.log" 2>&1
SRC=$?
set -e
cat "$IT_TMP/score-long.log"
[ "$SRC" = 2 ] && grep -qF "$LONG/record.json: its folder's path is too long (699 bytes at most)" \
    "$IT_TMP/score-long.log" || fail "a record in a folder of ${#LONG} bytes: exit $SRC, not named"
rm -rf "$IT_TMP/$(printf 'l%.0s' $(seq 200))"
copy reserialised
edit_record '
for a in r["arms"][:3]:
    s = a["summary"]
    s["median_ns"] = [int(x) if x == int(x) else x for x in s["median_ns"]]
    s["cost_ns"] = int(s["cost_ns"]) if s["cost_ns"] == int(s["cost_ns"]) else s["cost_ns"]
assert any(type(x) is int for x in r["arms"][0]["summary"]["median_ns"])'
expect reserialised "$want" "identical to the record"

# 1. quality: thousands of mismatches in the evidence, the state and verdict say pass
copy quality
edit_record '
r["quality"]["tensors"][1]["mismatches"] = 4321
r["quality"]["state"] = "pass"; r["quality"]["reason"] = ""; r["verdict"] = "PASS"'
expect quality 1 "quality.state: the record says pass, its evidence gives fail \(A differs from T in 4321 element"
copy quality-nan
edit_record 'r["quality"]["tensors"][0]["nan_a"] = 7'
expect quality-nan 1 "quality.tensors\[0\]: 0 mismatch\(es\) but 7 NaN"
copy quality-reason
edit_record '
r["quality"]["tensors"][0]["mismatches"] = 3
r["quality"]["state"] = "fail"; r["quality"]["reason"] = "A differs from T in 2 element(s); first: x"'
expect quality-reason 1 "quality.reason: the record says 'A differs from T in 2 element\(s\); first: x', its evidence gives 'A differs from T in 3 element"
# element counts no comparison could have made: none, more than the lane's outputs hold, a
# part of a rank's; one rank's share left out is a missing output only with its mismatch
copy quality-none
edit_record 'r["quality"]["tensors"][0]["elements"] = 0'
expect quality-none 1 "quality.tensors\[0\]: 0 element\(s\) compared, but shape 0's out holds [0-9]+ a rank x 2 rank\(s\) = "
copy quality-more
edit_record 'r["quality"]["tensors"][1]["elements"] = 10**15'
expect quality-more 1 "quality.tensors\[1\]: 1000000000000000 element\(s\) compared"
copy quality-part
edit_record 'r["quality"]["tensors"][0]["elements"] -= 1'
expect quality-part 1 "quality.tensors\[0\]: [0-9]+ element\(s\) compared"
copy quality-half
edit_record 't = r["quality"]["tensors"][0]; t["elements"] //= 2'
expect quality-half 1 "quality.tensors\[0\]: [0-9]+ element\(s\) compared"
copy quality-tol
edit_record 'r["quality"]["atol"] = 1.0'
expect quality-tol 1 "quality.rtol / quality.atol: not the plan"

# 2. digests
copy sample-value
edit_samples 'b = b[:-1] + bytes([b[-1] ^ 1])'
expect sample-value 1 "samples.msgpack: its digest is sha256:[0-9a-f]{64}, the record's samples.digest says"
copy source-digest
edit_record 'r["plan"]["candidate"]["source_digest"] = "sha256:" + "0" * 64'
expect source-digest 1 "record.json: plan_digest: the record says 'sha256:[0-9a-f]{64}', its plan hashes to"
copy model
edit_record 'r["plan"]["arena"]["model"] = "Other-Model"'
expect model 1 "plan_digest: the record says"
copy redigested  # the helper's digest is the run's: an edit that changes nothing passes
edit_record 'd = r["plan_digest"]; redigest(); assert r["plan_digest"] == d, (d, r["plan_digest"])'
expect redigested "$want" "identical to the record"
# the plan's protocol.repeats changed and its digest made again: the timed arms ran
# protocol.repeats rounds each (docs/record.md), so they no longer fit the plan
copy repeats
edit_record 'assert r["arms"][0]["rounds"] == 1; r["plan"]["protocol"]["repeats"] = 3; redigest()'
expect repeats 1 "arms\[0\] \(B\)\.rounds: the record says 1, its plan.s protocol\.repeats says 3"
copy plan-digest
edit_record 'r["plan_digest"] = "junk"'
expect plan-digest 1 "plan_digest: the record says 'junk'"
copy samples-file
edit_record 'r["samples"]["file"] = "other.msgpack"'
expect samples-file 1 "samples.file: the record says 'other.msgpack'; a run writes its samples to samples.msgpack"
copy samples-digest
edit_record 'r["samples"]["digest"] = "sha256:junk"'
expect samples-digest 1 "samples.digest says 'sha256:junk'"
copy identity
edit_record 'r["identity"]["candidate_source_digest"] = "sha256:" + "1" * 64'
expect identity 1 "identity.candidate_source_digest: the record says 'sha256:1111"
copy duplicate-key  # jansson kept the last of two: the record said cuda and was read as cpu
python3 - "$D/record.json" <<'PY'
import sys
t = open(sys.argv[1]).read()
i = t.rfind('"backend": "cpu"')  # the record's, after its plan's
assert i > 0
open(sys.argv[1], "w").write(t[:i] + '"backend": "cuda", ' + t[i:])
PY
expect duplicate-key 2 "record.json:[0-9]+:[0-9]+: duplicate object key near '\"backend\"'"
copy binary-digest
edit_record 'r["identity"]["binary_digest"] = "sha256:XYZ"'
expect binary-digest 2 "identity.binary_digest: 'sha256:XYZ' is neither"
copy topology
python3 - "$D/topology.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["hosts"][0]["cores"] += 1
json.dump(t, open(sys.argv[1], "w"), indent=1)
PY
expect topology 1 "identity.topology_digest: the record says 'fnv1a64:[0-9a-f]{16}', .*topology.json hashes to fnv1a64:"
copy topology-digest
edit_record 'r["identity"]["topology_digest"] = "fnv1a64:" + "0" * 16'
expect topology-digest 1 "identity.topology_digest: the record says 'fnv1a64:0000000000000000'"
copy topology-missing  # the run says when it could not write it: scored, with a note
rm "$D/topology.json"
expect topology-missing "$want" "topology.json is missing: identity.topology_digest not checked"

copy topology-old-basis  # a digest made with the offset basis of records before 2026-12-03
edit_record '
t = json.load(open(sys.argv[1].replace("record.json", "topology.json")))
r["identity"]["topology_digest"] = fnv1a64(t, h=1469598103934665603)  # BK_FNV1A64_OLD_BASIS'
expect topology-old-basis "$want" "^note: identity.topology_digest was made with the offset basis of records before 2026-12-03"
# topology.json must be a bracket.topology/1 snapshot, as the run wrote it, whose digest
# matching identity.topology_digest is not enough: another snapshot of the same form, its
# digest made again, is read; JSON that is no snapshot (an empty object, an array, no hosts),
# its digest made to match, is refused naming the loader's reason
copy topology-redigested
edit_record '
f = sys.argv[1].replace("record.json", "topology.json")
t = json.load(open(f)); t["hosts"][0]["notes"].append("bk-it: edited")
json.dump(t, open(f, "w")); r["identity"]["topology_digest"] = fnv1a64(t)'
expect topology-redigested "$want" "identical to the record"
for c in 'object|{}|schema: must be "bracket.topology/1"' 'array|[]|the snapshot must be a JSON object' \
    'nohosts|{"schema": "bracket.topology/1", "hosts": []}|hosts: at least one host is needed'; do
    name=${c%%|*} rest=${c#*|}
    copy "topology-$name"
    printf '%s\n' "${rest%%|*}" >"$D/topology.json"
    edit_record 'r["identity"]["topology_digest"] = fnv1a64(json.load(open(sys.argv[1].replace("record.json", "topology.json"))))'
    expect "topology-$name" 1 "the record differs from its evidence: .*/topology.json: not a bracket.topology/1 snapshot \(the topology loader says: ${rest#*|}\)$"
done

# --strict: an identity the record claims and no check can confirm refuses it (exit 2, each
# named); without --strict the same record scores with its verdict's status
SCORE_FLAGS=--strict
copy strict-untouched
expect strict-untouched "$want" "identical to the record"
copy strict-topology-missing
rm "$D/topology.json"
expect strict-topology-missing 2 "^bracket score: --strict: .*record.json is refused: .*/topology.json is missing: identity.topology_digest cannot be checked$"
copy strict-binary
edit_record 'r["identity"]["binary_digest"] = "unknown"'
expect strict-binary 2 "is refused: identity.binary_digest is \"unknown\": the bracket binary that ran is not identified$"
copy strict-note
edit_record 'r["identity"]["source_digest_note"] = "candidate.source_digest: still the plan\x27s"'
expect strict-note 2 "is refused: identity.source_digest_note is present: identity.candidate_source_digest is not the variant.s that ran \(run it again with --set candidate.source_digest=\.\.\. beside candidate.variant\)$"
copy strict-all  # every gap named, in one line
rm "$D/topology.json"
edit_record '
r["identity"]["binary_digest"] = "unknown"
r["identity"]["source_digest_note"] = "x"'
expect strict-all 2 "topology.json is missing: .*; identity.binary_digest is .*; identity.source_digest_note is present"
# a refusal prints nothing on stdout, report or verdict line, with or without --quiet: the
# refusal alone, on stderr (as a record that differs)
copy strict-silent
edit_record 'r["identity"]["binary_digest"] = "unknown"'
for q in --quiet ""; do
    set +e
    # shellcheck disable=SC2086
    "$BK_BRACKET" score --strict $q "$D/record.json" >"$D/out.log" 2>"$D/err.log"
    SRC=$?
    set -e
    echo "---- strict-silent ${q:-(report)}: exit $SRC"
    cat "$D/out.log" "$D/err.log"
    [ "$SRC" = 2 ] || fail "strict-silent ${q:-(report)}: exit $SRC, expected 2"
    [ ! -s "$D/out.log" ] || fail "strict-silent ${q:-(report)}: a refused record printed on stdout"
    grep -q "^bracket score: --strict: .*record.json is refused: identity.binary_digest" \
        "$D/err.log" || fail "strict-silent ${q:-(report)}: no refusal on stderr"
done
copy strict-topology-object  # under --strict too: a snapshot that is none is a difference
echo '{}' >"$D/topology.json"
edit_record 'r["identity"]["topology_digest"] = fnv1a64({})'
expect strict-topology-object 1 "topology.json: not a bracket.topology/1 snapshot \(the topology loader says: schema: must be"
copy strict-tampered  # a record that differs from its evidence is still exit 1, not 2
rm "$D/topology.json"
edit_record 'r["samples"]["digest"] = "sha256:junk"'
expect strict-tampered 1 "samples.digest says 'sha256:junk'"
SCORE_FLAGS=
copy lax-binary
edit_record 'r["identity"]["binary_digest"] = "unknown"'
expect lax-binary "$want" "identical to the record"
copy lax-note
edit_record 'r["identity"]["source_digest_note"] = "x"'
expect lax-note "$want" "identical to the record"
"$BK_BRACKET" score --help | grep -q -- "--strict  refuse a record identical" ||
    fail "score --help does not describe --strict"
# 3. an arm's ok against its processes
copy exit-code
edit_record 'r["arms"][1]["processes"][0]["exit_code"] = 139'
expect exit-code 1 "arms\[1\].ok: the record says true, its processes say false \(arm C lane rank 0 .*engine failed \(exit 139\)"
copy not-ok
edit_record 'r["arms"][2]["ok"] = False; r["arms"][2]["reason"] = "made up"'
expect not-ok 1 "arms\[2\].ok: the record says false, but its processes ended well"
copy terminated-arm  # a signal claimed for an arm whose engines all ended well
edit_record 'r["arms"][2]["ok"] = False; r["arms"][2]["reason"] = "terminated by SIGTERM during arm B\x27"'
expect terminated-arm 1 "arms\[2\].ok: the record says false, but its processes ended well"

# 4. the run's facts: a verdict cannot be laundered into an interrupted run, a cpu rehearsal
# cannot pass for a GPU bracket, stopped says what the arms show
copy laundered  # a complete run relabelled as terminated (FAIL or PASS -> NO_DECISION)
edit_record '
r["reasons"] = "terminated by SIGTERM; " + r["reasons"]
r["verdict"] = "NO_DECISION" if r["verdict"] != "NO_DECISION" else "PASS"
r["status"] = "no_decision"'
expect laundered 1 "verdict: the record says"
copy laundered-stopped
edit_record 'r["stopped"] = "terminated by SIGTERM"'
expect laundered-stopped 1 "stopped: the record says .terminated by SIGTERM., its arms give ..$"
copy stopped
edit_record 'r["stopped"] = "arm B failed; later arms not run"'
expect stopped 1 "stopped: the record says .arm B failed; later arms not run., its arms give"
# an unfinished record (the provisional one written before an arm) is one where that arm
# and every later one did not run: a complete run cannot be passed off as one, nor the other
# way round; a record without the field (before 2026-12-04) is a final one
copy unfinished-all-ran
edit_record 'r["unfinished"] = True'
expect unfinished-all-ran 1 "unfinished: the record says true, but every arm ran"
copy unfinished-stopped
edit_record 'r["unfinished"] = True; r["stopped"] = "unfinished: written before arm C; the run did not replace it"'
expect unfinished-stopped 1 "unfinished: the record says true, but every arm ran"
copy unfinished-later
edit_record '
r["unfinished"] = True; r["stopped"] = "unfinished: written before arm A; the run did not replace it"
r["arms"][3]["ran"] = False'
expect unfinished-later 1 "unfinished: the record says true, but arm T ran after arm A, which did not"
copy unfinished-string
edit_record 'r["unfinished"] = "false"'
expect unfinished-string 2 "record.json: unfinished: must be true or false"
copy unfinished-absent
edit_record 'del r["unfinished"]'
expect unfinished-absent "$want" "identical to the record"
copy final-stopped
edit_record 'r["stopped"] = "unfinished: written before arm T; the run did not replace it"'
expect final-stopped 1 "stopped: the record says .unfinished: written before arm T; the run did not replace it., its arms give ..$"
copy backend
edit_record 'r["backend"] = "cuda"; r["rehearsal"] = False'
expect backend 1 "backend: the record says .cuda., its plan says cpu"
copy rehearsal
edit_record 'r["rehearsal"] = False'
expect rehearsal 1 "rehearsal: the record says false, its backend \(cpu\) and lanes \(disjoint\) make it true"

# 5. every recomputed number and text, by its JSON path
copy median
edit_record 'r["arms"][0]["summary"]["median_ns"][1] += 1'
expect median 1 "arms\[0\].summary.median_ns\[1\]: the record says"
copy cost
edit_record 'r["arms"][1]["summary"]["cost_ns"] *= 0.5'
expect cost 1 "arms\[1\].summary.cost_ns: the record says"
copy drift # a value the run's own drift is not (B and B' once cost the same to the ns: 0)
edit_record 'r["score"]["drift"] = 0.0 if r["score"]["drift"] != 0 else 0.125'
expect drift 1 "score.drift: the record says (0(\.0)?|0\.125), recomputed"
copy base-cost
edit_record 'r["score"]["baseline_cost_ns"] = 1.5'
expect base-cost 1 "score.baseline_cost_ns: the record says 1.5, recomputed"
copy speedup-int
edit_record 'r["score"]["speedup"] = 1 if r["score"]["speedup"] != 1 else 2'
expect speedup-int 1 "score.speedup: the record says (1|2), recomputed [0-9]"
copy status
edit_record 'r["status"] = "reproduction_pending" if r["status"] != "reproduction_pending" else "failed"'
expect status 1 "status: the record says"
copy reasons
edit_record 'r["reasons"] = "all good"'
expect reasons 1 "reasons: the record says \"all good\""

# 5b. what a mutation audit found unchecked: each tolerance, each identity field, a summary
# dropped, a record that hides an arm that did not run
copy quality-rtol
edit_record 'r["quality"]["rtol"] = r["quality"]["rtol"] * 2 + 0.5'
expect quality-rtol 1 "quality.rtol / quality.atol: not the plan"
copy quality-nan-t
edit_record 'r["quality"]["tensors"][0]["nan_t"] = 5'
expect quality-nan-t 1 "quality.tensors\[0\]: 0 mismatch\(es\) but 5 NaN"
copy stack-digest
edit_record 'r["identity"]["stack_digest"] = "sha256:" + "2" * 64'
expect stack-digest 1 "identity.stack_digest: the record says 'sha256:2222"
copy generation
edit_record 'r["identity"]["incumbent_generation"] += 1'
expect generation 1 "identity.incumbent_generation: differs from its plan"
copy summary-dropped
edit_record 'del r["arms"][0]["summary"]'
expect summary-dropped 1 "arms\[0\].summary: the record says \(absent\), recomputed"
copy audit-not-run  # A not run, said so in stopped: its comparison cannot be listed
edit_record '
r["arms"][3] = {"name": "A", "ran": False}
r["stopped"] = "arm A did not run, and no arm failed and no signal came before it"'
expect audit-not-run 1 "quality.tensors: a comparison is listed, but audit A did not complete"
copy stopped-empty  # A not run and stopped says nothing
edit_record 'r["arms"][3] = {"name": "A", "ran": False}; r["stopped"] = ""'
expect stopped-empty 1 "stopped: the record says '', its arms give 'arm A did not run"

# 5c. what a second mutation audit found unchecked: evidence dropped rather than changed, a
# field of the wrong type, and the record holding more than its recomputation
copy samples-digest-dropped
edit_record 'del r["samples"]["digest"]'
expect samples-digest-dropped 1 "samples.msgpack: its digest is sha256:[0-9a-f]{64}, the record's samples.digest says '\(missing\)'"
copy generation-string
edit_record 'r["identity"]["incumbent_generation"] = str(r["identity"]["incumbent_generation"])'
expect generation-string 1 "identity.incumbent_generation: differs from its plan"
copy topology-digest-dropped
edit_record 'del r["identity"]["topology_digest"]'
expect topology-digest-dropped 1 "identity.topology_digest: the record says '\(missing\)'"
copy topology-garbage
echo '{"hosts": [' >"$D/topology.json"
expect topology-garbage 1 "topology.json: not readable JSON"
# a topology.json that is no file is bad input (2), said so, not evidence that differs; a
# pipe is not opened (its open would wait for a writer for ever)
copy topology-dir
rm "$D/topology.json"
mkdir "$D/topology.json"
expect topology-dir 2 "^bracket score: .*/topology.json: cannot read: Is a directory$"
copy topology-fifo
rm "$D/topology.json"
mkfifo "$D/topology.json"
set +e
timeout 20 "$BK_BRACKET" score --quiet "$D/record.json" >"$D/score.log" 2>&1
SRC=$?
set -e
cat "$D/score.log"
[ "$SRC" = 2 ] && grep -q "topology.json: cannot read: not a regular file$" "$D/score.log" ||
    fail "topology.json a pipe: exit $SRC (124: it waited on the pipe), or its message"
copy stopped-dropped
edit_record 'del r["stopped"]'
expect stopped-dropped 1 "stopped: the record says '\(missing\)'"
copy score-extra
edit_record 'r["score"]["certified"] = True'
expect score-extra 1 "score.certified: the record says true, recomputed \(absent\)"
copy median-extra
edit_record 'r["arms"][0]["summary"]["median_ns"].append(1.0)'
expect median-extra 1 "arms\[0\].summary.median_ns: the record says"
copy bc-only
edit_record 'r["score"]["thresholds"]["bc_only"] = not r["score"]["thresholds"]["bc_only"]'
expect bc-only 1 "score.thresholds.bc_only: the record says (true|false), recomputed (true|false)"
copy resamples
edit_record 'r["score"]["thresholds"]["bootstrap_resamples"] += 1'
expect resamples 1 "score.thresholds.bootstrap_resamples: the record says [0-9]+, recomputed [0-9]+"

# a record that does not fit its own plan is bad input (exit 2): a quality entry dropped or
# out of order, an audit on fewer ranks than tp x ep, a rank's samples_received below what
# its blocks hold
copy tensors-dropped
edit_record 'r["quality"]["tensors"].pop()'
expect tensors-dropped 2 "quality.tensors: [0-9]+ entries; the plan.s [0-9]+ shape\(s\) x [0-9]+ output\(s\)"
copy tensors-shape
edit_record 'r["quality"]["tensors"][0]["shape"] = 1'
expect tensors-shape 2 "quality.tensors\[0\]: shape 0 tensor '[a-z_]+' expected"
copy audit-one-rank
edit_record 'a = r["arms"][3]; a["lane"] = a["lane"][:1]; a["processes"] = a["processes"][:1]'
expect audit-one-rank 2 "arms\[3\] \(A\): ran '[a-z_]+' on 1 rank\(s\); the record's plan says '[a-z_]+' on tp x ep = 2"
copy received-fewer
edit_record 'r["arms"][0]["processes"][0]["samples_received"] -= 1'
expect received-fewer 2 "arm B round 1 rank 0: its sample blocks hold [0-9]+ sample\(s\), the record.s arms\[0\].processes\[0\].samples_received says"

# 6. a damaged samples file: exit 2, the byte or the block named
copy truncated
edit_samples 'b = b[:(B[-1] + len(b)) // 2]'
expect truncated 2 "samples.msgpack: truncated at byte [0-9]+ \(the sample block starting at byte [0-9]+ is incomplete\)"
copy truncated-at-key  # cut between two objects of the block: msgpack-c consumes it all
edit_samples 'b = b[:B[-1] + 1]'
expect truncated-at-key 2 "samples.msgpack: truncated at byte [0-9]+ \(the sample block starting at byte [0-9]+ is incomplete\)"
copy empty
edit_samples 'b = b""'
expect empty 2 "samples.msgpack: truncated at byte 0"
copy header-only
edit_samples 'b = b[:B[0]]'
expect header-only 2 "samples.msgpack: no sample block for arm B round 1 rank 0 shape 0"
copy duplicate
edit_samples 'b = b + b[B[0]:B[1]]'
expect duplicate 2 "samples.msgpack: a second sample block for arm B round 1 rank 0 shape 0"
copy missing
edit_samples 'b = b[:B[-1]]'
expect missing 2 "samples.msgpack: no sample block for arm B' round 1 rank 1 shape 1"
copy malformed
edit_samples 'b = b[:B[2]] + b"\xc1" + b[B[2] + 1:]'
expect malformed 2 "samples.msgpack: malformed at byte [0-9]+"
# a 5-byte header claiming 2^32 elements (about 128 GiB for msgpack-c to allocate) is bounded
# by the bytes left in the file before anything is unpacked
copy huge-array
edit_samples 'b = b[:B[0]] + b"\xdd\xff\xff\xff\xff"'
expect huge-array 2 "samples.msgpack: truncated at byte [0-9]+ \(the sample block starting at byte [0-9]+ is incomplete\): an array or map at byte [0-9]+ claims more elements than the 5 byte\(s\) left in the file"
# a block cut short (one sample fewer than its rank received, its array count fixed up)
copy short-block
edit_samples '
j = b.find(b"\xa2ns", B[0]) + 3
assert b[j] == 0xdc, b[j]
n = b[j + 1] << 8 | b[j + 2]
p = j + 3
def skip(p):
    return p + 1 if b[p] <= 0x7f else p + 1 + {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8}[b[p]]
for k in range(n - 1):
    p = skip(p)
b = b[:j] + bytes([0xdc, (n - 1) >> 8, (n - 1) & 255]) + b[j + 3:p] + b[skip(p):]'
expect short-block 2 "samples.msgpack: arm B round 1 rank 0: its sample blocks hold 99 sample\(s\), the record.s arms\[0\].processes\[0\].samples_received says 100"
copy header-iters
edit_samples 'i = b.find(b"\xa5iters"); assert b[i + 6] == 50; b = b[:i + 6] + bytes([49]) + b[i + 7:]'
expect header-iters 2 "samples.msgpack: header: iters 49, the record's plan says 50"

# a block whose round or rank is outside the record's (1 round, 2 lane ranks) is refused
# before it is stored: round 0, round 2, rank 2 (all one byte, positive fixints)
for c in round:0 round:2 rank:2; do
    copy "block-${c%%:*}-${c#*:}"
    edit_samples "
k = b'\\xa5round' if '$c'.startswith('round') else b'\\xa4rank'
i = b.find(k, B[0]) + len(k)
assert b[i] in (0, 1), b[i]
b = b[:i] + bytes([${c#*:}]) + b[i + 1:]"
    expect "block-$c" 2 "samples.msgpack: the sample block at byte [0-9]+ \\(arm 'B'\\) does not fit the record"
done

# 7. a plan that leaves the backend to the machine (auto): a record relabelled cuda is still
# a rehearsal on shared lanes (docs/record.md: true with the cpu backend or shared lanes)
it_run tamper-auto 4 "$IT_PLAN" --set workload.iters=50 --set backend=auto
[ -n "$RECORD" ] && [ -f "$RECORD" ] || fail "no record written (exit $RC)"
RUN=$(dirname "$RECORD")
copy auto-shared-cuda
edit_record '
r["backend"] = "cuda"; r["rehearsal"] = False; r["lanes"]["policy"] = "shared"
r["plan"]["lanes"]["policy"] = "shared"; redigest()  # as its plan says
# the candidate arms moved onto the baseline ranks with it, so the lanes agree with them (the
# routing is judged by routing.shapes of the record, which the edit leaves as the run made it)
base = r["lanes"]["baseline"]
r["lanes"]["candidate"] = list(base)
for a in r["arms"]:
    if a["name"] in ("C", "A"):
        a["lane"] = list(base)
        for p in a["processes"]:
            p["mpi_rank"] = base[p["lane_rank"]]'
expect auto-shared-cuda 1 "rehearsal: the record says false, its backend \(cuda\) and lanes \(shared\) make it true"
# `lanes` against the processes (the report's shared-lanes note and the rehearsal rule read
# it): a candidate lane moved onto the baseline's ranks, or a policy shared over two lanes
copy lanes-moved
edit_record 'r["lanes"]["candidate"] = list(r["lanes"]["baseline"])'
expect lanes-moved 1 "arms\[1\] \(C\)\.processes\[0\]: lane rank 0 ran on MPI rank [0-9]+, which lanes\.candidate does not put there"
copy lanes-policy
edit_record 'r["lanes"]["policy"] = "shared"'
expect lanes-policy 1 "lanes: policy shared, but the baseline and candidate lanes differ"
# the lanes against the policy (docs/record.md): lanes.policy is the plan's lanes.policy;
# under disjoint no MPI rank is in both lanes (with the arms moved to match, whole or one
# rank); no lane names a rank twice
copy lanes-plan-policy
edit_record 'r["plan"]["lanes"]["policy"] = "shared"; redigest()'
expect lanes-plan-policy 1 "lanes\.policy: the record says .disjoint., its plan.s lanes\.policy says shared$"
copy lanes-policy-unknown
edit_record 'r["lanes"]["policy"] = "both"'
expect lanes-policy-unknown 1 "lanes\.policy: the record says .both., its plan.s lanes\.policy says disjoint$"
# move PY: the arms of `names` (a string of arm names) onto lane `to` (a list of MPI ranks),
# processes too, and lanes.KEY with them
MOVE='
def move(key, names, to):
    r["lanes"][key] = list(to)
    for a in r["arms"]:
        if a["name"] in names and a["ran"]:
            a["lane"] = list(to)
            for p in a["processes"]:
                p["mpi_rank"] = to[p["lane_rank"]]
'
copy lanes-overlap-whole
edit_record "$MOVE"'
move("candidate", ("C", "A"), r["lanes"]["baseline"])'
expect lanes-overlap-whole 1 "lanes: policy disjoint, but MPI rank [0-9]+ is in both lanes\.baseline\[0\] and lanes\.candidate\[0\]"
copy lanes-overlap-one
edit_record "$MOVE"'
b, c = r["lanes"]["baseline"], r["lanes"]["candidate"]
move("candidate", ("C", "A"), [c[0], b[0]])'
expect lanes-overlap-one 1 "lanes: policy disjoint, but MPI rank [0-9]+ is in both lanes\.baseline\[0\] and lanes\.candidate\[1\]"
copy lanes-twice
edit_record "$MOVE"'
b = r["lanes"]["baseline"]
move("baseline", ("B", "B\x27", "T"), [b[0], b[0]])'
expect lanes-twice 1 "lanes\.baseline: MPI rank [0-9]+ at lane ranks 0 and 1"
copy auto-backend-unknown  # neither cpu nor cuda: no backend of bracket's ran it
edit_record 'r["backend"] = "rocm"'
expect auto-backend-unknown 1 "backend: the record says .rocm., its plan says auto"

echo "PASS: bracket score refuses every changed record and names what changed"
