#!/usr/bin/env bash
# moe-gpu-run.sh - on the GPU machine, in one call: build the moe GPU tests and benchmark,
# run the tests (the lanes of 2, 4 and 8 GPUs as the machine allows, the others say SKIP),
# build a sabotaged copy (the fused combine loses its residual) that must FAIL the test,
# run bench_moe, then the PyTorch side-by-side of the top-k sum.
#   tests/gpu/moe-gpu-run.sh [BENCH_ITERS]     (logs and tables under $OUT, default ./gpu-out)
# The bundled libraries and NCCL are found as scripts/gpu-env.sh says.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$src/gpu-out}
iters=${1:-10}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
. "$src/scripts/gpu-env.sh"
trap pack_out EXIT # all of $out also in $out/0-all.tgz
echo "=== build $(date -u +%T)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
build_tree "$src" /tmp/moe-build gpu_test_moe_cuda gpu_test_moe_cuda_lanes bench_moe >"$out/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
# the sabotaged copy builds while the GPU runs
broke=0
sabotage_tree /tmp/moe-broken kernels/moe_cuda.c \
  's/res ? (const uint16_t \*)call->t\[BK_MOE_RESIDUAL\]/res \&\& 0 ? (const uint16_t *)call->t[BK_MOE_RESIDUAL]/' \
  && broke=1
(build_tree /tmp/moe-broken /tmp/moe-broken-build gpu_test_moe_cuda >"$out/break-build.log" 2>&1) &
bpid=$!
echo "=== test $(date -u +%T)"
/tmp/moe-build/tests/gpu_test_moe_cuda 2>&1 | tee "$out/test.log" | grep -vE "^\[ (RUN|  +OK) " ; rc=${PIPESTATUS[0]}
echo "=== lanes $(date -u +%T)"
/tmp/moe-build/tests/gpu_test_moe_cuda_lanes 2>&1 | tee "$out/lanes.log" | grep -vE "^\[ (RUN|  +OK) "
lrc=${PIPESTATUS[0]}
[ "$lrc" = 0 ] || [ "$lrc" = 77 ] || rc=1
echo "=== bench $(date -u +%T)"
/tmp/moe-build/tests/bench_moe "$iters" 2>&1 | tee "$out/bench.txt"
echo "=== break $(date -u +%T)"
wait $bpid
if [ "$broke" = 1 ]; then
  sabotage_caught /tmp/moe-broken-build/tests/gpu_test_moe_cuda "$out/break.log" "combine" \
    "ERROR|out\[" || rc=1
else
  rc=1
fi
echo "=== torch $(date -u +%T)"
PYTHONUNBUFFERED=1 timeout 150 python3 "$src/tests/bench/torch_moe_combine.py" 2>&1 | tee "$out/torch.txt" | grep -v Warning
echo "=== done rc=$rc $(date -u +%T)"
exit $rc
