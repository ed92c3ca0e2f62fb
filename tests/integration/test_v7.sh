#!/usr/bin/env bash
# Protocol v7: B' runs only when B/C cannot decide. A candidate four times as slow is
# decided by B/C alone (FAIL) and B' is not run. Four, not two: v7 runs no B' here, so no
# drift check can tell a noisy B; on the CI VM one B arm ran 2.6x slow (23.7 us against
# ~9) and a twice-as-slow candidate came out 1.2x faster (2026-12-02).
. "$(dirname "$0")/lib.sh"
set -e
it_run v7 4 "$IT_PLAN" --set protocol.version=v7 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_twopass","fraction":3}'
expect_verdict FAIL 3
python3 - "$RECORD" <<'PY' || fail "B' should not have run"
import json, sys
r = json.load(open(sys.argv[1]))
assert [a["ran"] for a in r["arms"]] == [True, True, False, True, True], [a["ran"] for a in r["arms"]]
assert "B' not run" in r["stopped"], r["stopped"]
PY
expect_rescore
echo "PASS: v7 skips B' when B/C decide"
