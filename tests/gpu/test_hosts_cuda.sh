#!/usr/bin/env bash
# Cuda lanes over hosts (label gpu): four ranks, each on a host of its own (rank 0 here,
# ranks 1-3 in UTS namespaces named bk-node-1..3), so bracket and NCCL take them for four
# hosts (NCCL's host hash is the hostname's) while all use this machine's GPU 0. A TP 2 A/A
# of nccl_then_rmsnorm on disjoint lanes, each over two of the hosts, must run every arm:
# the lane note says so, the engines map no peer memory, NCCL joins each lane's two "hosts"
# over its network transport (sockets on lo) and the lane barrier is an NCCL allreduce.
# The same lanes with the IPC candidate are refused before any engine starts.
# Slow by nature, and no measure of speed: the two ranks' NCCL kernels take turns on the one
# GPU (time slices), so each allreduce step waits for the peer's turn (an eager step took
# about 110 ms, a graph step 7 ms on the H200), hence one shape, 25 iterations an arm and
# no settling batches (BK_CUDA_SETTLE=0; by default 32 x 64 untimed steps).
# The engines must not gate their batches here: the lane barrier is an eager NCCL call,
# whose enqueue waits for the GPU, so a gated batch waited out the gate's 1 s bound (found
# by this test: 33 such batches an arm, warned as "batches waited").
# Needs root for unshare --uts; skips (exit 77) with the reason without it, a GPU or cuda.
. "$(dirname "$0")/../integration/fault_lib.sh"
set -e
. "$(dirname "$0")/gpu_lib.sh"
need_uts
export BK_CUDA_SETTLE=0 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
common=(--set arena.tp=2 --set workload.iters=20
        --set workload.warmup_iters=5 --set protocol.repeats=1 --iface lo
        --set 'workload.shapes=[{"tokens":8,"hidden":6144,"weight":1}]')
uts_hosts aa 4 "$plan" "${common[@]}" --set candidate.variant=nccl_then_rmsnorm
case $RC in 0|3|4) ;; *) fail "exit $RC is not a verdict" ;; esac
grep -q "NET/Socket" "$OUT" || fail "NCCL did not use its network transport between the hosts"
grep -q "batches waited" "$OUT" && fail "batches waited for a gate on a lane whose barrier is NCCL's"
python3 - "$RECORD" "$(hostname)" <<'PY' || fail "the record does not show lanes over two hosts"
import json, sys
r = json.load(open(sys.argv[1]))
hosts = [sys.argv[2], "bk-node-1", "bk-node-2", "bk-node-3"]
assert r["identity"]["hosts"] == hosts, r["identity"]["hosts"]
assert "each lane spans hosts" in r["lanes"]["note"], r["lanes"]["note"]
assert sorted(r["lanes"]["baseline"] + r["lanes"]["candidate"]) == [0, 1, 2, 3], r["lanes"]
want = r["plan"]["workload"]["iters"] * len(r["plan"]["workload"]["shapes"])
for a in r["arms"]:
    if not a["ran"]:
        continue
    assert a["ok"], a
    lane = r["lanes"]["candidate" if a["name"] in ("C", "A") else "baseline"]
    assert sorted(p["host"] for p in a["processes"]) == sorted(hosts[i] for i in lane), a
    for p in a["processes"]:
        assert p["engine_settings"].startswith("gate=0 "), p["engine_settings"]
    if not a["audit"]:
        for p in a["processes"]:
            assert p["samples_received"] == p["samples_sent"] == want, p
assert r["verdict"] in ("PASS", "FAIL", "NO_DECISION"), r["verdict"]
# tcp without a broken connection: no engine sent its samples, audit tensors or hello again
assert r["wire"]["repeated"] == r["wire"]["repeated_tensors"] == r["wire"]["repeated_hellos"] == 0, r["wire"]
PY
expect_rescore
expect_no_leftovers
expect_no_private_dirs
# the demo's candidate maps peer memory: refused on that lane, nothing started
uts_hosts ipc 4 "$plan" "${common[@]}"
[ "$RC" = 2 ] || fail "the IPC candidate on a lane over hosts: expected exit 2, got $RC"
grep -q "the candidate ipc_oneshot_fused needs CUDA peer memory, which is one host's" "$OUT" ||
    fail "the IPC candidate on a lane over hosts: unclear error"
grep -q "NET/Socket" "$OUT" && fail "an engine started for a refused plan"
echo "PASS: cuda lanes over two hosts each run NCCL between them; an IPC candidate there is refused"
