#!/usr/bin/env bash
# Protocol v7: B' runs only when B/C cannot decide. A candidate twice as slow is
# decided by B/C alone (FAIL) and B' is not run.
. "$(dirname "$0")/lib.sh"
set -e
it_run v7 4 "$IT_PLAN" --set protocol.version=v7 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":1.0}'
expect_verdict FAIL 3
python3 - "$RECORD" <<'PY' || fail "B' should not have run"
import json, sys
r = json.load(open(sys.argv[1]))
assert [a["ran"] for a in r["arms"]] == [True, True, False, True, True], [a["ran"] for a in r["arms"]]
assert "B' not run" in r["stopped"], r["stopped"]
PY
expect_rescore
echo "PASS: v7 skips B' when B/C decide"
