#!/usr/bin/env bash
# One cuda engine of a lane hangs (SIGSTOP, as a wedged process would) while arm C runs
# (label gpu). Its peer's host wait ends a fifth of timeouts.arm_s (10 s at most) before the
# agent's time-out (arm_s 80: at 70 s), asks the GPU's own waits to give up (theirs would
# run to rendezvous_s, 60 s from each wait's start, here), and fails naming the hung lane
# rank ("peer rank R did not arrive ... the arm's time ran out"); the runner then kills the
# hung engine, not its agent's time-out. NO_DECISION, the record intact, nothing left
# behind. Before, the peer's GPU barrier spun on to its own bound and the agent killed both
# engines at arm_s ("engine timed out"), naming no one.
# The stop comes 10 s into C, past the engines' set-up (CUDA, the rendezvous, the peer
# memory and NCCL's init where the lane has one: a few seconds; the arm's end cuts them
# too, but a peer stopped there is named by no one), and C must still run then: in its
# warm-up, settle or timed batches, which the arm's end cuts, naming the peer.
# C is `slowed` over ipc_oneshot_fused: its barriers are the lane's own (not NCCL's, which
# spins until aborted and names no peer). Lanes shared (a rehearsal):
# - 2 GPUs or more: a lane of every GPU, 200000 iterations a shape;
# - one GPU: a lane of two engine processes on it (CUDA IPC between processes of one
#   device), the incumbent ipc_twoshot_fused (NCCL refuses two ranks on one GPU). The two
#   take turns on the GPU (time slices): a step costs about 4.5 ms and an engine takes
#   12-18 s from its start to its first timed iteration, mostly its settle batches (H100,
#   session 47), so one shape of 4000 iterations: B about 40 s; C, with a wait as long
#   as the step again (fraction 1), would take longer (not measured: it never ends here).
# Skips (exit 77) with the reason where there is no GPU or no cuda build.
. "$(dirname "$0")/../integration/fault_lib.sh"
set -e
. "$(dirname "$0")/gpu_lib.sh"
if [ "$ngpu" -ge 2 ]; then
    n=$ngpu
    lane=(--set workload.iters=200000
          --set 'candidate.params={"base":"ipc_oneshot_fused","fraction":10}')
else
    n=2
    lane=(--set incumbent.variant=ipc_twoshot_fused --set workload.iters=4000
          --set 'workload.shapes=[{"tokens":8,"hidden":6144,"weight":1}]'
          --set 'candidate.params={"base":"ipc_oneshot_fused","fraction":1}')
fi
it_start hang-cuda "$n" "$plan" --set arena.tp="$n" --set lanes.policy=shared \
    --set timeouts.arm_s=80 --set timeouts.rendezvous_s=60 --set protocol.repeats=1 \
    --set candidate.variant=slowed "${lane[@]}"
wait_engines C "$n"
sleep 10 # past C's set-up, inside its time_shape (warm-up, settle or timed batches)
[ "$(engine_pids C | grep -c .)" -ge "$n" ] ||
    fail "C's engines ended within 10 s: nothing to hang (give C more iterations)"
HUNG=$(echo "$EPIDS" | head -n 1)
kill -STOP "$HUNG"
it_wait
kill -CONT "$HUNG" 2>/dev/null || true
expect_verdict NO_DECISION 4
# its peers waited to 70 s of their lives (80 s less 10), and ended before their agents' 80 s
expect_hang_named "$HUNG" "$n" "peer rank %d did not arrive" 60 80
kill -0 "$HUNG" 2>/dev/null && fail "the hung engine $HUNG is still there"
expect_rescore
expect_no_leftovers
expect_no_private_dirs
echo "PASS: a hung cuda engine is named by its peers before timeouts.arm_s, then killed"
