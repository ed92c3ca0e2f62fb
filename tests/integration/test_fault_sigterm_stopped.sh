#!/usr/bin/env bash
# SIGTERM while an engine of arm C is stopped (SIGSTOP: a hung process that cannot even act
# on the SIGTERM its agent sends), and then while the agent of another one is stopped (it
# can neither kill its engine nor remove its segment): the partial record is still written,
# and no engine, rank or shared-memory segment is left behind.
#
# An engine's segment has a name only from its creation until every peer of its lane has
# mapped it (then the name is unlinked), a window of milliseconds, which a stop lands in by
# chance alone. So a stand-in library, preloaded into the run's processes, holds arm C's lane
# rank 1 where it would open a peer's segment: lane rank 0's segment keeps its name (rank 1
# never maps it), and the stop lands while it is named: the removal by the engine's agent
# (first part) and by rank 0 (second part, the agent stopped) is exercised every run.
. "$(dirname "$0")/fault_lib.sh"
set -e
if ! command -v cc >/dev/null 2>&1; then
    echo "SKIP: no cc on PATH to build the stand-in library"
    exit 77
fi
cat >"$IT_TMP/shmhold.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
/* `bracket engine ... --arm C ... --rank 1 ...` opening a segment it did not create (a
 * peer's) waits there, for at most 120 s; every other call is shm_open's own */
static int held_here(void)
{
    static char b[8192];
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return 0;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = '\0';
    int engine = 0, arm_c = 0, rank_1 = 0;
    for (size_t i = 0; i < n; i += strlen(b + i) + 1) {
        const char *a = b + i, *next = i + strlen(a) + 1 < n ? a + strlen(a) + 1 : "";
        engine |= !strcmp(a, "engine");
        arm_c |= !strcmp(a, "--arm") && !strcmp(next, "C");
        rank_1 |= !strcmp(a, "--rank") && !strcmp(next, "1");
    }
    return engine && arm_c && rank_1;
}
int shm_open(const char *name, int oflag, mode_t mode)
{
    int (*real)(const char *, int, mode_t) =
        (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    if (!(oflag & O_CREAT) && held_here())
        for (int s = 0; s < 120; s++)
            sleep(1);
    return real(name, oflag, mode);
}
C
cc -shared -fPIC -o "$IT_TMP/shmhold.so" "$IT_TMP/shmhold.c" -ldl ||
    fail "cc could not build the stand-in"
# a sanitizer build's runtime wants to come first: this test's library comes before it
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# held_segment: waits (at most 30 s) for the run's arm C lane rank 0 segment to be named in
# /dev/shm, sets SEG to it and ENGINE0 to that engine's pid
held_segment() {
    local i run="" prefix
    SEG=""
    for i in $(seq 300); do
        run=$(ls "$OUTDIR" 2>/dev/null | head -n 1)
        if [ -n "$run" ]; then
            prefix=$(shm_prefix "$run")
            [ -e "/dev/shm/${prefix}C-0" ] && SEG=${prefix}C-0 && break
        fi
        sleep 0.1
    done
    [ -n "$SEG" ] || fail "arm C lane rank 0's segment was never named in /dev/shm"
    ENGINE0=$(pgrep -f "bracket engine .*$IT_TMP/.* --arm C .*--rank 0( |$)" | head -n 1 || true)
    [ -n "$ENGINE0" ] || fail "no engine of arm C lane rank 0"
}

# the stopped engine: its agent removes its segment's name
HOLD=$IT_TMP/shmhold.so
LD_PRELOAD=$HOLD it_start sigterm-stopped 4 "$IT_PLAN" --set timeouts.arm_s=60
wait_engines C 2
held_segment
kill -STOP "$ENGINE0"
[ -e "/dev/shm/$SEG" ] || fail "the segment $SEG lost its name before the stop"
echo "stopped engine $ENGINE0 with its segment $SEG named"
term_mpirun
python3 - "$RECORD" <<'PY' || fail "the partial record is not NO_DECISION / terminated"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] == "NO_DECISION" and r["reasons"].startswith("terminated"), r["reasons"]
PY
for i in $(seq 100); do kill -0 "$ENGINE0" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$ENGINE0" 2>/dev/null; then
    kill -KILL "$ENGINE0"
    fail "the stopped engine $ENGINE0 was left behind"
fi
[ ! -e "/dev/shm/$SEG" ] || fail "the stopped engine's segment $SEG was left"
expect_terminated_clean

# the agent (an MPI rank of the candidate lane) of that engine stopped: rank 0 writes the
# record and ends the job; the engine goes with its agent, rank 0 removes the segment
LD_PRELOAD=$HOLD it_start sigterm-stopped-agent 4 "$IT_PLAN" --set timeouts.arm_s=60
wait_engines C 2
held_segment
AGENT=$(ps -o ppid= -p "$ENGINE0" | tr -d ' ')
[ -n "$AGENT" ] || fail "no agent for the engine $ENGINE0"
kill -STOP "$AGENT"
[ -e "/dev/shm/$SEG" ] || fail "the segment $SEG lost its name before the stop"
echo "stopped agent $AGENT of engine $ENGINE0 with its segment $SEG named"
term_mpirun
for i in $(seq 100); do kill -0 "$AGENT" 2>/dev/null || break; sleep 0.1; done
kill -0 "$AGENT" 2>/dev/null && { kill -KILL "$AGENT"; fail "the stopped agent was left behind"; }
[ ! -e "/dev/shm/$SEG" ] || fail "the stopped agent's engine's segment $SEG was left"
expect_terminated_clean
echo "PASS: SIGTERM with a stopped engine, then with a stopped agent, each holding a named segment -> partial records, the segments removed, nothing left behind"
