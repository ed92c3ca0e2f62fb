#!/usr/bin/env bash
# gpu-run.sh - build, test and benchmark bracket's cuda backend on a GPU machine that has
# CUDA, NCCL, Open MPI and hwloc but no ZeroMQ, msgpack-c, jansson or cmocka, in one call.
#
#   scripts/gpu-run.sh [STEP...]        STEP: build test break bench torch ipc
#                                       (default: build test break bench torch)
#
# Environment:
#   BK_DEPS    the bundled libraries (made here by ../shared/gpu-host/bundle-deps DIR on a
#              Debian machine; DIR/root). Default: the first of ./.gpu-deps/root and
#              ../.gpu-deps/root that exists.
#   BK_BUILD   build directory (default /tmp/bk-build: outside the tree, so it survives a
#              re-sent working tree while the machine stays up)
#   OUT        where logs and tables go (default ./gpu-out)
#   BK_STEP    token multiplier of the benchmark tables (default 2: 1, 2, 4 ... 16384)
#   BK_SWEEP   set: bench_rmsnorm also sweeps launch configurations (--sweep)
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is exported for every step.
#
# Steps: build (cmake + ninja, all cores), test (ctest -L gpu, then the unit tests),
# break (a copy of the tree with the one-shot kernel's residual add removed must FAIL the
# GPU test: proves the test can fail), bench (bench_rmsnorm table + CSV), torch (the same
# shapes through torch.compile and eager, side by side with bench's CSV), ipc (nccl_then_rmsnorm
# against the two IPC variants across GPUs at worlds 2, 4, 8 as far as the machine's GPUs go;
# skipped on a one-GPU machine).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
step=${BK_STEP:-2}
steps=${*:-build test break bench torch}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0

if [ -z "${BK_DEPS:-}" ]; then
  for d in "$src/.gpu-deps/root" "$src/../.gpu-deps/root"; do
    [ -d "$d" ] && BK_DEPS=$(cd "$d" && pwd) && break
  done
fi
if [ -n "${BK_DEPS:-}" ]; then
  export BK_DEPS
  export LD_LIBRARY_PATH=$BK_DEPS/usr/lib/x86_64-linux-gnu:$BK_DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_SYSROOT_DIR=$BK_DEPS
  # The bundle carries libzmq.pc but not the .pc files of its private requirements
  # (libsodium, krb5-gssapi, ...), which pkg-config insists on; drop Requires.private.
  pcdir=/tmp/bk-pkgconfig
  rm -rf "$pcdir" && mkdir -p "$pcdir"
  for f in "$BK_DEPS"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    # (and msgpack.pc names /usr/lib where Debian puts the library in the multiarch dir)
    sed -e '/^Requires.private/d' -e 's#^libdir=${exec_prefix}/lib$#libdir=${exec_prefix}/lib/x86_64-linux-gnu#' \
      "$f" >"$pcdir/$(basename "$f")"
  done
  export PKG_CONFIG_PATH=$pcdir
fi

# NCCL: the toolkit's, else the one PyTorch's wheel carries.
nccl_args=()
if ! ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h >/dev/null 2>&1; then
  py_nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  if [ -n "$py_nccl" ] && [ -f "$py_nccl/include/nccl.h" ]; then
    lib=$(ls "$py_nccl"/lib/libnccl.so* | head -1)
    nccl_args=(-DBK_NCCL_INC="$py_nccl/include" -DBK_NCCL_LIB="$lib")
    export LD_LIBRARY_PATH=$py_nccl/lib:$LD_LIBRARY_PATH
  fi
fi

build_tree() { # build_tree SRC BUILD [TARGET...]
  local s=$1 b=$2; shift 2
  rm -f "$b/CMakeCache.txt" # pkg-config answers are cached: always ask again
  cmake -S "$s" -B "$b" -G Ninja -DBK_CUDA=ON -DBK_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    "${nccl_args[@]}" >"$out/cmake-$(basename "$b").log" 2>&1 || { tail -30 "$out/cmake-$(basename "$b").log"; return 1; }
  cmake --build "$b" -j "$(nproc)" ${1:+--target "$@"}
}

rc=0
for s in $steps; do
  echo "=== $s ($(date -u +%H:%M:%S))"
  case $s in
  build)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
    build_tree "$src" "$build" 2>&1 | tee "$out/build.log" | grep -E "error|warning|FAILED" | head -40
    [ -x "$build/tests/gpu_test_cuda_ipc" ] || { echo "build failed"; exit 1; }
    ;;
  test)
    (cd "$build" && ctest -L gpu --output-on-failure --timeout 300 2>&1) | tee "$out/test-gpu.log" | tail -40 || rc=1
    (cd "$build" && ctest -L unit --output-on-failure 2>&1) | tee "$out/test-unit.log" | tail -5 || rc=1
    ;;
  break)
    rm -rf /tmp/bk-broken && mkdir -p /tmp/bk-broken
    (cd "$src" && tar --exclude=./gpu-out --exclude=./build -cf - .) | (cd /tmp/bk-broken && tar -xf -)
    # one-shot kernel: drop the residual add
    perl -0pi -e 's/(bk_oneshot_kernel\(.*?)        bk__add_row<VPT, false>\(acc, residual \+ off, nvec\);\n/$1/s' \
      /tmp/bk-broken/kernels/ar_rmsnorm.cu
    if diff -q "$src/kernels/ar_rmsnorm.cu" /tmp/bk-broken/kernels/ar_rmsnorm.cu >/dev/null; then
      echo "break: the sabotage did not apply"; rc=1
    else
      build_tree /tmp/bk-broken /tmp/bk-broken/build gpu_test_cuda_ipc >"$out/break-build.log" 2>&1
      if /tmp/bk-broken/build/tests/gpu_test_cuda_ipc >"$out/break-test.log" 2>&1; then
        echo "break: the sabotaged kernel PASSED the GPU test (the test is too weak)"; rc=1
      else
        echo "break: the sabotaged kernel fails the GPU test, as it must:"
        grep -E "off the float64|FAILED|PASSED" "$out/break-test.log" | head -6
      fi
    fi
    ;;
  bench)
    "$build/tests/bench_rmsnorm" --step "$step" ${BK_SWEEP:+--sweep} --csv "$out/bench_rmsnorm.csv" 2>&1 | tee "$out/bench_rmsnorm.txt" || rc=1
    ;;
  torch)
    PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=$(nproc) python3 "$src/tests/bench/torch_rmsnorm.py" \
      --ours "$out/bench_rmsnorm.csv" --csv "$out/torch_rmsnorm.csv" --step "$step" 2>&1 | tee "$out/torch_rmsnorm.txt" || rc=1
    ;;
  ipc)
    ngpu=$(nvidia-smi -L | wc -l)
    for w in 2 4 8; do
      [ "$w" -le "$ngpu" ] || { echo "ipc: world $w needs $w GPUs, have $ngpu: skipped"; continue; }
      for h in 4096 8192; do
        "$build/tests/bench_ipc_allreduce" --world "$w" --hidden "$h" --max-tokens 8192 2>&1 \
          | tee -a "$out/bench_ipc_allreduce.txt" || rc=1
      done
    done
    ;;
  *) echo "unknown step $s"; exit 2 ;;
  esac
done
echo "=== done rc=$rc ($(date -u +%H:%M:%S))"
exit $rc
