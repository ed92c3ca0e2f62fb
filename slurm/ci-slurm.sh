#!/usr/bin/env bash
# ci-slurm.sh - a real Slurm on this one host, for CI: installs Debian's slurm-wlm and munge
# when missing, starts munged, slurmctld and slurmd by hand (no systemd, no cgroups), submits
# slurm/bracket.sbatch with the cpu demo plan through sbatch (srun --mpi=pmix, then mpirun
# inside the allocation), a job array through slurm/rehearse.sh, a job given the time-limit
# signal and one cancelled while they run; checks each record and verdict; stops the
# daemons whatever happens.
#
#   slurm/ci-slurm.sh [BUILD_DIR]      (root; default build dir: build)
#
# Exit 0 when every job did what it should, 1 otherwise; 77 when it cannot run here (not
# root, no apt-get and no Slurm). Every wait is bounded; the whole script stays under ~10 min.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd) || { echo "ci-slurm: no build dir" >&2; exit 1; }
BRACKET=$BUILD/bracket
[ -x "$BRACKET" ] || { echo "ci-slurm: no $BRACKET (build first)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "ci-slurm: SKIP: needs root (daemons, munge key)"; exit 77; }

say() { echo "ci-slurm: $*"; }
die() { echo "ci-slurm: FAIL: $*" >&2; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || { say "SKIP: no Slurm and no apt-get"; exit 77; }
    say "installing slurm-wlm and munge (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null ||
        { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null; } ||
        die "apt-get install slurm-wlm munge failed"
fi

WORK=$(mktemp -d /tmp/bk-slurm-XXXXXX)
chmod 755 "$WORK"
HOST=$(hostname -s)
export SLURM_CONF=$WORK/slurm.conf
MUNGE_SOCK=$WORK/munge/munge.socket.2
PIDS=()

stop_all() {
    local rc=$?
    say "stopping the daemons"
    scancel --quiet --user=root 2>/dev/null || true
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for i in $(seq 50); do
        local alive=0
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.2
    done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if [ $rc != 0 ]; then
        for f in "$WORK"/*.log "$WORK"/job-*.out; do
            [ -f "$f" ] && { echo "==== $f"; tail -n 40 "$f"; }
        done
    fi
    rm -rf "$WORK"
    exit $rc
}
trap stop_all EXIT

# ---- munge: a key of this run, its own socket ----
mkdir -p "$WORK/munge"
chown munge:munge "$WORK/munge"
chmod 700 "$WORK/munge"
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 2>/dev/null
chown munge:munge "$WORK/munge/munge.key"
chmod 400 "$WORK/munge/munge.key"
runuser -u munge -- munged --foreground --key-file="$WORK/munge/munge.key" \
    --socket="$MUNGE_SOCK" --pid-file="$WORK/munge/munged.pid" --seed-file="$WORK/munge/seed" \
    --log-file="$WORK/munged.log" --force >"$WORK/munged.out.log" 2>&1 &
PIDS+=($!)
for i in $(seq 100); do [ -S "$MUNGE_SOCK" ] && break; sleep 0.1; done
[ -S "$MUNGE_SOCK" ] || die "munged did not start"
munge --socket="$MUNGE_SOCK" -n | unmunge --socket="$MUNGE_SOCK" >/dev/null || die "munge round trip failed"

# ---- Slurm: one node that offers 8 CPUs on however many cores it has ----
mkdir -p "$WORK/state" "$WORK/spool"
# two free ports, not fixed ones: another Slurm on this host (a second CI run) must not
# make slurmctld stop at its bind
read -r CTLD_PORT SLURMD_PORT < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))') || die "cannot find two free ports"
cat >"$SLURM_CONF" <<CONF
ClusterName=bkci
SlurmctldHost=$HOST(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=30
InactiveLimit=0
MinJobAge=300
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=ci Nodes=$HOST Default=YES MaxTime=30 State=UP OverSubscribe=NO
CONF
slurmctld -D -i -f "$SLURM_CONF" >"$WORK/slurmctld.out.log" 2>&1 &
CTLD_PID=$!
PIDS+=($CTLD_PID)
slurmd -D -f "$SLURM_CONF" >"$WORK/slurmd.out.log" 2>&1 &
SLURMD_PID=$!
PIDS+=($SLURMD_PID)
STATE=""
for i in $(seq 120); do
    # a daemon that stopped (a fatal error at start) will not come back: say so at once
    kill -0 "$CTLD_PID" 2>/dev/null ||
        die "slurmctld exited at start: $(tail -n 1 "$WORK/slurmctld.out.log")"
    kill -0 "$SLURMD_PID" 2>/dev/null ||
        die "slurmd exited at start: $(tail -n 1 "$WORK/slurmd.out.log")"
    STATE=$(timeout 5 sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
    [ "$STATE" = idle ] && break
    sleep 0.5
done
[ "$STATE" = idle ] || die "node $HOST did not become idle (state '$STATE')"
say "slurm up: $(sinfo -h -o '%P %D %c %T') ; mpi plugins: $(srun --mpi=list 2>&1 | tr -s '\n ' ' ')"

# wait_job ID BOUND_S: until the job left the queue; sets JSTATE (sacct-less: scontrol)
wait_job() {
    local id=$1 bound=$2 i
    for i in $(seq $((bound * 2))); do
        JSTATE=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1)
        case $JSTATE in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED) return 0 ;; esac
        sleep 0.5
    done
    scancel "$id" 2>/dev/null
    die "job $id still $JSTATE after $bound s"
}

# check_record DIR VERDICT...: exactly one record in DIR, its verdict one of those given
check_record() {
    local dir=$1
    shift
    local recs
    recs=$(ls "$dir"/*/record.json 2>/dev/null | wc -l)
    [ "$recs" = 1 ] || die "$dir: expected one record, found $recs"
    python3 - "$(ls "$dir"/*/record.json)" "$@" <<'PY' || die "$dir: record check failed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "bracket.record/1", r["schema"]
assert r["verdict"] in sys.argv[2:], (r["verdict"], r["reasons"])
print("ci-slurm: record", sys.argv[1], "verdict", r["verdict"], "-", r["reasons"][:120])
PY
}

# check_score DIR [--strict]: what a validator does with DIR's record: `bracket score`
# recomputes the verdict from the raw samples, finds it identical and exits with the
# verdict's status (0 PASS, 3 FAIL, 4 NO_DECISION). --strict also refuses any identity it
# cannot check (a run with --set candidate.variant and no candidate.source_digest is one).
check_score() {
    local dir=$1 rec want got=0
    shift
    rec=$(ls "$dir"/*/record.json)
    want=$(python3 -c 'import json,sys; print({"PASS":0,"FAIL":3,"NO_DECISION":4}[json.load(open(sys.argv[1]))["verdict"]])' "$rec")
    "$BRACKET" score "$@" "$rec" >"$dir/score.out" 2>&1 || got=$?
    if [ "$got" != "$want" ] || ! grep -q "identical to the record" "$dir/score.out"; then
        cat "$dir/score.out"
        die "$rec: bracket score${*:+ $*} exited $got (the verdict's status is $want) or found it not identical"
    fi
}

# exit code of a finished job ("0:0" -> 0)
job_exit() { scontrol show job "$1" | sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1/p' | head -n 1; }

PLAN=$SRC/plans/demo-cpu.json
SB=$SRC/slurm/bracket.sbatch
# the demo's verdict is the measurement's; any of these is a finished bracket
VERDICTS="PASS FAIL NO_DECISION"
CPU_OPTS=(--gpus-per-node=0 --ntasks-per-node=4 --time=10)
cd "$WORK" || die "cd $WORK"
# the jobs' private folders (engine plans, ipc endpoints) under $WORK: this script's
# processes are told apart from any other bracket on the host by that path
mkdir -p "$WORK/tmp"
export TMPDIR=$WORK/tmp
export BRACKET

# 1. srun --mpi=pmix (the template's default)
J=$(sbatch --parsable "${CPU_OPTS[@]}" --output="$WORK/job-srun.out" "$SB" "$PLAN" "$WORK/out-srun") ||
    die "sbatch refused the job"
say "job $J (srun --mpi=pmix) submitted"
wait_job "$J" 240
cat "$WORK/job-srun.out"
[ "$JSTATE" = COMPLETED ] || [ "$JSTATE" = FAILED ] || die "job $J ended $JSTATE"
E=$(job_exit "$J")
case $E in 0|3|4) ;; *) die "job $J exited $E (not a verdict)" ;; esac
check_record "$WORK/out-srun" $VERDICTS
check_score "$WORK/out-srun" --strict

# 2. mpirun inside the allocation
J=$(BRACKET_LAUNCHER=mpirun BRACKET_MPIRUN_ARGS=--oversubscribe sbatch --parsable "${CPU_OPTS[@]}" \
    --output="$WORK/job-mpirun.out" "$SB" "$PLAN" "$WORK/out-mpirun") || die "sbatch refused the job"
say "job $J (mpirun) submitted"
wait_job "$J" 240
cat "$WORK/job-mpirun.out"
E=$(job_exit "$J")
case $E in 0|3|4) ;; *) die "job $J exited $E (not a verdict)" ;; esac
check_record "$WORK/out-mpirun" $VERDICTS
check_score "$WORK/out-mpirun" --strict

# 3. a job array over two plans (slurm/rehearse.sh)
printf '%s\n' "$PLAN" "$SRC/tests/fixtures/plans/it-cpu.json" >"$WORK/plans.txt"
OUT_ARRAY=$("$SRC/slurm/rehearse.sh" --topology 1x4 --sbatch-args "--gpus-per-node=0 --time=10" \
    --out "$WORK/out-array" "$WORK/plans.txt") || die "rehearse.sh failed: $OUT_ARRAY"
echo "$OUT_ARRAY"
A=$(echo "$OUT_ARRAY" | sed -n 's/^submitted job \([0-9]*\) .*/\1/p' | head -n 1)
[ -n "$A" ] || die "rehearse.sh submitted no array"
for t in 0 1; do wait_job "${A}_$t" 300; done
for t in 0 1; do
    check_record "$WORK/out-array/1x4/$t" $VERDICTS
    check_score "$WORK/out-array/1x4/$t" --strict
done

# wait_arm_c JOB LOG: until an engine of the job's arm C runs (at most 120 s); on failure
# the job's output says why. Seen once is enough: a second look could miss an engine
# that had just exited, and the record tells the rest.
wait_arm_c() {
    local i
    for i in $(seq 600); do
        pgrep -f "bracket engine --plan $WORK/.* --arm C " >/dev/null && return 0
        sleep 0.2
    done
    squeue -j "$1" >&2 || true
    cat "$2" >&2 || true
    die "job $1 never reached arm C"
}

# slow_job NAME [VAR=VALUE...]: submit (with those variables in sbatch's environment) a job
# whose arm C runs for seconds, wait until it does; sets J
slow_job() {
    local name=$1
    shift
    J=$(env "$@" sbatch --parsable "${CPU_OPTS[@]}" --output="$WORK/job-$name.out" "$SB" "$PLAN" \
        "$WORK/out-$name" --set candidate.variant=slowed \
        --set 'candidate.params={"base":"shm_twopass","fraction":10}' \
        --set workload.iters=2000) || die "sbatch refused the job"
    wait_arm_c "$J" "$WORK/job-$name.out"
}
# expect_partial NAME: the stopped job J ends with a partial NO_DECISION record, a reason
# starting "terminated", the job's exit 4, and no process left
expect_partial() {
    wait_job "$J" 120
    cat "$WORK/job-$1.out"
    check_record "$WORK/out-$1" NO_DECISION
    check_score "$WORK/out-$1"
    python3 -c 'import json,sys,glob; r=json.load(open(glob.glob(sys.argv[1]+"/*/record.json")[0])); assert r["reasons"].startswith("terminated") and "crashed" not in r["reasons"], r["reasons"]' \
        "$WORK/out-$1" || die "$1: the reason is not terminated (or calls a stopped engine crashed)"
    E=$(job_exit "$J")
    [ "$E" = 4 ] || die "$1: job $J exited $E, not 4 (NO_DECISION)"
    for i in $(seq 50); do pgrep -f "bracket (engine|run) .*$WORK" >/dev/null || break; sleep 0.2; done
    pgrep -af "bracket (engine|run) .*$WORK" && die "$1: processes left behind"
}

# 4. the time-limit warning while arm C runs (what --signal=B:TERM@120 does: SIGTERM to the
# batch shell)
slow_job cancel
scancel --batch --signal=TERM "$J"
expect_partial cancel
# 4b. the same with mpirun as the launcher: mpirun, signalled itself, exits 1; the job
# still ends with bracket's status, the partial record's NO_DECISION (4)
slow_job cancel-mpirun BRACKET_LAUNCHER=mpirun BRACKET_MPIRUN_ARGS=--oversubscribe
scancel --batch --signal=TERM "$J"
expect_partial cancel-mpirun
# 5. a plain scancel while arm C runs (Slurm signals every task and the batch step)
slow_job scancel
scancel "$J"
expect_partial scancel
say "PASS: srun --mpi=pmix, mpirun in the allocation, a job array, time-limit signal (srun, mpirun: exit 4) and scancel -> partial records"
