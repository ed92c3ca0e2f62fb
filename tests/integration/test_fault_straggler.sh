#!/usr/bin/env bash
# One rank far slower than the rest of its lane (lane rank 1 of the candidate busy-waits 3x
# its own time): the candidate's critical path carries it, so FAIL, and the record names
# the straggler with its host and MPI rank; the baseline arms have none.
. "$(dirname "$0")/fault_lib.sh"
set -e
it_run straggler 4 "$IT_PLAN" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":3,"rank":1}'
expect_verdict FAIL 3
grep -q "straggler: lane rank 1 (host $(hostname), MPI rank 3)" "$OUT" || fail "no straggler reported"
python3 - "$RECORD" "$(hostname)" <<'PY' || fail "the record does not name the straggler"
import json, sys
r = json.load(open(sys.argv[1]))
b, c = r["arms"][0], r["arms"][1]
assert c["ok"], c
want = "straggler: lane rank 1 (host %s, MPI rank 3)" % sys.argv[2]
assert want in c["reason"], c["reason"]
assert "lane rank 0" not in c["reason"], c["reason"]
assert "straggler" not in b["reason"], b["reason"]
PY
expect_rescore
expect_no_leftovers
echo "PASS: straggler -> FAIL, recorded with host and rank"
