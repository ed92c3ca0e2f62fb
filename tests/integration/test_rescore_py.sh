#!/usr/bin/env bash
# docs/rescore.py, the standalone Python recomputation of a record's score (docs/record.md,
# "Recomputing the score"), agrees with real records bit for bit: one bracket of one round
# and one of two rounds (cpu backend). It is no rubber stamp: in copies, a changed sample
# (the digest made to match), an interval end one ulp off, another seed, and an arm's ok
# that its processes contradict (either way) are each reported by the field they change,
# and `bracket score` disagrees with the same copies.
. "$(dirname "$0")/lib.sh"
set -e
RESCORE=$BK_SOURCE_DIR/docs/rescore.py
[ -f "$RESCORE" ] || fail "no $RESCORE"
# a reason too long for its buffer is cut as bracket cuts it (bk_strlcpy_words: the cases of
# tests/test_status.c), or a record with one would not rescore identical
python3 - "$RESCORE" <<'PY' || fail "rescore.py does not cut reasons as bracket does"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("rescore", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
for text, size, want in [(b"fits whole", 16, b"fits whole"),
                         (b"arm C engine crashed: signal 11", 16, b"arm C engine..."),
                         (b"rank 1 fail; rank 2 failed", 16, b"rank 1 fail..."),
                         (b"abcdefghijk\xc3\xa9zzz", 16, b"abcdefghijk..."),
                         (b"abcdefghijklmnopq", 16, b"abcdefghijkl..."), (b"abc", 3, b"..")]:
    assert m.cut_words(text, size) == want, (text, m.cut_words(text, size), want)
PY

# a bad --rtol is a usage error (exit 2, as an unreadable record), never a traceback (exit 1:
# "a record differs")
for v in abc -1 nan; do
    set +e
    python3 "$RESCORE" --rtol "$v" "$IT_TMP" >"$IT_TMP/rtol.log" 2>&1
    rc=$?
    set -e
    [ "$rc" = 2 ] && grep -q "rescore.py: --rtol: want a relative tolerance" "$IT_TMP/rtol.log" ||
        fail "--rtol $v: exit $rc: $(cat "$IT_TMP/rtol.log")"
done

# rescore DIR: runs docs/rescore.py on DIR; PRC its exit, PLOG its output
rescore() {
    set +e
    python3 "$RESCORE" "$1" >"$IT_TMP/rescore.log" 2>&1
    PRC=$?
    set -e
    PLOG=$IT_TMP/rescore.log
    cat "$PLOG"
}

# msgpack encoding for the checks below (enc.py in $IT_TMP): the smallest form of each
# object, as bracket writes samples.msgpack, or with wide=True every integer as uint64 and
# every array as array16 (a valid but different encoding of the same objects)
export IT_TMP # enc.py is imported from there
cat >"$IT_TMP/enc.py" <<'PY'
def enc(o, wide=False):
    if isinstance(o, dict):
        return bytes([0x80 | len(o)]) + b"".join(enc(k, wide) + enc(v, wide) for k, v in o.items())
    if isinstance(o, str):
        e = o.encode()
        return (bytes([0xa0 | len(e)]) if len(e) < 32 else b"\xd9" + bytes([len(e)])) + e
    if isinstance(o, list):
        n = len(o)
        if wide:
            h = b"\xdc" + n.to_bytes(2, "big")
        else:
            h = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big") if n < 65536 \
                else b"\xdd" + n.to_bytes(4, "big")
        return h + b"".join(enc(x, wide) for x in o)
    if wide:
        return b"\xcf" + o.to_bytes(8, "big")
    for lim, tag, w in ((1 << 7, b"", 1), (1 << 8, b"\xcc", 1), (1 << 16, b"\xcd", 2),
                        (1 << 32, b"\xce", 4), (1 << 64, b"\xcf", 8)):
        if o < lim:
            return tag + o.to_bytes(w, "big")
PY

RUNS=()
it_run one 4 "$IT_PLAN" --set workload.iters=50
[ -n "$RECORD" ] || fail "no record written (exit $RC)"
RUNS+=("$(dirname "$RECORD")")
it_run two 4 "$IT_PLAN" --set workload.iters=50 --set protocol.repeats=2
[ -n "$RECORD" ] || fail "no record written (exit $RC)"
RUNS+=("$(dirname "$RECORD")")
# relative weights (plans/README.md: normalised to sum 1), as the MoE plans have them
it_run weights 4 "$IT_PLAN" --set workload.iters=50 --set 'workload.shapes[0].weight=1' \
    --set 'workload.shapes[1].weight=3'
[ -n "$RECORD" ] || fail "no record written (exit $RC)"
RUNS+=("$(dirname "$RECORD")")
for run in "${RUNS[@]}"; do
    rescore "$run"
    [ "$PRC" = 0 ] && grep -q ": identical: " "$PLOG" || fail "rescore.py differs from $run (exit $PRC)"
done

# the decoder reads samples.msgpack whole: re-encoded, it gives the file's bytes back
python3 -B - "$RESCORE" "${RUNS[@]}" <<'PY' || fail "rescore.py's msgpack decoder does not round-trip"
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("rescore", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
sys.path.insert(0, os.environ["IT_TMP"])
from enc import enc
for run in sys.argv[2:]:
    raw = open(run + "/samples.msgpack", "rb").read()
    objs = m.msgpack_stream(raw)
    assert b"".join(map(enc, objs)) == raw, run
    assert len(objs) > 1 and all(isinstance(x, int) for b in objs[1:] for x in b["ns"])
print("msgpack round trip: ok")
PY

RUN=${RUNS[1]}
# copy NAME: a fresh copy of the two-round run in $D
copy() {
    D=$IT_TMP/case-$1
    rm -rf "$D"
    cp -r "$RUN" "$D"
}
# edit PY: run PY with r (the record, a dict) and b (samples.msgpack's objects, the header
# first) in the copy, write both back (samples re-encoded; samples.digest made to match)
edit() {
    python3 -B - "$RESCORE" "$D" "$1" <<'PY'
import hashlib, importlib.util, json, math, os, sys
spec = importlib.util.spec_from_file_location("rescore", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
d = sys.argv[2]
r = json.load(open(d + "/record.json"))
b = m.msgpack_stream(open(d + "/samples.msgpack", "rb").read())
exec(sys.argv[3])
sys.path.insert(0, os.environ["IT_TMP"])
from enc import enc
raw = b"".join(enc(o, wide=True) for o in b)
open(d + "/samples.msgpack", "wb").write(raw)
r["samples"]["digest"] = "sha256:" + hashlib.sha256(raw).hexdigest()
json.dump(r, open(d + "/record.json", "w"), indent=2)
PY
}
# expect NAME PATTERN...: rescore.py exits 1 on the copy with a line for each PATTERN, and
# `bracket score` exits 1 on it too
expect() {
    local name=$1 p
    shift
    rescore "$D"
    echo "---- $name: rescore.py exit $PRC"
    [ "$PRC" = 1 ] || fail "$name: rescore.py exited $PRC, expected 1"
    ! grep -q ": identical: " "$PLOG" || fail "$name: a changed record was called identical"
    for p in "$@"; do
        grep -Eq -- "$p" "$PLOG" || fail "$name: no difference matching '$p'"
    done
    set +e
    "$BK_BRACKET" score --quiet "$D/record.json" >"$IT_TMP/score.log" 2>&1
    local src=$?
    set -e
    cat "$IT_TMP/score.log"
    [ "$src" = 1 ] || fail "$name: bracket score exited $src, expected 1"
}

copy untouched  # re-encoded (every integer as uint64): the same numbers, the same score
edit 'pass'
rescore "$D"
[ "$PRC" = 0 ] || fail "untouched: a re-encoded copy differs (exit $PRC)"

copy sample  # C, shape 0, every round and lane rank: every sample twice as long (so every
# bootstrap draw's C cost grows and both interval ends move; one rank of one round alone
# left the lower end where it was in about one run in ten)
edit '
for blk in [x for x in b[1:] if (x["arm"], x["shape"]) == ("C", 0)]:
    blk["ns"] = [2 * v for v in blk["ns"]]'
expect sample 'arms\[1\]\.summary\.median_ns\[0\]: record ' 'score\.speedup: record ' \
    'score\.speedup_interval\[0\]: record '

copy interval  # the lower end of the speed-up interval, one ulp up
edit 'r["score"]["speedup_interval"][0] = math.nextafter(r["score"]["speedup_interval"][0], math.inf)'
expect interval 'score\.speedup_interval\[0\]: record [0-9.e-]+, recomputed [0-9.e-]+ \(relative difference [0-9.e-]+\)$'
[ "$(grep -c ': record ' "$PLOG")" = 1 ] || fail "interval: more than the one end differs"

copy seed  # another bootstrap seed: the thresholds and the intervals, not the point values
edit 'r["plan"]["workload"]["seed"] += 1'
expect seed 'score\.thresholds\.seed: record ' 'score\.speedup_interval\[[01]\]: record '
! grep -Eq 'score\.speedup: |median_ns|cost_ns: ' "$PLOG" || fail "seed: a point value differs"

# each arm's ok judged again from its processes, as bracket score judges it
copy okflip  # B' marked failed though its processes ended well
edit 'r["arms"][2]["ok"] = False; r["arms"][2]["reason"] = "arm B\x27 lane rank 0: engine crashed: signal 11"'
expect okflip "arms\[2\]\.ok: record false, recomputed true \(its processes: every one ended well\)"
copy short  # C marked ok though round 2's lane rank 1 says it sent one sample less
edit 'r["arms"][1]["processes"][3]["samples_sent"] -= 1'
expect short "arms\[1\]\.ok: record true, recomputed false \(its processes: round 2 lane rank 1: samples: got [0-9]+, sent [0-9]+, expected [0-9]+\)"
copy crashed  # C marked ok though round 1's lane rank 0 died of a signal
edit 'r["arms"][1]["processes"][0].update(signal=11, exit_code=139)'
expect crashed "arms\[1\]\.ok: record true, recomputed false \(its processes: round 1 lane rank 0: ended by signal 11\)"
copy routed  # C's engine says it served shape 0 with the incumbent; the routing says none
edit 'assert all(x["served_by"] == r["plan"]["candidate"]["variant"] for x in r["routing"]["shapes"]); r["arms"][1]["processes"][1]["routed_shapes"] = [0]'
expect routed "arms\[1\]\.ok: record true, recomputed false \(its processes: round 1 lane rank 1: served shapes \[0\] with the incumbent; the routing gives \[\]\)"

copy digest  # a sample changed without its digest: reported as such
python3 - "$D/samples.msgpack" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.rfind(b"\xa2ns") + 7  # the last block's first sample, its high byte (array16, uint16/32)
b[i] ^= 1
open(p, "wb").write(b)
PY
rescore "$D"
[ "$PRC" = 1 ] && grep -q "samples.digest: record " "$PLOG" || fail "digest: a changed file not reported"
echo "PASS: rescore.py reproduces real records and reports each change"
