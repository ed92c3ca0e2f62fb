# lib.sh - helpers for the integration tests: run bracket under mpirun on this machine.
# Sourced by tests/integration/test_*.sh (CTest sets BK_BRACKET and BK_SOURCE_DIR).
set -u
BK_SOURCE_DIR=${BK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BK_BRACKET=${BK_BRACKET:-$BK_SOURCE_DIR/build/bracket}
IT_PLAN=${IT_PLAN:-$BK_SOURCE_DIR/tests/fixtures/plans/it-cpu.json}
IT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/bk-it-XXXXXX")
trap 'rm -rf "$IT_TMP"' EXIT
# engines' plan copies, agents' key files and the coordinator's ipc folder live in this
# test's folder (bracket makes them in $TMPDIR): pgrep finds this test's engines by it
# (expect_no_leftovers), and no other test's
export TMPDIR=$IT_TMP
MPIRUN_FLAGS=(-q --oversubscribe --bind-to none --mca btl self,vader
              --mca mpi_yield_when_idle 1)
[ "$(id -u)" = 0 ] && MPIRUN_FLAGS+=(--allow-run-as-root)
export OMPI_MCA_rmaps_base_oversubscribe=1

fail() { echo "FAIL: $*" >&2; exit 1; }

# need_uts: skip (exit 77) unless this shell may give a process a hostname of its own
need_uts() {
    if [ "$(id -u)" != 0 ] || ! unshare --uts true 2>/dev/null; then
        echo "SKIP: needs root and unshare --uts (a second host by its hostname)"
        exit 77
    fi
}

# run_apps NAME APP...: mpirun with these app contexts (`-np K PROGRAM ARGS` joined by
# `:`), bounded by 600 s; sets RC, OUT (stdout+stderr file) and RECORD (the run's
# $IT_TMP/out-NAME/*/record.json, or empty), then prints the exit and the output
run_apps() {
    local name=$1
    shift
    OUT=$IT_TMP/$name.log
    set +e
    timeout 600 mpirun "${MPIRUN_FLAGS[@]}" "$@" >"$OUT" 2>&1
    RC=$?
    set -e
    RECORD=$(ls -d "$IT_TMP/out-$name"/*/record.json 2>/dev/null | head -n 1 || true)
    echo "---- $name: exit $RC"
    cat "$OUT"
}

# as_host HOST: the command prefix that runs a program on "another host", HOST: a UTS
# namespace of that hostname (MPI still sees one machine, bracket and NCCL see two hosts)
as_host() {
    AS_HOST=(unshare --uts sh -c "hostname $1 && exec \"\$0\" \"\$@\"")
}

# two_hosts NAME NP_A NP_B [bracket run args...]: NP_A ranks here and NP_B ranks on
# bk-node-b (as_host). Sets RC, OUT, RECORD as run_apps (bracket run without --quiet).
two_hosts() {
    local name=$1 na=$2 nb=$3
    shift 3
    as_host bk-node-b
    run_apps "$name" -np "$na" "$BK_BRACKET" run "$@" --out "$IT_TMP/out-$name" \
        : -np "$nb" "${AS_HOST[@]}" "$BK_BRACKET" run "$@" --out "$IT_TMP/out-$name"
}

# uts_hosts NAME N [bracket run args...]: N ranks, each on a host of its own: rank 0 here,
# rank i (1..N-1) on bk-node-<i> (as_host). Sets RC, OUT, RECORD as run_apps.
uts_hosts() {
    local name=$1 n=$2 i
    shift 2
    local apps=(-np 1 "$BK_BRACKET" run "$@" --out "$IT_TMP/out-$name")
    for i in $(seq 1 $((n - 1))); do
        as_host "bk-node-$i"
        apps+=(: -np 1 "${AS_HOST[@]}" "$BK_BRACKET" run "$@" --out "$IT_TMP/out-$name")
    done
    run_apps "$name" "${apps[@]}"
}

# it_run NAME NP [bracket run args...]: runs, sets RC, OUT (stdout+stderr file), RECORD
it_run() {
    local name=$1 np=$2
    shift 2
    run_apps "$name" -np "$np" "$BK_BRACKET" run "$@" --out "$IT_TMP/out-$name" --quiet
}

# it_run_settled NAME NP [args...]: it_run, repeated (at most 5 times) while the run's own
# B and B' disagree past the drift limit. A drifted bracket is no measurement of the
# candidate: this CI VM's own speed swings by up to 1.8x for tenths of seconds at a time
# (a standalone pinned pthread loop shows it; docs/BENCHMARKS.md), and the arena's answer
# is to repeat in fresh processes; so do the tests whose assertion is about the
# candidate's speed. When no attempt settles, the test is skipped (exit 77) with the
# reason: the machine could not measure it, which is not a pass.
it_run_settled() {
    local name=$1 np=$2 try rc
    shift 2
    for try in 1 2 3 4 5; do
        it_run "$name-$try" "$np" "$@"
        [ -n "$RECORD" ] || return 0
        # 0 settled (or no drift to judge: B' not run), 3 drifted; anything else (a record
        # that cannot be read, no score) is the test's failure, never a drift nor a skip
        set +e
        python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['score'].get('drift_exceeded', False); assert isinstance(d, bool); sys.exit(3 if d else 0)" \
            "$RECORD"
        rc=$?
        set -e
        [ "$rc" = 0 ] && return 0
        [ "$rc" = 3 ] || fail "$name: attempt $try: its record $RECORD cannot be read for its score"
        echo "---- $name: attempt $try drifted past the limit; repeating in fresh processes"
    done
    echo "SKIP: $name: B and B' disagreed past the drift limit in 5 brackets: this machine's"
    echo "      speed moved too much to measure the candidate (see docs/BENCHMARKS.md)"
    exit 77
}

# expect_verdict WORD CODE: the run printed the verdict and exited with its code
expect_verdict() {
    grep -q "^verdict: $1 " "$OUT" || fail "expected verdict $1"
    [ "$RC" = "$2" ] || fail "expected exit $2 for $1, got $RC"
    [ -n "$RECORD" ] && [ -f "$RECORD" ] || fail "no record written"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['verdict']==sys.argv[2], r['verdict']" \
        "$RECORD" "$1" || fail "record.json verdict is not $1"
}

# expect_verdict_from_record: the run printed a verdict, exited with its code, and the
# verdict is the one the record's own numbers give: NO_DECISION without a speed-up or with
# drift past the limit under policy strict, else PASS above 1 + min_gain, FAIL below it,
# NO_DECISION when the interval straddles it. Nothing else may block the decision. For runs
# whose speed on a shared CI machine is not stable enough for a fixed verdict.
expect_verdict_from_record() {
    [ -n "$RECORD" ] && [ -f "$RECORD" ] || fail "no record written"
    python3 - "$RECORD" "$RC" "$OUT" <<'PY' || fail "the verdict does not follow from the record"
import json, re, sys
r = json.load(open(sys.argv[1]))
rc, out = int(sys.argv[2]), open(sys.argv[3]).read()
v, s = r["verdict"], r["score"]
th = s["thresholds"]
assert re.search(r"^verdict: %s " % v, out, re.M), "printed verdict is not the record's " + v
assert rc == {"PASS": 0, "FAIL": 3, "NO_DECISION": 4}[v], (v, rc)
bar = 1 + th["min_gain"]
lo, hi = s.get("speedup_interval", (None, None))
if lo is None or s.get("drift_exceeded") and th["drift_policy"] == "strict":
    want = "NO_DECISION"
else:
    want = "PASS" if lo > bar else "FAIL" if hi < bar else "NO_DECISION"
assert v == want, (v, want, lo, hi, bar, r["reasons"])
if v == "PASS":
    assert r["status"] == "reproduction_pending", r["status"]
print("verdict %s as its record gives it: %s" % (v, r["reasons"]))
PY
}

# expect_rescore [--strict]: `bracket score` (with the options given) reproduces the verdict
# and numbers bit for bit, and its report's wire lines (rank 0's message counts, read back
# from the record) are the run's
expect_rescore() {
    set +e
    "$BK_BRACKET" score "$@" "$RECORD" >"$IT_TMP/score.log" 2>&1
    local rc=$?
    set -e
    cat "$IT_TMP/score.log"
    [ "$rc" = "$RC" ] || fail "bracket score exited $rc, the run $RC"
    grep -q "identical to the record" "$IT_TMP/score.log" || fail "bracket score differs from the record"
    [ "$(grep '^wire:' "$OUT" || true)" = "$(grep '^wire:' "$IT_TMP/score.log" || true)" ] ||
        fail "bracket score's wire lines are not the run's: run [$(grep '^wire:' "$OUT")], score [$(grep '^wire:' "$IT_TMP/score.log")]"
}

# shm_prefix RUN_ID: how the names of that run's shared-memory segments in /dev/shm begin
# (collectives/shm.c, bk_shm_name: "bk-", a 48-bit FNV-1a hash of the run id, "-")
shm_prefix() {
    python3 - "$1" <<'PY'
import sys
h = 0xcbf29ce484222325
for c in sys.argv[1].encode():
    h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
print("bk-%012x-" % (h & 0xffffffffffff))
PY
}

# expect_no_leftovers [--no-record]: no engine of this test's runs and no shared-memory
# segment of its runs remain (segment names carry a 48-bit FNV-1a hash of the run id). The
# runs are those of every record.json under $IT_TMP (output folders elsewhere in it too):
# none found fails, unless --no-record says the test's runs were meant to record nothing.
expect_no_leftovers() {
    sleep 0.2
    if pgrep -f "bracket engine .*$IT_TMP/" >/dev/null; then
        pgrep -af "bracket engine .*$IT_TMP/" >&2
        fail "engine processes left behind"
    fi
    local left="" rec run f n=0
    while IFS= read -r rec; do
        # a copy a test has damaged on purpose names no run: only the readable ones count
        run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' \
            "$rec" 2>/dev/null) || continue
        n=$((n + 1))
        for f in /dev/shm/"$(shm_prefix "$run")"*; do
            [ ! -e "$f" ] || left+="${left:+ }${f#/dev/shm/}"
        done
    done < <(find "$IT_TMP" -name record.json -type f)
    [ "$n" -gt 0 ] || [ "${1:-}" = --no-record ] ||
        fail "expect_no_leftovers: no record.json under $IT_TMP to check"
    [ -z "$left" ] || fail "shared-memory segments left behind: $left"
}
