#!/usr/bin/env bash
# rehearse.sh - rehearse several plans on several topologies: one Slurm job array per
# topology, one array task per plan, each task a slurm/bracket.sbatch run.
#
#   slurm/rehearse.sh [--topology NODESxTASKS]... [--sbatch-args "ARGS"] [--out DIR]
#                     [--dry-run] PLAN_LIST | PLAN...
#
#   --topology NxT     N nodes with T tasks (one per GPU) each; repeatable (default 1x4)
#   --sbatch-args A    more sbatch options for every array, e.g. "--partition=gpu --time=20"
#   --out DIR          records go to DIR/<NxT>/<task>/<run-id>/record.json (default:
#                      rehearsals), job logs to DIR/<NxT>/<task>.out
#   --dry-run          print the sbatch commands, submit nothing
#   PLAN_LIST          a file of plan paths, one a line (# comments and blank lines skipped);
#                      or give the plans themselves as arguments
#
# Prints "submitted job ID topology NxT, N plans" per array. Environment for the jobs
# (BRACKET, BRACKET_LAUNCHER, ...) is bracket.sbatch's and passes through sbatch.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOPOS=()
SARGS=""
OUT=rehearsals
DRY=0
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --topology) [ $# -ge 2 ] || usage; TOPOS+=("$2"); shift 2 ;;
    --sbatch-args) [ $# -ge 2 ] || usage; SARGS=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "rehearse.sh: unknown option $1" >&2; usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
[ ${#TOPOS[@]} -gt 0 ] || TOPOS=(1x4)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LIST=$OUT/plans.txt
if [ $# = 1 ] && ! grep -q '"schema"' "$1" 2>/dev/null; then
    grep -v '^[[:space:]]*\(#\|$\)' "$1" >"$LIST" || true # a list of plans
else
    printf '%s\n' "$@" >"$LIST"
fi
N=$(grep -c . "$LIST" || true)
[ "$N" -ge 1 ] || { echo "rehearse.sh: no plans given" >&2; exit 2; }
ABS=()
while read -r p; do
    [ -r "$p" ] || { echo "rehearse.sh: cannot read plan $p" >&2; exit 2; }
    ABS+=("$(realpath "$p")") # jobs may start elsewhere
done <"$LIST"
printf '%s\n' "${ABS[@]}" >"$LIST"
for t in "${TOPOS[@]}"; do
    if ! [[ $t =~ ^([0-9]+)x([0-9]+)$ ]]; then
        echo "rehearse.sh: --topology '$t': expected NODESxTASKS, e.g. 2x4" >&2
        exit 2
    fi
    nodes=${BASH_REMATCH[1]}
    tasks=${BASH_REMATCH[2]}
    mkdir -p "$OUT/$t"
    # shellcheck disable=SC2086 # SARGS is a list of words
    CMD=(sbatch --parsable --array=0-$((N - 1)) --nodes="$nodes" --ntasks-per-node="$tasks"
         --job-name="bracket-$t" --output="$OUT/$t/%a.out" $SARGS
         "$HERE/bracket.sbatch" "@$LIST" "$OUT/$t/%a")
    if [ $DRY = 1 ]; then
        echo "${CMD[*]}"
        continue
    fi
    ID=$("${CMD[@]}")
    echo "submitted job ${ID%%;*} topology $t, $N plans"
done
