#!/usr/bin/env bash
# bracket verify on the cuda backend (label gpu), with no plan (--target T --variant V):
# each IPC candidate on a lane of 2 engine processes (on one GPU both share it), the MoE
# fused-combine candidate on a lane of 2 (of 1 on one GPU: NCCL), eager and graph: every row
# within the default 1e-2 of the float64 reference, the graph replay bitwise equal to the
# eager call on every row, and the probes past the candidate's domain served by the
# target's cuda incumbent (left out, with a note, where the lane shares a GPU and that
# incumbent needs NCCL). Then --target T alone (every cuda variant of T passes), and the
# PLAN form on the demo plan at its lane. No engine is left behind.
# Skips (exit 77) with the reason where there is no GPU or no cuda build.
. "$(dirname "$0")/../integration/lib.sh"
set -e
. "$(dirname "$0")/gpu_lib.sh"
v() { set +e; "$BK_BRACKET" verify "$@" >"$IT_TMP/v.log" 2>&1; RC=$?; set -e; cat "$IT_TMP/v.log"; }
has() { grep -Eq -- "$1" "$IT_TMP/v.log"; }
# every row of seed $1: graph==eager "yes", none failed; some served by the incumbent $2
# where the lane has a GPU a rank, else (NCCL refuses a lane sharing a GPU) none, and the
# probes past the domain left out with a note saying so
rows() {
    python3 - "$IT_TMP/v.log" "$1" "$2" "$3" <<'PY' || fail "verify's rows (above)"
import sys
lines = open(sys.argv[1]).read().splitlines()
seed, inc, shared = sys.argv[2], sys.argv[3], sys.argv[4] == "1"
rows = [l for l in lines if l.split()[:1] == [seed]]
assert len(rows) >= 4, rows
assert all(l.rstrip().endswith(" yes") for l in rows), [l for l in rows if not l.rstrip().endswith(" yes")]
assert not any("FAILED" in l for l in lines), "a row failed"
routed = [l for l in rows if " %s " % inc in l]
notes = [l for l in lines if "so it would go to the incumbent %s, which reaches its peers through NCCL" % inc in l]
if shared:
    assert not routed and notes, (routed, notes)
else:
    assert routed and not notes, (routed, notes)
print("%d rows, %d routed to %s, %d probes left out" % (len(rows), len(routed), inc, len(notes)))
PY
}
AR=collective.allreduce_residual_rmsnorm
shared=$([ "$ngpu" -lt 2 ] && echo 1 || echo 0)
for cand in ipc_oneshot_fused ipc_twoshot_fused; do
    v --target $AR --variant $cand --checks 1 --seed 7
    [ "$RC" = 0 ] || fail "verify --target of $cand exited $RC"
    has "^bracket verify: $cand on $AR, backend cuda, lane of 2, 1 check\(s\), tolerance rtol 0.01 atol 0.01" ||
        fail "$cand: not the cuda lane of 2 at 1e-2"
    has "^7 +0 +8 +4096 +$cand " || fail "$cand: the typical shape (8 x 4096) is not shape 0"
    rows 7 nccl_then_rmsnorm $shared
    has "^PASSED: 0 failing" || fail "$cand: no PASSED line"
done
if [ "$shared" = 1 ]; then
    # the routing past the domain, checked where NCCL can run here: a lane of 1
    v --target $AR --variant ipc_twoshot_fused --checks 1 --seed 9 --world 1
    [ "$RC" = 0 ] || fail "verify --target of ipc_twoshot_fused at a lane of 1 exited $RC"
    rows 9 nccl_then_rmsnorm 0
    # every shape would go to the NCCL incumbent on a lane sharing the GPU: nothing to run
    v --target $AR --variant ipc_oneshot_fused --no-domain-shapes \
        --set 'workload.shapes=[{"tokens":600,"hidden":4096,"weight":1}]'
    [ "$RC" = 2 ] || fail "only shapes for the NCCL incumbent on one GPU: exit $RC, expected 2"
    has "^shape tokens 600, hidden 4096 left out: outside the candidate's domain, so it would go to the incumbent nccl_then_rmsnorm" &&
        has "no shape left to verify" || fail "only shapes for the NCCL incumbent on one GPU: not said why"
fi
# the MoE candidates reach their peers through NCCL: by default a lane of 2 where two GPUs
# are, else of 1; a lane of 2 asked for on one GPU is refused before any engine starts
w=$([ "$shared" = 1 ] && echo 1 || echo 2)
v --target moe.fused_experts_reduce --variant moe_fused_combine_cuda --checks 1 --seed 7
[ "$RC" = 0 ] || fail "verify --target of moe_fused_combine_cuda exited $RC"
has "backend cuda, lane of $w," || fail "moe: not the cuda lane of $w"
has "^7 +0 +4 +256 +8 +2 +64 +moe_fused_combine_cuda " || fail "moe: the typical shape is not shape 0"
rows 7 moe_serial_cuda 0
if [ "$shared" = 1 ]; then
    v --target moe.fused_experts_reduce --variant moe_fused_combine_cuda --world 2
    [ "$RC" = 2 ] || fail "moe at --world 2 on one GPU: exit $RC, expected 2"
    has "the candidate moe_fused_combine_cuda reaches its peers through NCCL \(one GPU a rank\), and the lane of 2 shares 1 GPU here: give --world 1 or less" ||
        fail "moe at --world 2 on one GPU: not refused with the reason"
fi
# --target T alone: each cuda variant of T, on cuda (the backend auto picks with a GPU)
v --target $AR --checks 1 --seed 11 --no-domain-shapes
[ "$RC" = 0 ] || fail "verify --target $AR alone exited $RC"
has "^bracket verify: --target $AR: its 3 variant\(s\) on backend cuda" ||
    fail "--target alone: not the 3 cuda variants"
for cand in nccl_then_rmsnorm ipc_oneshot_fused ipc_twoshot_fused; do
    has "^  $cand +PASSED$" || fail "--target alone: $cand did not pass"
done
has "^PASSED: all 3 variant\(s\)$" || fail "--target alone: no PASSED line"
[ "$(grep -c "graph==eager" "$IT_TMP/v.log")" = 3 ] || fail "--target alone: not a table a variant"
v --target moe.fused_experts_reduce --checks 1 --seed 11 --no-domain-shapes
[ "$RC" = 0 ] && has "^PASSED: all 3 variant\(s\)$" ||
    fail "--target moe alone: exit $RC, or not all 3 cuda variants passed"
# the PLAN form, at the demo plan's lane for this machine
v "$plan" "${sets[@]}" --checks 1 --seed 8
[ "$RC" = 0 ] || fail "verify of $plan exited $RC"
has "^PASSED: 0 failing" || fail "$plan: no PASSED line"
if pgrep -f "bracket engine .*verify-" >/dev/null; then fail "engines left behind"; fi
echo "PASS: verify on cuda"
