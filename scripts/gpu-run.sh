#!/usr/bin/env bash
# gpu-run.sh - build, test and benchmark bracket's cuda backend on a GPU machine that has
# CUDA, NCCL, Open MPI and hwloc but no ZeroMQ, msgpack-c, jansson or cmocka, in one call.
#
#   scripts/gpu-run.sh [STEP...]        STEP: build test break bench torch band small waves ab
#                                       ipc sanitize asan pdlstress
#                                       (default: build test break bench torch)
#
# Logs and tables go to $OUT, all of them also in $OUT/0-all.tgz at the end; the output to
# $OUT/gpu-run.log too, and its result lines (steps, pdlstress, break, sanitize, skips) are
# printed again at the end.
# Environment:
#   BK_DEPS    the bundled libraries (made here by ../shared/gpu-host/bundle-deps DIR on a
#              Debian machine; DIR/root). Default: the first of ./.gpu-deps/root and
#              ../.gpu-deps/root that exists.
#   BK_BUILD   build directory (default /tmp/bk-build: outside the tree, so it survives a
#              re-sent working tree while the machine stays up)
#   OUT        where logs and tables go (default ./gpu-out)
#   BK_STEP    token multiplier of the benchmark tables (default 2: 1, 2, 4 ... 16384)
#   BK_SWEEP   set: bench_rmsnorm also sweeps launch configurations (--sweep)
#   BK_BAND_TOKENS, BK_BAND_HIDDEN, BK_BAND_TORCH_TOKENS, BK_BAND_TORCH_HIDDEN  the band step's
#              shapes (defaults below)
#   BK_SANITIZE  the sanitize step's runs, TEST:TOOL ... (default below); BK_SANITIZE_S the
#              seconds each may take (default 150); BK_RACECHECK_MAX_TOKENS the rmsnorm
#              test's largest shape under racecheck (default 131, or all when
#              BK_RACECHECK_MIN_TOKENS is set; the test says what it left out);
#              BK_RACECHECK_MIN_TOKENS its smallest (default all: set it to run the large rows
#              alone, e.g. 5000);
#              BK_SANITIZE_LANE_S the IPC test's lane bounds under the sanitizer (default its 20 s)
#   BK_AB_OLD, BK_AB_TOKENS, BK_AB_HIDDEN  the ab step's old tree (a copy of the old revision's
#              files) and shapes (defaults below)
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is exported for every step.
#
# Steps: build (cmake + ninja, all cores), test (ctest -L gpu, then the unit tests),
# break (a copy of the tree with the one-shot kernel's residual add removed must FAIL the
# IPC GPU test, one whose rmsnorm kernels skip their programmatic-launch wait must FAIL the
# rmsnorm GPU test's test_pdl, one whose IPC kernels skip it must FAIL the IPC GPU test's
# test_pdl_world1/2, one whose one-shot always uses the same half of peer memory must FAIL
# test_oneshot_peer_by_hand, one whose barriers do not wait must FAIL both peer-by-hand tests:
# proves the tests can fail), bench (bench_rmsnorm table + CSV), torch (the same
# shapes through torch.compile and eager, our kernel timed beside them on the same tensors
# through libbk_rmsnorm_shim.so, its default launch and the same without programmatic
# dependent launch; bench's CSV for the copy kernel), band (shapes between the powers of two,
# where the rule switches: bench_rmsnorm's default, no-pdl and pdl columns, 3 rounds, then
# torch.compile beside ours on the same tensors), small (every lean configuration, split rows
# included, at 1-128 tokens, with the mover column; BK_SMALL_TOKENS, BK_SMALL_HIDDEN), waves (every lean configuration beside the
# default where the rule's waves switch, and at hidden sizes only the device's counts
# reach), ab (the default rule of the tree in BK_AB_OLD against this tree's, old/new/new/old on
# the same card), ipc (nccl_then_rmsnorm
# against the two IPC variants across GPUs at worlds 2, 4, 8 as far as the machine's GPUs go:
# first the goals' rows, up to 32 tokens x 6144, with and without programmatic dependent
# launch, at every world; then the whole tables at hidden 6144, 4096, 8192; on a one-GPU
# machine a smoke run of the program, two ranks sharing the GPU), sanitize (GPU test programs under compute-sanitizer: memcheck
# with leak check, racecheck, synccheck, initcheck, forked children followed; a line per run
# with the exit status and the tool's error summary, logs in $OUT/sanitize-TEST-TOOL.log),
# asan (the GPU tests on a build of the host code with AddressSanitizer and UBSan), pdlstress
# (test_pdl plain BK_PDLSTRESS_N times and under racecheck 3 times, then the IPC test's
# test_pdl_world1/2 BK_PDLSTRESS_IPC_N times, while bench_rmsnorm keeps the GPU busy from
# another process).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/gpu-out}
build=${BK_BUILD:-/tmp/bk-build}
step=${BK_STEP:-2}
steps=${*:-build test break bench torch}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
# everything this script prints also in $out/gpu-run.log
exec > >(tee "$out/gpu-run.log") 2>&1
summary() {
  echo "=== summary: the result lines above, again"
  local pat='^(=== [a-z]+ \(|=== done|pdlstress: |break: |ab: |torch: |shapes where ours |sanitize [a-z_]+ [a-z]+: '
  grep -E "$pat|skipped inside|build failed|unknown step)" "$out/gpu-run.log"
}

