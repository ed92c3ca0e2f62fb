#!/usr/bin/env bash
# An engine that dies before its hello: its shared-memory segment's name is taken (planted
# here during arm B: the names carry the run's id, so only a test can take one before the
# run uses it), so its shm_open fails and it exits before the rendezvous, as an engine does
# whose start fails for any reason (its backend, its plan copy, its memory). Arm C fails:
# NO_DECISION naming the engine's error; the record keeps that engine's pid, which only its
# agent could give (no hello carried it); the agent removes its failed engine's segment name,
# so nothing of the run is left in /dev/shm.
. "$(dirname "$0")/fault_lib.sh"
set -e
it_start early-death 4 "$IT_PLAN" --set workload.iters=30000
wait_engines B 2
RUN_ID=$(tr '\0' '\n' <"/proc/$(echo "$EPIDS" | head -n 1)/cmdline" | sed -n '/^--run$/{n;p;q}')
[ -n "$RUN_ID" ] || fail "no --run in the engine's command line"
SEG=$(shm_prefix "$RUN_ID")C-1
# the segment of arm C's lane rank 1 (MPI rank 3), before its engine starts
(set -C && : >"/dev/shm/$SEG") || fail "/dev/shm/$SEG exists already"
# the planted name goes with the test, whatever ends it (a failed run's would be left)
trap 'rm -f "/dev/shm/$SEG"; rm -rf "$IT_TMP"' EXIT
chmod 600 "/dev/shm/$SEG"
[ -z "$(engine_pids C)" ] || fail "arm C started before /dev/shm/$SEG was planted"
echo "---- planted /dev/shm/$SEG during arm B"
it_wait
expect_verdict NO_DECISION 4
python3 - "$RECORD" "$SEG" <<'PY' || fail "the record does not show the engine that died before its hello"
import json, sys
r, seg = json.load(open(sys.argv[1])), sys.argv[2]
c = r["arms"][1]
assert c["ran"] and not c["ok"], c
dead = [p for p in c["processes"] if p["lane_rank"] == 1]
assert len(dead) == 1, c["processes"]
d = dead[0]
assert d["reported"] and d["exit_code"] != 0 and d["ended"].startswith("exit "), d
# its pid: from its agent's report, since it never said hello
assert d["pid"] > 0, d
assert d["pid"] not in [p["pid"] for p in c["processes"] if p is not d], c["processes"]
assert d["samples_received"] == 0, d
assert d["hello"] is False, d
assert all(p["hello"] is True for p in r["arms"][0]["processes"]), r["arms"][0]["processes"]
assert "File exists" in c["reason"] and seg in c["reason"], c["reason"]
# its own line names it: not named again as the rank the rendezvous waited for
assert "never said hello" not in c["reason"], c["reason"]
assert not r["arms"][2]["ran"], "B' ran after a failed C"
print("arm C:", c["reason"][:300])
PY
[ ! -e "/dev/shm/$SEG" ] || { rm -f "/dev/shm/$SEG"; fail "the failed engine's segment name was left in /dev/shm"; }
expect_no_ranks
expect_no_leftovers
echo "PASS: an engine dead before its hello: NO_DECISION, its pid from its agent, nothing left"
