#!/usr/bin/env bash
# gpu-env.sh - sourced by scripts/gpu-run.sh and tests/gpu/moe-gpu-run.sh on a GPU machine that
# has CUDA, NCCL, Open MPI and hwloc but no ZeroMQ, msgpack-c, jansson or cmocka: points the
# build at the bundled libraries (BK_DEPS, default ./.gpu-deps/root or ../.gpu-deps/root, made
# on a Debian machine by ../shared/gpu-host/bundle-deps DIR), finds NCCL (the toolkit's, else
# PyTorch's wheel's), and defines build_tree SRC BUILD [TARGET...], the sabotage helpers and
# pack_out (below). Needs $src and $out set.
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

build_tree() { # build_tree SRC BUILD [TARGET...]; BK_CMAKE_EXTRA: more cmake arguments
  local s=$1 b=$2; shift 2
  rm -f "$b/CMakeCache.txt" # pkg-config answers are cached: always ask again
  cmake -S "$s" -B "$b" -G Ninja -DBK_CUDA=ON -DBK_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    "${nccl_args[@]}" ${BK_CMAKE_EXTRA:-} >"$out/cmake-$(basename "$b").log" 2>&1 || { tail -30 "$out/cmake-$(basename "$b").log"; return 1; }
  cmake --build "$b" -j "$(nproc)" ${1:+--target "$@"}
}


# The break steps (a sabotaged copy of the tree must FAIL its GPU test: the test can fail).
# sabotage_tree DEST FILE SED_EXPR: a copy of $src in DEST with SED_EXPR applied to FILE;
# returns 1, saying so, when the expression changed nothing.
sabotage_tree() {
  local dest=$1 file=$2 expr=$3
  rm -rf "$dest" && mkdir -p "$dest"
  (cd "$src" && tar --exclude=./gpu-out --exclude=./build --exclude=./.gpu-deps -cf - .) | (cd "$dest" && tar -xf -)
  sed -i "$expr" "$dest/$file"
  if diff -q "$src/$file" "$dest/$file" >/dev/null; then
    echo "break: the sabotage of $file did not apply"; return 1
  fi
}
# sabotage_caught BIN LOG WHAT PATTERN [NEED]: the sabotaged copy's test BIN must fail (a pass
# or a skip, exit 77, is not caught), and its log must match every line of NEED when given
# (each an extended regex: the tests meant to catch it are the ones that failed); prints the
# lines of LOG matching PATTERN.
sabotage_caught() {
  local bin=$1 log=$2 what=$3 pat=$4 need=${5:-} brc
  [ -x "$bin" ] || { echo "break: the sabotaged copy did not build ($bin)"; return 1; }
  "$bin" >"$log" 2>&1
  brc=$?
  if [ "$brc" = 0 ] || [ "$brc" = 77 ]; then
    echo "break: the sabotaged $what was not caught by the GPU test (exit $brc)"; return 1
  fi
  local n
  while IFS= read -r n; do
    if [ -n "$n" ] && ! grep -qE "$n" "$log"; then
      echo "break: the sabotaged $what failed the GPU test (exit $brc), but not as /$n/:"
      grep -m6 -E "$pat" "$log"
      return 1
    fi
  done <<<"$need"
  echo "break: the sabotaged $what fails the GPU test, as it must:"
  grep -m6 -E "$pat" "$log"
  return 0
}
# pack_out: every log and table under $out also in one archive, $out/0-all.tgz, named to sort
# first: the device tool brings back only the first few files of $OUT (thirty-first session:
# 8 of 38). The scripts call it at any exit (trap pack_out EXIT).
# GNU tar exits 1 when a file changed while it read it: gpu-run.log does, tee still writing it
# (thirty-second session: the archive was whole but stayed 0-all.tgz.part); only 2 is a failure.
pack_out() {
  tar czf "$out/0-all.tgz.part" -C "$out" --exclude='0-all.tgz*' . 2>/dev/null
  [ $? -le 1 ] && mv "$out/0-all.tgz.part" "$out/0-all.tgz"
}
