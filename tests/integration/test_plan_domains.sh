#!/usr/bin/env bash
# What a plan's variants serve, checked before anything runs: the incumbent (the serving
# stack) must serve the lane and every shape, `plan check` and `run` refuse it otherwise
# (exit 2, naming the shape or the lane and the edge); a diagnostic wrapper serves its
# base's domain (on cpu through its default base where the base cannot, said; on cuda
# refused); crash's default at_iter is checked; the lane size, not the shapes, is named when
# it is what a candidate's domain excludes; the memory refusal says what holds the memory;
# a shape's size past 2^31 elements is said without overflow; a missing digest states its
# rule; a quality tolerance below the NCCL incumbent's own rounding is warned of.
. "$(dirname "$0")/lib.sh"
set -e
CPU=$BK_SOURCE_DIR/plans/demo-cpu.json
CUDA=$BK_SOURCE_DIR/plans/demo-cuda.json
INC=(--set incumbent.variant=shm_oneshot_fused --set candidate.variant=shm_twopass)

# pc NAME WANT-RC PLAN ARGS...: `bracket plan check`, its output in $IT_TMP/NAME.log
pc() {
    local name=$1 want=$2
    shift 2
    set +e
    timeout 60 "$BK_BRACKET" plan check "$@" >"$IT_TMP/$name.log" 2>&1
    local rc=$?
    set -e
    echo "---- $name: exit $rc"
    cat "$IT_TMP/$name.log"
    [ "$rc" = "$want" ] || fail "$name: exit $rc, expected $want"
}
has() { # NAME TEXT: the log of NAME holds TEXT (fixed string)
    grep -qF -- "$2" "$IT_TMP/$1.log" || fail "$1: lacks '$2'"
}
lacks() {
    ! grep -qF -- "$2" "$IT_TMP/$1.log" || fail "$1: says '$2'"
}

# 1. the incumbent's domain: a shape past its tokens, hidden not its multiple, a lane too big
pc inc-tokens 2 "$CPU" "${INC[@]}" --set 'workload.shapes[1].tokens=513'
has inc-tokens "demo-cpu.json: workload.shapes[1]: outside the domain of the incumbent shm_oneshot_fused (tokens 513 > max 512), got tokens 513, hidden 4096; the incumbent is the serving stack and must serve every call of the workload, so the plan is refused"
lacks inc-tokens "valid"
pc inc-hidden 2 "$CPU" "${INC[@]}" --set 'workload.shapes[1].hidden=4100'
has inc-hidden "workload.shapes[1]: outside the domain of the incumbent shm_oneshot_fused (hidden 4100 not a multiple of 8)"
pc inc-lane 2 "$CPU" "${INC[@]}" --set arena.tp=16
has inc-lane "arena.tp x arena.ep: the lane size is outside the domain of the incumbent shm_oneshot_fused (worlds 1-8), got 16 x 1 = 16"
# ... and `run` refuses it before any engine starts: exit 2, the same words, no record
it_run inc-run 4 "$IT_PLAN" "${INC[@]}" --set 'workload.shapes[1].tokens=513'
[ "$RC" = 2 ] || fail "inc-run: exit $RC, expected 2"
grep -qF "workload.shapes[1]: outside the domain of the incumbent shm_oneshot_fused (tokens 513 > max 512)" "$OUT" ||
    fail "inc-run: the refusal does not name the shape and the edge"
[ -z "$RECORD" ] || fail "inc-run: a record was written"
! grep -q "^arm \|engine" "$OUT" || fail "inc-run: an arm ran"

# 2. crash at its default at_iter (10) with 10 timed iterations would never crash
pc crash-dflt 2 "$CPU" --set candidate.variant=crash --set workload.iters=10
has crash-dflt "candidate.params.at_iter: not given, and the default, 10, is past the last timed iteration (workload.iters is 10: 0..9), so nothing would crash"
pc crash-ok 0 "$CPU" --set candidate.variant=crash --set workload.iters=11

# 3. a diagnostic serves its base's domain: on cpu, outside it, the default base (said)
pc slowed-cpu 0 "$CPU" --set candidate.variant=slowed \
    --set 'candidate.params={"base":"shm_oneshot_fused"}' --set 'workload.shapes[1].tokens=600'
