#!/usr/bin/env bash
# A bracket whose candidate lane runs on "another host": ranks 2 and 3 run in their own UTS
# namespace with the hostname bk-node-b (MPI still sees one machine). Rank 0 then reaches
# that lane's engines over tcp with CURVE (here on --iface lo: traffic stays on loopback),
# the whole bracket runs, every sample arrives, and the record says two hosts. A lane split
# across hosts is refused with a clear error. Needs root for unshare (skipped otherwise).
. "$(dirname "$0")/fault_lib.sh"
set -e
need_uts
two_hosts lanes 2 2 "$IT_PLAN" --iface lo
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
grep -q "^bracket: transport tcp with CURVE on lo (127.0.0.1)" "$OUT" || fail "tcp not chosen"
python3 - "$RECORD" "$(hostname)" <<'PY' || fail "the record does not show two hosts / all samples"
import json, sys
r = json.load(open(sys.argv[1]))
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
assert r["identity"]["hosts"] == [sys.argv[2]] * 2 + ["bk-node-b"] * 2, r["identity"]["hosts"]
assert "two hosts" in r["lanes"]["note"], r["lanes"]["note"]
for a in r["arms"]:
    if not a["ran"]:
        continue  # v8 runs all; B' may only be skipped under v7
    assert a["ok"], a
    for p in a["processes"]:
        assert p["host"] == ("bk-node-b" if a["name"] in ("C", "A") else sys.argv[2]), p
        if not a["audit"]:
            assert p["samples_received"] == p["samples_sent"] == want, p
assert sum(r["wire"]["rejected"].values()) == 0, r["wire"]
# no connection broke, so no engine sent its samples, audit tensors or hello again
assert r["wire"]["repeated"] == r["wire"]["repeated_tensors"] == r["wire"]["repeated_hellos"] == 0, r["wire"]
PY
expect_no_leftovers
expect_no_private_dirs

# a lane split across hosts: refused before anything runs
two_hosts split 1 3 "$IT_PLAN"
[ "$RC" = 2 ] || fail "a lane across hosts: expected exit 2, got $RC"
# the lane finder finds no equal pair: every natural lane of 2 spans the two hosts or not
grep -q "no two disjoint lanes of 2 CPU slots with equal signatures among the " "$OUT" ||
    fail "a lane across hosts: unclear error"
grep -q "h2" "$OUT" || fail "a lane across hosts: the closest pair does not show the 2 hosts"
# one lane over both hosts (shared, TP 4 on 2 + 2 ranks): the finder takes it, and the cpu
# backend refuses it before any engine starts, saying why (its engines share memory)
two_hosts span 2 2 "$IT_PLAN" --set arena.tp=4 --set lanes.policy=shared
[ "$RC" = 2 ] || fail "a cpu lane spanning hosts: expected exit 2, got $RC"
grep -q "the baseline lane spans hosts (MPI rank 0 on $(hostname), rank 2 on bk-node-b): the cpu engines of a lane share memory, which is one host's" "$OUT" ||
    fail "a cpu lane spanning hosts: unclear error"
[ -z "$(ls -A "$IT_TMP/out-span" 2>/dev/null)" ] || fail "a refused run left files in its --out"
# four hosts of one rank each (disjoint TP 2): both lanes would span hosts; refused alike
uts_hosts four 4 "$IT_PLAN" --iface lo
[ "$RC" = 2 ] || fail "cpu lanes over four hosts: expected exit 2, got $RC"
grep -q "the baseline lane spans hosts (MPI rank 0 on $(hostname), rank 1 on bk-node-1): the cpu engines of a lane share memory" "$OUT" ||
    fail "cpu lanes over four hosts: unclear error"
# the probe fails on the other host (its hwloc cannot load the topology HWLOC_XMLFILE
# gives it): every rank stops, and rank 0, whose own probe worked, says the probe failed
# on another node (not that bk-node-b is missing from what it gathered)
bad=$IT_TMP/bad-hwloc.xml
printf '<?xml version="1.0"?>\n<topology version="2.0"><object type="Machine" os_index="0"/></topology>\n' >"$bad"
as_host bk-node-b
run_apps badprobe -np 2 "$BK_BRACKET" run "$IT_PLAN" --out "$IT_TMP/out-badprobe" \
    : -np 2 env HWLOC_XMLFILE="$bad" "${AS_HOST[@]}" "$BK_BRACKET" run "$IT_PLAN" --out "$IT_TMP/out-badprobe"
[ "$RC" != 0 ] || fail "a probe that failed on one host: the run went on"
grep -q "gather: the probe failed on another node" "$OUT" || fail "a failed probe: rank 0 does not say so"
echo "PASS: a lane on another host runs over tcp+CURVE; a lane across hosts is refused"
