#!/usr/bin/env bash
# moe-gpu-run.sh - on the GPU machine, in one call: build the moe GPU test and benchmark,
# run the test, build a sabotaged copy (the fused combine loses its residual) that must
# FAIL the test, run bench_moe, then the PyTorch side-by-side of the top-k sum.
#   tests/gpu/moe-gpu-run.sh [BENCH_ITERS]     (logs and tables under $OUT, default ./gpu-out)
# BK_DEPS: the bundled ZeroMQ/msgpack/jansson/cmocka (../shared/gpu-host/bundle-deps),
# default ../.gpu-deps/root or ./.gpu-deps/root.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$src/gpu-out}
iters=${1:-10}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
for d in "$src/.gpu-deps/root" "$src/../.gpu-deps/root"; do
  [ -z "${BK_DEPS:-}" ] && [ -d "$d" ] && BK_DEPS=$(cd "$d" && pwd)
done
export LD_LIBRARY_PATH=$BK_DEPS/usr/lib/x86_64-linux-gnu:$BK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PKG_CONFIG_SYSROOT_DIR=$BK_DEPS PKG_CONFIG_PATH=/tmp/moe-pc
rm -rf /tmp/moe-pc && mkdir -p /tmp/moe-pc
for f in "$BK_DEPS"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
  sed -e '/^Requires.private/d' -e 's#^libdir=${exec_prefix}/lib$#libdir=${exec_prefix}/lib/x86_64-linux-gnu#' \
    "$f" >"/tmp/moe-pc/$(basename "$f")"
done
build() { # build SRC BUILD TARGET...
  local s=$1 b=$2; shift 2
  rm -f "$b/CMakeCache.txt"
  cmake -S "$s" -B "$b" -G Ninja -DBK_CUDA=ON -DBK_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" >"$b.cmake.log" 2>&1 \
    || { tail -20 "$b.cmake.log"; return 1; }
  cmake --build "$b" -j "$(nproc)" --target "$@"
}
echo "=== build $(date -u +%T)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
build "$src" /tmp/moe-build gpu_test_moe_cuda bench_moe >"$out/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
# the sabotaged copy builds while the GPU runs
rm -rf /tmp/moe-broken && mkdir -p /tmp/moe-broken
(cd "$src" && tar --exclude=./gpu-out --exclude=./build --exclude=./.gpu-deps -cf - .) | (cd /tmp/moe-broken && tar -xf -)
sed -i 's/res ? (const uint16_t \*)call->t\[BK_MOE_RESIDUAL\]/res \&\& 0 ? (const uint16_t *)call->t[BK_MOE_RESIDUAL]/' \
  /tmp/moe-broken/kernels/moe_cuda.c
(build /tmp/moe-broken /tmp/moe-broken-build gpu_test_moe_cuda >"$out/break-build.log" 2>&1) &
bpid=$!
echo "=== test $(date -u +%T)"
/tmp/moe-build/tests/gpu_test_moe_cuda 2>&1 | tee "$out/test.log" | grep -vE "^\[ (RUN|  +OK) " ; rc=${PIPESTATUS[0]}
echo "=== bench $(date -u +%T)"
/tmp/moe-build/tests/bench_moe "$iters" 2>&1 | tee "$out/bench.txt"
echo "=== break $(date -u +%T)"
wait $bpid
if diff -q "$src/kernels/moe_cuda.c" /tmp/moe-broken/kernels/moe_cuda.c >/dev/null; then
  echo "break: the sabotage did not apply"; rc=1
elif [ ! -x /tmp/moe-broken-build/tests/gpu_test_moe_cuda ]; then
  echo "break: the sabotaged copy did not build"; tail -5 "$out/break-build.log"; rc=1
else
  /tmp/moe-broken-build/tests/gpu_test_moe_cuda >"$out/break.log" 2>&1
  brc=$?
  if [ $brc = 0 ] || [ $brc = 77 ]; then
    echo "break: the sabotaged combine was not caught by the GPU test (exit $brc)"; rc=1
  else
    echo "break: the sabotaged combine fails the GPU test, as it must:"
    grep -m3 -E "ERROR|out\[" "$out/break.log"
  fi
fi
echo "=== torch $(date -u +%T)"
PYTHONUNBUFFERED=1 timeout 150 python3 "$src/tests/bench/torch_moe_combine.py" 2>&1 | tee "$out/torch.txt" | grep -v Warning
echo "=== done rc=$rc $(date -u +%T)"
exit $rc
