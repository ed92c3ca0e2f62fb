#!/usr/bin/env bash
# workload.warmup_iters: every timed engine makes that many untimed calls of a shape before
# its first timed one. The engine's clock shows it: from its start to its first timed
# iteration (engine_start_to_first_iter_s) it makes warmup_iters calls, each behind a lane
# barrier, each about as long as a timed one: about warmup_iters x the arm's median (0.9 to
# 1.05 of it, here and under the sanitizers). The bound is a quarter of that, since this VM's
# speed swings by up to 1.8x between the warm-up and the timed calls. An engine that
# skipped its warm-up reaches its first timed iteration in its start-up time alone (3 ms
# here, under a twentieth of the bound).
. "$(dirname "$0")/lib.sh"
set -e
W=50000
it_run warmup 4 "$IT_PLAN" --set workload.warmup_iters=$W \
    --set 'workload.shapes=[{"tokens": 1, "hidden": 4096, "weight": 1}]'
expect_verdict_from_record
python3 - "$RECORD" "$W" <<'PY' || fail "the timed engines did not take their warm-up's time"
import json, sys
r, w = json.load(open(sys.argv[1])), int(sys.argv[2])
assert r["plan"]["workload"]["warmup_iters"] == w, r["plan"]["workload"]
timed = [a for a in r["arms"] if not a["audit"]]
assert [a["name"] for a in timed] == ["B", "C", "B'"], [a["name"] for a in timed]
for a in timed:
    assert a["ran"] and a["ok"], a
    bound = 0.25 * w * a["summary"]["median_ns"][0] / 1e9
    assert len(a["processes"]) == 2, a["processes"]
    for p in a["processes"]:
        t = p["engine_start_to_first_iter_s"]
        assert t >= bound, "arm %s lane rank %d: first timed iteration %.3f s after its start, " \
            "under %d warm-up calls at a quarter of the median (%.3f s)" % (a["name"], p["lane_rank"], t, w, bound)
        print("arm %-2s lane rank %d: first timed iteration after %.3f s (bound %.3f s)"
              % (a["name"], p["lane_rank"], t, bound))
PY
expect_rescore
expect_no_leftovers
echo "PASS: test_warmup"
