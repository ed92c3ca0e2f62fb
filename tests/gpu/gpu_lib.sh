# gpu_lib.sh - sourced by the gpu-labelled shell tests after integration/lib.sh (or
# fault_lib.sh): skips (exit 77) with the reason where there is no cuda build or no GPU,
# and sets the demo plan's lanes for this machine's GPUs.
#   ngpu   the GPUs nvidia-smi lists
#   plan   plans/demo-cuda.json
#   np     the ranks: 2 x ngpu/2 (two disjoint lanes), or 1 on one GPU
#   nc     the ranks of a lane
#   sets   the --set arguments for that (one GPU: tp 1, lanes shared, a rehearsal)
# a binary that cannot start (a library missing) is a failure, not a skip
help=$("$BK_BRACKET" --help 2>&1) || fail "$BK_BRACKET --help: exit $?: $help"
if ! grep -q "backends in this build: cpu cuda" <<<"$help"; then
    echo "SKIP: this build has no cuda backend (no CUDA toolkit found at configure time)"; exit 77
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no NVIDIA GPU visible (nvidia-smi -L failed)"; exit 77
fi
export NCCL_NVLS_ENABLE=0
ngpu=$(nvidia-smi -L | grep -c '^GPU' || true) # grep -c exits 1 at a count of 0 (set -e)
if [ "${ngpu:-0}" -lt 1 ]; then
    echo "SKIP: nvidia-smi -L lists no GPU"; exit 77
fi
plan=$BK_SOURCE_DIR/plans/demo-cuda.json
if [ "$ngpu" -ge 2 ]; then
    nc=$(( ngpu / 2 )); np=$(( nc * 2 )); sets=(--set "arena.tp=$nc")
else
    nc=1; np=1; sets=(--set arena.tp=1 --set lanes.policy=shared)
fi