has slowed-cpu "workload.shapes[1]: outside the domain of candidate.params.base shm_oneshot_fused (tokens 600 > max 512): slowed wraps its default base shm_twopass there instead"
lacks slowed-cpu "workload.shapes[0]"
"$BK_BRACKET" plan variants >"$IT_TMP/variants.log"
grep -A2 "^  slowed$" "$IT_TMP/variants.log" | grep -qF "domain: its base's (params.base; on cpu default shm_twopass" ||
    fail "plan variants gives slowed a domain of its own"
if grep -q "^  ipc_oneshot_fused$" "$IT_TMP/variants.log"; then
    # on cuda there is no default base: a lane or shape the base cannot serve is refused
    SL=(--set candidate.variant=slowed --set 'candidate.params={"base":"ipc_oneshot_fused"}')
    pc slowed-cuda-lane 2 "$CUDA" "${SL[@]}" --set arena.tp=3
    has slowed-cuda-lane "arena.tp x arena.ep: the lane size is outside the domain of the candidate slowed's base ipc_oneshot_fused (worlds 1-2,4,8), got 3 x 1 = 3; slowed wraps its base for every shape and has no default base on cuda"
    pc slowed-cuda-tokens 2 "$CUDA" "${SL[@]}" --set 'workload.shapes[3].tokens=4096'
    has slowed-cuda-tokens "workload.shapes[3]: outside the domain of the candidate slowed's base ipc_oneshot_fused (tokens 4096 > max 128)"
    pc slowed-cuda-ok 0 "$CUDA" "${SL[@]}"
    # the cuda incumbent's domain too (hidden 8..16384)
    pc inc-cuda 2 "$CUDA" --set 'workload.shapes[0].hidden=16392'
    has inc-cuda "workload.shapes[0]: outside the domain of the incumbent nccl_then_rmsnorm (hidden 16392 > max 16384)"
    # a tolerance below the NCCL incumbent's own bf16 rounding at TP 8 is warned of; the
    # plan stays valid (the validator owns the tolerance); at TP 2 it is not
    pc sum-tp8 0 "$CUDA" --set arena.tp=8
    has sum-tp8 "valid"
    has sum-tp8 "warning: the incumbent nccl_then_rmsnorm sums the ranks' x in bf16 (a bf16 allreduce); replayed on the CPU on a sample of this plan's inputs at 8 ranks, its residual_out strays from the exact sum by 2.71 x the quality tolerance or more (rtol 0.01, atol 0.01; the worst sampled element in shape 2, 32 x 6144)"
    pc sum-tp2 0 "$CUDA"
    lacks sum-tp2 "warning"
else
    echo "SKIPPED: test_plan_domains' cuda checks: this build has no cuda variants"
fi

# 4. too big for rank 0: the audit outputs of one big shape, not the samples, hold it
# (lanes of 64: 2 outputs x 2^31 elements x 2 B x 64 ranks x A and T = 1 TiB)
pc mem-outputs 2 "$CPU" --set candidate.variant=shm_twopass --set arena.tp=64 \
    --set 'workload.shapes[0].tokens=2097152' --set 'workload.shapes[0].hidden=1024'
has mem-outputs "1024.1 GiB for the audit outputs"
has mem-outputs "lower tokens x hidden of the largest shapes (workload.shapes[0], tokens 2097152 x hidden 1024, holds 1024.0 GiB of the audit outputs)"
lacks mem-outputs "lower workload.iters"
pc mem-samples 2 "$IT_PLAN" --set workload.iters=10000000 --set protocol.repeats=16 --set arena.tp=64
has mem-samples "1049.0 GiB for the samples"
has mem-samples "lower workload.iters, protocol.repeats or the number of shapes"

# 5. tokens x hidden past 2^31 elements, said without wrapping
pc size-wrap 2 "$CPU" --set 'workload.shapes[0].tokens=4611686018427387905' --set 'workload.shapes[0].hidden=8'
has size-wrap "workload.shapes[0]: tokens x hidden must be at most 2^31 = 2147483648 elements, got 4611686018427387905 x 8 = 3.689348815e+19"
pc size-max 2 "$CPU" --set 'workload.shapes[0].tokens=9223372036854775807'
has size-max "got 9223372036854775807 x 4096 = 3.777893186e+22"
lacks size-max "= -"

