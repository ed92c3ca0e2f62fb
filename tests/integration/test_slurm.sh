#!/usr/bin/env bash
# The Slurm job of CI (slurm/ci-slurm.sh) under ctest, where Slurm is already installed and
# we are root: sbatch with srun --mpi=pmix and with mpirun, a job array, the time-limit
# signal. Skipped (77) where Slurm is not installed: .ci/run installs it and runs the script.
set -u
SRC=${BK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BK_BUILD_DIR:-$SRC/build}
if [ "$(id -u)" != 0 ] || ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "SKIP: needs root and an installed slurm-wlm + munge (.ci/run installs them)"
    exit 77
fi
exec timeout 600 "$SRC/slurm/ci-slurm.sh" "$BUILD"
