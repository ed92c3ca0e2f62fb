#!/usr/bin/env bash
# An engine that hangs before its hello, as one stuck in its backend's start would (a GPU's
# context that never comes): here a stand-in library, preloaded into the run's processes,
# holds arm C's lane rank 1 in a constructor, before main. Its peer said hello and waits at
# the rendezvous until the arm's end, then fails saying the coordinator never answered; the
# runner then kills the lane, the held engine with it, and a killed engine gets no line of
# its own in the arm's reason. The reason must still name the held rank as the one that
# never said hello, and the record must say which engines' hellos came. `bracket verify`'s
# audit, where the same happens, names it too.
. "$(dirname "$0")/fault_lib.sh"
set -e
if ! command -v cc >/dev/null 2>&1; then
    echo "SKIP: no cc on PATH to build the stand-in library"
    exit 77
fi
cat >"$IT_TMP/hold.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* hold `bracket engine ... --arm ARM ... --rank 1 ...` before main, for at most 120 s;
 * ARM: $HOLD_ARM */
__attribute__((constructor)) static void hold(void)
{
    static char b[8192];
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = '\0';
    const char *arm = getenv("HOLD_ARM");
    int engine = 0, arm_c = 0, rank_1 = 0;
    for (size_t i = 0; i < n; i += strlen(b + i) + 1) {
        const char *a = b + i, *next = i + strlen(a) + 1 < n ? a + strlen(a) + 1 : "";
        engine |= !strcmp(a, "engine");
        arm_c |= arm && !strcmp(a, "--arm") && !strcmp(next, arm);
        rank_1 |= !strcmp(a, "--rank") && !strcmp(next, "1");
    }
    if (engine && arm_c && rank_1)
        for (int s = 0; s < 120; s++)
            sleep(1);
}
C
cc -shared -fPIC -o "$IT_TMP/hold.so" "$IT_TMP/hold.c" || fail "cc could not build the stand-in"
# a sanitizer build's runtime wants to come first: this test's library comes before it
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# arm_s 10: the waiting engine gives up at 8 s (a fifth kept to report)
HOLD_ARM=C LD_PRELOAD=$IT_TMP/hold.so it_start no-hello 4 "$IT_PLAN" --set timeouts.arm_s=10
it_wait
expect_verdict NO_DECISION 4
python3 - "$RECORD" <<'PY' || fail "the record does not name the engine that never said hello"
import json, sys
r = json.load(open(sys.argv[1]))
b, c = r["arms"][0], r["arms"][1]
assert b["ok"] and all(p["hello"] is True for p in b["processes"]), b
assert c["ran"] and not c["ok"], c
p0, p1 = sorted(c["processes"], key=lambda p: p["lane_rank"])
assert p0["hello"] is True and p1["hello"] is False, c["processes"]
assert p1["killed"] and p1["samples_received"] == 0, p1
why = c["reason"]
assert "rendezvous: no answer from the coordinator" in why, why
# its engine: killed by the runner after rank 0 failed (or, on a slow machine, by its agent
# at arm_s, 2 s after rank 0 gave up)
assert ("arm C lane rank 1 (%s, MPI rank %d): never said hello to the rendezvous, where the "
        "lane's ranks that did waited for it (its engine: " % (p1["host"], p1["mpi_rank"])) in why, why
assert not r["arms"][2]["ran"], "B' ran after a failed C"
print("arm C:", why)
PY
grep -q "never said hello to the rendezvous" "$OUT" || fail "the run's output does not name it"
expect_no_ranks
expect_no_leftovers
echo "---- bracket verify, its audit's rank 1 held before its hello"
segs() { ls /dev/shm | grep '^bk-' | sort || true; }
segs >"$IT_TMP/shm-before"
set +e
HOLD_ARM=A LD_PRELOAD=$IT_TMP/hold.so timeout 120 "$BK_BRACKET" verify "$IT_PLAN" \
    --set timeouts.arm_s=10 >"$IT_TMP/verify.log" 2>&1
VRC=$?
set -e
cat "$IT_TMP/verify.log"
# a held engine outlives a verify that was itself stopped: ended here, whatever the outcome
left=$(pgrep -f "bracket engine --plan $IT_TMP/" || true)
[ -z "$left" ] || { kill -KILL $left 2>/dev/null; fail "engines left behind: $left"; }
[ "$VRC" != 0 ] && [ "$VRC" != 124 ] || fail "verify exited $VRC"
grep -q "engine rank 0 (.*): rendezvous: no answer from the coordinator" "$IT_TMP/verify.log" ||
    fail "verify did not say rank 0 waited at the rendezvous"
grep -q "engine rank 1 never said hello to the rendezvous, where the ranks that did waited" \
    "$IT_TMP/verify.log" || fail "verify did not name the rank that never said hello"
new_segs=$(segs | comm -13 "$IT_TMP/shm-before" -)
[ -z "$new_segs" ] || fail "verify left in /dev/shm: $new_segs"
echo "PASS: an engine held before its hello is named in the arm's reason, and by verify"
