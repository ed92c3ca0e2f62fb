#!/usr/bin/env bash
# moe.fused_experts_reduce on the cpu backend under mpirun, v8, 4 ranks (two lanes of
# tp 2): moe_fused_combine against moe_serial through the whole runner (lanes, spawn,
# rendezvous, shared memory, samples, audit, scoring, record). The speed verdict on a
# shared 2-core machine is noise-bound (docs/bench/moe.md), so the test asserts what is
# deterministic: every arm ran, the audit matched bit for bit (both variants give the
# same bits for these shapes: K = 2 partial sums add exactly), the printed verdict
# follows from the printed interval and maps to the exit code, `bracket score`
# reproduces it, and nothing is left behind.
. "$(dirname "$0")/lib.sh"
set -e
IT_PLAN=$BK_SOURCE_DIR/plans/moe-cpu.json
it_run moe 4 "$IT_PLAN" --set workload.iters=100
python3 - "$RECORD" "$RC" <<'PY' || fail "record contents"
import json, sys
r = json.load(open(sys.argv[1]))
rc = int(sys.argv[2])
assert r["plan"]["target"] == "moe.fused_experts_reduce"
assert [a["ran"] for a in r["arms"]] == [True] * 5, "all five arms ran under v8"
for a in r["arms"]:
    for p in a["processes"]:
        assert p["exit_code"] == 0 and p["status_ok"], p
q = r["quality"]
assert q["state"] == "pass", q
assert len(q["tensors"]) == 4
for t in q["tensors"]:
    assert t["tensor"] == "out" and t["mismatches"] == 0 and t["nan_a"] == 0, t
    assert t["digest_a"] == t["digest_t"], t
assert r["routing"]["candidate_share"] == 1.0
lo, hi = r["score"]["speedup_interval"]
bar = 1.0 + r["plan"]["protocol"]["min_gain"]
want = "PASS" if lo > bar else "FAIL" if hi < bar else "NO_DECISION"
assert r["verdict"] == want, (r["verdict"], lo, hi, bar)
assert rc == {"PASS": 0, "FAIL": 3, "NO_DECISION": 4}[want], (rc, want)
print("verdict", want, "interval", lo, hi)
PY
grep -q "^verdict: " "$OUT" || fail "no verdict printed"
expect_rescore
expect_no_leftovers
echo "PASS: moe fused_combine vs serial ran end to end"
