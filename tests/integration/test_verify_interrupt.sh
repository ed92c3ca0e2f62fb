#!/usr/bin/env bash
# `bracket verify` interrupted (Ctrl-C, SIGTERM from a job's time limit, or SIGKILL) while
# its engines run: it exits nonzero and leaves nothing behind, however it ended: no engine,
# no private folder (its plan copy, the coordinator's sockets), no shared-memory segment.
# Its janitor (runner/janitor.h) removes what the killed process could not. So does
# `verify --target T` alone, whose children verify each variant.
. "$(dirname "$0")/lib.sh"
set -e
shm_now() { ls /dev/shm 2>/dev/null | grep '^bk-' | sort || true; }
engines() { pgrep -f "bracket engine --plan $IT_TMP/" || true; }
BEFORE=$(shm_now)
for sig in INT TERM KILL; do
    TMPDIR=$IT_TMP timeout 300 "$BK_BRACKET" verify "$IT_PLAN" --checks 1000 \
        >"$IT_TMP/v-$sig.log" 2>&1 &
    VP=$!
    SEEN=
    for i in $(seq 1200); do # at most 60 s for the first engine (they come and go a check)
        [ -z "$(engines)" ] || { SEEN=1; break; }
        kill -0 "$VP" 2>/dev/null || break
        sleep 0.05
    done
    [ -n "$SEEN" ] || { cat "$IT_TMP/v-$sig.log"; fail "SIG$sig: no engine of verify seen"; }
    # `timeout` relays INT and TERM; KILL goes to verify itself (timeout's child)
    if [ "$sig" = KILL ]; then
        kill -KILL "$(pgrep -P "$VP" -f "bracket verify")"
    else
        kill "-$sig" "$VP"
    fi
    set +e
    wait "$VP"
    RC=$?
    set -e
    echo "---- SIG$sig: exit $RC"
    tail -n 3 "$IT_TMP/v-$sig.log"
    [ "$RC" != 0 ] || fail "SIG$sig: an interrupted verify exited 0"
    # what it printed before the interrupt is kept (a line at a time: fully buffered, a file
    # got nothing of it from a Ctrl-C); SIGKILL is the exception no program can help
    if [ "$sig" != KILL ]; then
        grep -Eq "^seed +shape +tokens" "$IT_TMP/v-$sig.log" ||
            fail "SIG$sig: the table's header, printed before the interrupt, was lost"
    fi
    for i in $(seq 50); do # up to 5 s for the engines and the janitor
        [ -z "$(engines)" ] && [ -z "$(ls -d "$IT_TMP"/bracket-* 2>/dev/null)" ] && break
        sleep 0.1
    done
    [ -z "$(engines)" ] || fail "SIG$sig: engines left behind: $(engines)"
    LEFT=$(ls -d "$IT_TMP"/bracket-* 2>/dev/null || true)
    [ -z "$LEFT" ] || fail "SIG$sig: private folders left behind: $LEFT"
    NEW=$(comm -13 <(echo "$BEFORE") <(shm_now) | grep . || true)
    [ -z "$NEW" ] || fail "SIG$sig: shared-memory segments left behind: $NEW"
done
# --target alone runs each variant's verify as its child: killed outright (SIGKILL), it
# takes that child with it (PR_SET_PDEATHSIG), and so the child's engines, whose janitor
# cleans up after them
kids() { pgrep -f "bracket verify --target .* --checks 1000 .*--variant" || true; }
TMPDIR=$IT_TMP timeout 300 "$BK_BRACKET" verify --target collective.allreduce_residual_rmsnorm \
    --checks 1000 --set backend=cpu >"$IT_TMP/v-all.log" 2>&1 &
VP=$!
SEEN=
for i in $(seq 1200); do # engines come and go a check; the variant's verify stays
    [ -n "$(engines)" ] && [ -n "$(kids)" ] && SEEN=1 && break
    kill -0 "$VP" 2>/dev/null || break
    sleep 0.05
done
[ -n "$SEEN" ] && [ -n "$(kids)" ] ||
    { cat "$IT_TMP/v-all.log"; fail "--target alone: no variant's verify and engine seen"; }
kill -KILL "$(pgrep -P "$VP" -f "bracket verify")"
set +e
wait "$VP"
set -e
for i in $(seq 50); do
    [ -z "$(engines)$(kids)" ] && [ -z "$(ls -d "$IT_TMP"/bracket-* 2>/dev/null)" ] && break
    sleep 0.1
done
[ -z "$(kids)" ] || fail "--target alone killed: a variant's verify left behind: $(kids)"
[ -z "$(engines)" ] || fail "--target alone killed: engines left behind: $(engines)"
LEFT=$(ls -d "$IT_TMP"/bracket-* 2>/dev/null || true)
[ -z "$LEFT" ] || fail "--target alone killed: private folders left behind: $LEFT"
NEW=$(comm -13 <(echo "$BEFORE") <(shm_now) | grep . || true)
[ -z "$NEW" ] || fail "--target alone killed: shared-memory segments left behind: $NEW"
echo "PASS: verify interrupted by SIGINT, SIGTERM and SIGKILL leaves nothing behind"