. "$src/scripts/gpu-env.sh"
# At any exit (a signal too): pdlstress's load stopped, should the script end inside that
# step; every file of $out packed (pack_out); then the result lines again, last, since the
# device tool returns only the output's tail, which a long table fills. The archive comes
# before the summary: a signal to the whole group may have ended tee, and a write to it
# would then end this script.
trap '[ -n "${load:-}" ] && kill -- -"$load" 2>/dev/null; pack_out; summary' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# compute-sanitizer, for the sanitize and pdlstress steps
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

# break_one NAME SED_EXPR TEST WHAT PATTERN [NEED [FILE]]: a copy of the tree with SED_EXPR
# applied to FILE (default kernels/ar_rmsnorm.cu) must fail the GPU test TEST, as NEED when
# given (sabotage_caught; logs $out/break-NAME-*.log).
break_one() {
  local name=$1 expr=$2 test=$3 what=$4 pat=$5 need=${6:-} file=${7:-kernels/ar_rmsnorm.cu}
  sabotage_tree /tmp/bk-broken "$file" "$expr" || return 1
  build_tree /tmp/bk-broken /tmp/bk-broken/build "$test" >"$out/break-$name-build.log" 2>&1
  sabotage_caught "/tmp/bk-broken/build/tests/$test" "$out/break-$name-test.log" "$what" "$pat" \
    "$need"
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
    # every test's own output, passing ones too: a test skipped inside a passing program
    # (cmocka's skip(), with the reason the test printed) is said here, not only in ctest's log
    rm -f "$out/test-gpu-full.log" # not an earlier run's
    cp "$build/Testing/Temporary/LastTest.log" "$out/test-gpu-full.log" 2>/dev/null
    if [ ! -r "$out/test-gpu-full.log" ]; then
      echo "skipped inside the GPU tests: not known (no ctest log in $build/Testing)"
    elif skips=$("$src/scripts/list-skips.sh" "$out/test-gpu-full.log") && [ -n "$skips" ]; then
      echo "skipped inside the GPU tests:"; echo "$skips"
    else
      echo "skipped inside the GPU tests: none"
    fi
    (cd "$build" && ctest -L unit --output-on-failure 2>&1) | tee "$out/test-unit.log" | tail -5 || rc=1
    ;;
  break)
    # the IPC kernels' peer reduction: every row gets residual row 0 instead of its own
    break_one ipc 's/residual + off}/residual}/' gpu_test_cuda_ipc "IPC kernel" \
      "off the float64|FAILED|PASSED" 'FAILED  \] test_fused_world1' || rc=1
    # programmatic dependent launch: the kernels load before they wait for the kernel before
    # them (test_pdl's late writer)
    break_one pdl 's/bk__pdl_wait();//' gpu_test_rmsnorm_cuda "pdl wait" "pdl|FAILED|PASSED" \
      'FAILED  \] test_pdl' || rc=1
    # the same in the IPC kernels alone (their wait carries this comment): test_pdl_world1/2
    break_one ipc-pdl 's|bk__pdl_wait(); /\* before the epoch|/* before the epoch|' \
      gpu_test_cuda_ipc "IPC kernels' pdl wait" "pdl|FAILED|PASSED" \
      'FAILED  \] test_pdl_world' || rc=1
    # the peer played by hand (only its tests run: BK_TEST_FILTER): the one-shot always in
    # the same half of peer memory, overwriting what its peer may still read; then every
    # barrier of the IPC kernels raising its flags without waiting for the peers' (both
    # variants then read a peer's rows before they are there)
    BK_TEST_FILTER=test_oneshot_peer_by_hand break_one parity \
      's/(bk_ipc_epoch(v, blockIdx.x) \& 1u) ? half : 0;/0;/' gpu_test_cuda_ipc \
      "one-shot's half" "by hand|FAILED|PASSED" 'FAILED  \] test_oneshot_peer_by_hand' || rc=1
    BK_TEST_FILTER='test_*_peer_by_hand' break_one no-wait \
      's/while ((int32_t)(bk__ld_acquire_sys(mine)/while (0 \&\& (int32_t)(bk__ld_acquire_sys(mine)/' gpu_test_cuda_ipc \
      "barriers' wait" "by hand|FAILED|PASSED" \
      $'FAILED  \\] test_oneshot_peer_by_hand\nFAILED  \\] test_twoshot_peer_by_hand' \
      collectives/cuda_ipc_dev.cuh || rc=1
    ;;
  bench)
    "$build/tests/bench_rmsnorm" --step "$step" ${BK_SWEEP:+--sweep} --csv "$out/bench_rmsnorm.csv" 2>&1 | tee "$out/bench_rmsnorm.txt" || rc=1
    ;;
  torch)
    if [ ! -f "$out/bench_rmsnorm.csv" ]; then # the copy kernel's numbers come from it
      echo "torch: no $out/bench_rmsnorm.csv: give the bench step before torch (bench torch)"
      rc=1; continue
    fi
    PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=$(nproc) python3 "$src/tests/bench/torch_rmsnorm.py" \
      --ours "$out/bench_rmsnorm.csv" --lib "$build/tests/libbk_rmsnorm_shim.so" \
      --csv "$out/torch_rmsnorm.csv" --step "$step" --nopdl 2>&1 | tee "$out/torch_rmsnorm.txt" || rc=1
    ;;
  band)
    # the default rule's switches between the powers of two (docs/bench/cuda.md, twenty-second
    # and twenty-third sessions): pdl's bands at 256-463 tokens; the 1024-thread launch one
    # row past a wave of the 512-thread one (265, 397, 529) up to 1023 (351 at 16384), but
    # 512 or 256 threads without gamma early where the rows fill one wave of them to 15/16 (on
    # an H200: 495-528 at 6664-8192, 619-660 at 5640-6144 and 6664-8192, 743-792 at 4616-6144)
    "$build/tests/bench_rmsnorm" --rounds 3 \
      --tokens "${BK_BAND_TOKENS:-192,256,264,265,288,320,352,384,396,397,400,416,448,480,494,495,511,512,528,529,544,618,619,640,660,661,742,743,768,792,1000}" \
      --hidden "${BK_BAND_HIDDEN:-4096,5120,6144,7168,8192,10240,12288,16384}" \
      --csv "$out/band_rmsnorm.csv" 2>&1 | tee "$out/band_rmsnorm.txt" || rc=1
    PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=$(nproc) python3 "$src/tests/bench/torch_rmsnorm.py" \
      --lib "$build/tests/libbk_rmsnorm_shim.so" --nopdl --csv "$out/band_torch.csv" \
      --tokens "${BK_BAND_TORCH_TOKENS:-288,384,416,448,480,511,544,640,768,1000}" \
      --hidden "${BK_BAND_TORCH_HIDDEN:-5120,6144,7168,8192,10240,12288}" 2>&1 | tee "$out/band_torch.txt" || rc=1
    ;;
  pdlstress)
    # test_pdl (a late writer, then each kernel launched with pdl must wait for it) while
    # another process keeps the GPU busy, so the two take turns in time slices: plain
    # BK_PDLSTRESS_N times (default 10), then under racecheck 3 times. Thirty-first session:
    # 6 of 10 failed here, every output computed from NaN inputs: the test's saved inputs came
    # from a legacy-stream copy unordered with its non-blocking stream (fixed in 342e818: 0 of
    # 20 since). A failure names outputs never written and NaNs computed from early reads.
    T=$build/tests/gpu_test_rmsnorm_cuda
    # the load: bench_rmsnorm again and again for at most 1200 s, in a session of its own so
    # that the whole group goes at the end; each run below says when it was not beside it
    setsid bash -c 'end=$((SECONDS + 1200)); while [ $SECONDS -lt $end ]; do
      "$0" --rounds 2 --step 4 || break; done' "$build/tests/bench_rmsnorm" \
      >/dev/null 2>&1 </dev/null &
    load=$!
    sleep 3
    # runs LABEL TAG N PATTERN NEED CMD...: CMD N times beside the load (each run says when
    # the load is gone: it ended by its bound or failed), logs $out/pdlstress-TAG-I.log; a run
    # fails by its exit status or, NEED given, when its log lacks that line (a cmocka filter
    # matching no test passes); a failed run's lines matching PATTERN are printed
    runs() {
      local label=$1 tag=$2 n=$3 pat=$4 need=$5 fails=0 i log
      shift 5
      for i in $(seq "$n"); do
        kill -0 "$load" 2>/dev/null || echo "pdlstress: $tag run $i ran WITHOUT the load (gone)"
        log=$out/pdlstress-$tag-$i.log
        "$@" >"$log" 2>&1 && { [ -z "$need" ] || grep -q "$need" "$log"; } ||
          { fails=$((fails + 1)); grep -E "$pat" "$log" | head -3; }
      done
      echo "pdlstress: $label beside a load: $fails of $n failed"
      [ "$fails" = 0 ] || rc=1
    }
    runs plain plain "${BK_PDLSTRESS_N:-10}" '^ERROR|FAILED  \]' '' \
      env BK_TEST_FILTER=test_pdl timeout -k 5 120 "$T"
    if [ -x "$cs" ]; then
      runs racecheck race 3 '^ERROR|FAILED  \]|SUMMARY' '' env BK_TEST_FILTER=test_pdl \
        timeout -k 5 200 "$cs" --tool racecheck --error-exitcode 99 "$T"
    else
      echo "pdlstress: no compute-sanitizer ($cs): the racecheck runs SKIPPED"
    fi
    # the IPC kernels' late-writer tests (lanes of 1 and 2 processes, their flags and
    # barriers crossing processes) beside the same load, BK_PDLSTRESS_IPC_N times (default 5);
    # a run counts as passed only when both tests ran
    runs "IPC test_pdl_world1/2" ipc "${BK_PDLSTRESS_IPC_N:-5}" 'FAILED  \]|PASSED  \]|rank [0-9]' \
      'PASSED  \] 2 test(s)' env 'BK_TEST_FILTER=test_pdl_world*' timeout -k 5 200 \
      "$build/tests/gpu_test_cuda_ipc"
    kill -- -"$load" 2>/dev/null; wait "$load" 2>/dev/null
    load= # gone: the exit trap must not signal its number again
    ;;
  small)
    # the goal's small shapes (2 us or less at 128 tokens or fewer), where the default is 0.1-0.47
    # us above the same bytes moved with no reduction (the "move us" column, thirtieth session,
    # H100): every lean configuration (--each), the split rows at 48-128 tokens included, which
    # the rule uses only below 64 and which were last swept before pdl (fourteenth session)
    "$build/tests/bench_rmsnorm" --sweep lean --each --rounds 3 \
      --tokens "${BK_SMALL_TOKENS:-1,8,16,32,48,64,96,128}" \
      --hidden "${BK_SMALL_HIDDEN:-4096,6144,7168,8192}" --csv "$out/small_rmsnorm.csv" 2>&1 \
      | tee "$out/small_rmsnorm.txt" || rc=1
    ;;
  ab)
    # the default rule before and after a change, on the same card in one call (METHOD.md):
    # bench_rmsnorm of the tree in BK_AB_OLD (a copy of the old revision: git archive REV |
    # tar -x -C DIR, carried) and of this one, run old, new, new, old at BK_AB_TOKENS x
    # BK_AB_HIDDEN, 3 rounds each; then per shape the default's us, each side the mean of its
    # two runs, new - old, and each side's us of the same launch without pdl
    if [ ! -f "${BK_AB_OLD:-}/kernels/ar_rmsnorm.cu" ]; then
      echo "ab: BK_AB_OLD (${BK_AB_OLD:-unset}) is not a copy of the tree"; rc=1; continue
    fi
    [ -x "$build/tests/bench_rmsnorm" ] || { echo "ab: no $build/tests/bench_rmsnorm: run build first"; rc=1; continue; }
    build_tree "$(cd "$BK_AB_OLD" && pwd)" "$build-old" bench_rmsnorm >"$out/ab-build.log" 2>&1 ||
      { echo "ab: the old tree did not build"; tail -20 "$out/ab-build.log"; rc=1; continue; }
    n=0
    for k in old new new old; do
      n=$((n + 1)) b=$build
      [ "$k" = old ] && b=$build-old
      "$b/tests/bench_rmsnorm" --rounds 3 --tokens "${BK_AB_TOKENS:-1,8,9,12,16}" \
        --hidden "${BK_AB_HIDDEN:-8192,10240,12288,16384}" --csv "$out/ab-$n-$k.csv" \
        >"$out/ab-$n-$k.txt" 2>&1 || { echo "ab: run $n ($k) failed:"; tail -5 "$out/ab-$n-$k.txt"; rc=1; }
    done
    # columns: hidden 1, tokens 2, us 4, nopdl_us 13 (the same launch without programmatic
    # dependent launch: where the new launch is faster without it, pdl is worth a look)
    awk -F, 'FNR == 1 { k = FILENAME; sub(/.*-/, "", k); sub(/\.csv$/, "", k); next }
             { key = $1 "," $2; if (!(key in seen)) { seen[key] = 1; order[++m] = key }
               sum[key, k] += $4; cnt[key, k]++
               if ($13 != "") { np[key, k] += $13; npc[key, k]++ } }
             function mean(a, c, key, k) { return c[key, k] ? sprintf("%6.3f", a[key, k] / c[key, k]) : "     -" }
             END { print "ab: hidden tokens  old us  new us  new-old   no-pdl: old     new"
                   for (i = 1; i <= m; i++) { key = order[i]; split(key, f, ",")
                     if (!cnt[key, "old"] || !cnt[key, "new"]) {
                       printf "ab: %6d %6d  (a side has no run)\n", f[1], f[2]; continue }
                     o = sum[key, "old"] / cnt[key, "old"]
                     w = sum[key, "new"] / cnt[key, "new"]
                     printf "ab: %6d %6d  %6.3f  %6.3f  %+7.3f          %s  %s\n", f[1], f[2], o, w,
                       w - o, mean(np, npc, key, "old"), mean(np, npc, key, "new") } }' \
      "$out"/ab-[1-4]-*.csv | tee "$out/ab-summary.txt"
    ;;
  waves)
    # the default rule's waves (bk_rmsnorm_occ_device): every lean configuration beside the
    # default (--each: blocks per SM, waves) at the one-wave launches' edges on the H200
    # (5120 / 6144 x 600-792, 7168 / 8192 x 480-660), and at hidden sizes the H200 table does
    # not cover, which only the device's counts reach (4608, 6656, 9216, 14848 x 256-1000)
    "$build/tests/bench_rmsnorm" --sweep lean --each --tokens 600,618,619,660,661,700,742,743,768,792 \
      --hidden 5120,6144 2>&1 | tee "$out/waves-edges-a.txt" || rc=1
    "$build/tests/bench_rmsnorm" --sweep lean --each --tokens 480,494,495,600,618,619,640,660,661 \
      --hidden 7168,8192 2>&1 | tee "$out/waves-edges-b.txt" || rc=1
    "$build/tests/bench_rmsnorm" --sweep lean --each \
      --tokens 256,320,384,448,512,576,640,704,768,896,1000 --hidden 4608,6656,9216,14848 2>&1 \
      | tee "$out/waves-new.txt" || rc=1
    ;;
  ipc)
    # whole GPUs only: `nvidia-smi -L` also lists MIG instances (indented lines), which are
    # no GPUs of their own for IPC; the bench counts what CUDA shows this process (after
    # CUDA_VISIBLE_DEVICES) and skips a world it cannot place with exit 77: not a failure
    ngpu=$(nvidia-smi -L | grep -c '^GPU ')
    ipc_bench() { # each run bounded: a hang must not take a short loan with it
      timeout -k 5 300 "$build/tests/bench_ipc_allreduce" "$@" 2>&1 | tee -a "$out/bench_ipc_allreduce.txt"
      r=${PIPESTATUS[0]}
      [ "$r" = 0 ] || [ "$r" = 77 ] || rc=1
    }
    if [ "$ngpu" -lt 2 ]; then
      # one GPU: the program itself, two ranks sharing it (its checks, not its times)
      ipc_bench --world 2 --hidden 4096 --max-tokens 64 --shared-gpu
    fi
    # the goals' rows first (up to 32 tokens x 6144: the 3x and the TP 8 6 us), at every
    # world, so that a call cut short by its time limit still has them; then the whole
    # tables (the crossovers), each run's table in $out as it ends
    for w in 2 4 8; do
      [ "$w" -le "$ngpu" ] || { echo "ipc: world $w needs $w GPUs, have $ngpu: skipped"; continue; }
      ipc_bench --world "$w" --hidden 6144 --max-tokens 32
      # again without programmatic dependent launch: in a model the kernel before the
      # allreduce does not release early, as a chain of these calls does
      BK_CUDA_PDL=0 ipc_bench --world "$w" --hidden 6144 --max-tokens 32
    done
    for w in 2 4 8; do
      [ "$w" -le "$ngpu" ] || continue
      for h in 6144 4096 8192; do
        ipc_bench --world "$w" --hidden "$h" --max-tokens 8192
      done
    done
    ;;
  sanitize)
    [ -x "$cs" ] || { echo "sanitize: no compute-sanitizer"; rc=1; continue; }
    export BK_SOURCE_DIR=$src BK_BUILD_DIR=$build BK_BRACKET=$build/bracket
    for run in ${BK_SANITIZE:-rmsnorm_cuda:memcheck rmsnorm_cuda:racecheck rmsnorm_cuda:synccheck \
               rmsnorm_cuda:initcheck moe_cuda:memcheck moe_cuda:racecheck engine_cuda:memcheck \
               cuda_ipc:memcheck}; do
      t=${run%%:*} tool=${run#*:} log="$out/sanitize-$t-$tool.log"
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      # racecheck is too slow for the rmsnorm test's 1000- and 5000-token shapes
      max_tokens='' min_tokens=''
      if [ "$tool" = racecheck ]; then
        min_tokens=${BK_RACECHECK_MIN_TOKENS:-}
        [ -n "$min_tokens" ] && max_tokens=${BK_RACECHECK_MAX_TOKENS:-} ||
          max_tokens=${BK_RACECHECK_MAX_TOKENS:-131}
      fi
      t0=$(date +%s)
      BK_TEST_TIMEOUT_S=${BK_SANITIZE_LANE_S:-} BK_TEST_MAX_TOKENS=$max_tokens \
        BK_TEST_MIN_TOKENS=$min_tokens timeout -k 5 "${BK_SANITIZE_S:-150}" "$cs" --tool "$tool" \
        "${extra[@]}" --target-processes all --error-exitcode 99 "$build/tests/gpu_test_$t" \
        >"$log" 2>&1
      r=$?
      [ "$r" = 0 ] || rc=1
      echo "sanitize $t $tool: exit $r in $(( $(date +%s) - t0 )) s;" \
        "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
    done
    ;;
  asan)
    # the host code (C) under AddressSanitizer and UBSan, the kernels as always: a build of
    # its own ($build-asan), then the GPU tests; leaks are the unit tests' business (CI)
    BK_CMAKE_EXTRA="-DBK_SANITIZE=ON -DBK_BENCH=OFF" build_tree "$src" "$build-asan" >"$out/asan-build.log" 2>&1 \
      || { grep -E "error|FAILED" "$out/asan-build.log" | head -20; rc=1; continue; }
    nm "$build-asan/bracket" | grep -q __asan_init || { echo "asan: the build is not instrumented"; rc=1; continue; }
    (cd "$build-asan" && ctest -L gpu --output-on-failure --timeout 600 2>&1) | tee "$out/asan-test-gpu.log" | tail -25 || rc=1
    grep -E "ERROR: AddressSanitizer|runtime error:" "$out/asan-test-gpu.log" | sort | uniq -c | head -20
    ;;
  *) echo "unknown step $s"; exit 2 ;;
  esac
done
echo "=== done rc=$rc ($(date -u +%H:%M:%S))"
exit $rc
