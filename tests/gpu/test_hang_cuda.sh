#!/usr/bin/env bash
# One cuda engine of a lane hangs (SIGSTOP, as a wedged process would) while arm C runs
# (label gpu; needs 2 GPUs or more: a lane of one GPU has no peer to wait for). Its peer's
# host wait ends a fifth of timeouts.arm_s (10 s at most) before the agent's time-out
# (arm_s 80: at 70 s), asks the GPU's own waits to give up (theirs would run to
# rendezvous_s, 60 s from each wait's start, here), and
# fails naming the hung lane rank ("peer rank R did not arrive ... the arm's time ran out");
# the runner then kills the hung engine, not its agent's time-out. NO_DECISION, the record
# intact, nothing left behind. Before, the peer's GPU barrier spun on to its own bound and
# the agent killed both engines at arm_s ("engine timed out"), naming no one.
# The stop comes 10 s into C (past CUDA's, the rendezvous' and NCCL's set-up, which the
# arm's end does not cut), and C must still run then (200000 iterations a shape).
# C is `slowed` over ipc_oneshot_fused: its barriers are the lane's own (not NCCL's, which
# spins until aborted and names no peer). Lanes shared over every GPU (a rehearsal).
# Skips (exit 77) with the reason where there is no GPU, one GPU or no cuda build.
. "$(dirname "$0")/../integration/fault_lib.sh"
set -e
. "$(dirname "$0")/gpu_lib.sh"
if [ "$ngpu" -lt 2 ]; then
    echo "SKIP: $ngpu GPU: a hung lane peer needs a lane of 2 GPUs or more"
    exit 77
fi
it_start hang-cuda "$ngpu" "$plan" --set arena.tp="$ngpu" --set lanes.policy=shared \
    --set timeouts.arm_s=80 --set timeouts.rendezvous_s=60 --set protocol.repeats=1 \
    --set workload.iters=200000 --set candidate.variant=slowed \
    --set 'candidate.params={"base":"ipc_oneshot_fused","fraction":10}'
wait_engines C "$ngpu"
sleep 10 # inside C's timed loop, past its start-up
[ "$(engine_pids C | grep -c .)" -ge "$ngpu" ] ||
    fail "C's engines ended within 10 s: nothing to hang (give C more iterations)"
HUNG=$(echo "$EPIDS" | head -n 1)
kill -STOP "$HUNG"
it_wait
kill -CONT "$HUNG" 2>/dev/null || true
expect_verdict NO_DECISION 4
# its peers waited to 70 s of their lives (80 s less 10), and ended before their agents' 80 s
expect_hang_named "$HUNG" "$ngpu" "peer rank %d did not arrive" 60 80
kill -0 "$HUNG" 2>/dev/null && fail "the hung engine $HUNG is still there"
expect_rescore
expect_no_leftovers
expect_no_private_dirs
echo "PASS: a hung cuda engine is named by its peers before timeouts.arm_s, then killed"