# 6. the lane size, not the shapes, is what the candidate's domain excludes at tp 16
pc cand-lane 2 "$CPU" --set arena.tp=16
has cand-lane "arena.tp x arena.ep: the lane size is outside the domain of the candidate shm_oneshot_fused (worlds 1-8), got 16 x 1 = 16, so the candidate serves none of the workload"
lacks cand-lane "each lies outside its domain"
# ... while shapes that are each outside are still said to be, with their edges
pc cand-shapes 2 "$IT_PLAN" --set 'workload.shapes=[{"tokens":600,"hidden":1024,"weight":1}]'
has cand-shapes "workload.shapes: the candidate shm_oneshot_fused serves none of them (each lies outside its domain: [0]: tokens 600 > max 512;"

# 7. a missing source digest is told the rule
sed '/"source_digest"/d' "$CPU" >"$IT_TMP/nodigest.json"
pc digest 2 "$IT_TMP/nodigest.json"
has digest "candidate.source_digest: missing (\"sha256:\" followed by 64 lowercase hex digits)"
# 8. a candidate serving part of the workload: the routed shapes are named, each with its
# reason, and a share of nearly all or nearly none never reads 100.0% or 0.0%
pc routed 0 "$CPU" --set 'workload.shapes=[{"tokens":1,"hidden":4096,"weight":9999},{"tokens":600,"hidden":4096,"weight":1}]'
has routed "candidate serves more than 99.9% of the workload)"
has routed "  workload.shapes[1]: outside the candidate's domain (tokens 600 > max 512): the incumbent shm_twopass serves it in arm C too"
lacks routed "shapes[0]: outside"
pc routed-few 0 "$CPU" --set 'workload.shapes=[{"tokens":1,"hidden":4096,"weight":1},{"tokens":600,"hidden":4096,"weight":9999}]'
has routed-few "candidate serves less than 0.1% of the workload)"
pc routed-none 0 "$CPU"
lacks routed-none "outside the candidate's domain"
has routed-none "candidate serves 100.0% of the workload)"
# graph mode on a cpu plan is noted as the cuda backend's; eager is not noted
pc graph-cpu 0 "$CPU" --set arena.graph_mode=graph
has graph-cpu "  note: arena.graph_mode \"graph\" is the cuda backend's (a CUDA graph of the timed step); the cpu engines call every step eagerly"
lacks routed-none "arena.graph_mode"
lacks routed-none "timed eagerly" # a cpu plan of decode, eager: not noted
# decode timed eagerly on the cuda backend is noted (the arena's guide: a graph-off gain is
# evidence about a debugging mode); a build without cuda refuses a cuda plan
if "$BK_BRACKET" --version | grep -q "backends in this build: cpu cuda"; then
    pc eager-cuda 0 "$BK_SOURCE_DIR/plans/demo-cuda.json" --set arena.graph_mode=eager
    has eager-cuda "  note: decode is timed eagerly (arena.graph_mode \"eager\"; a plan without it gets eager): serving stacks replay decode steps as CUDA graphs"
    pc graph-cuda 0 "$BK_SOURCE_DIR/plans/demo-cuda.json"
    lacks graph-cuda "timed eagerly"
    pc prefill-cuda 0 "$BK_SOURCE_DIR/plans/moe-prefill.json"
    lacks prefill-cuda "timed eagerly"
else
    echo "SKIPPED: test_plan_domains' eager-decode note of a cuda plan: this build has no cuda backend"
fi
# 9. --backend is checked before the plan is read, and a backend this build lacks is the
# flag's, not the plan's field
pc backend-bad 2 "$IT_TMP/no-such-plan.json" --backend bogus
has backend-bad "bracket plan check: --backend: 'bogus' is not cpu, cuda or auto"
if ! "$BK_BRACKET" --version | grep -q "backends in this build: cpu cuda"; then
    pc backend-lack 2 "$CPU" --backend cuda
    has backend-lack "bracket plan check: --backend cuda: this bracket was built without its cuda backend"
fi
echo "PASS: plan domains"
