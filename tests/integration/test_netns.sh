#!/usr/bin/env bash
# Two hosts without hardware: network namespaces "node-a" and "node-b" joined by a veth pair
# (10.213.0.1 and 10.213.0.2, addresses this test gives its own namespaces; no other traffic).
# The real coordinator (test_transport serve) listens on node-a over tcp with CURVE; real
# engines run in node-b. Checks: every sample of both lane ranks arrives; a client with
# another client key is refused (ZAP) and one with a wrong server key fails its handshake,
# both counted; an engine naming another run is dropped and counted. Every wait is bounded;
# the namespaces are removed at the end. Needs root and `ip netns` (skipped otherwise).
. "$(dirname "$0")/lib.sh"
set -e
SERVE=${BK_BUILD_DIR:-$BK_SOURCE_DIR/build}/tests/test_transport
PLAN=$BK_SOURCE_DIR/tests/fixtures/plans/it-netns.json
A=bk-node-a-$$
B=bk-node-b-$$
VA=bkva$$
VB=bkvb$$
[ -x "$SERVE" ] || fail "no $SERVE"
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$A" 2>/dev/null; then
    echo "SKIP: network namespaces need root and iproute2"
    exit 77
fi
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$IT_TMP"
}
trap cleanup EXIT
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add 10.213.0.1/24 dev "$VA"
ip -n "$B" addr add 10.213.0.2/24 dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up

RUN=netns-$$
PORT=46100
ip netns exec "$A" timeout 120 "$SERVE" serve 10.213.0.1 $PORT "$IT_TMP" "$RUN" 2 60 \
    >"$IT_TMP/serve.log" 2>&1 &
SPID=$!
for i in $(seq 100); do grep -q "^ready" "$IT_TMP/serve.log" && break; sleep 0.1; done
grep -q "^ready tcp://10.213.0.1:$PORT tcp://10.213.0.1:$((PORT + 1))" "$IT_TMP/serve.log" ||
    { cat "$IT_TMP/serve.log"; fail "the coordinator did not come up on node-a"; }

engine() { # NAME RUN RANK KEYFILE: a real engine in node-b, bounded
    ip netns exec "$B" timeout 60 "$BK_BRACKET" engine --plan "$PLAN" --run "$2" --arm B \
        --variant shm_twopass --rendezvous "tcp://10.213.0.1:$PORT" \
        --samples "tcp://10.213.0.1:$((PORT + 1))" --rank "$3" --world 2 --backend cpu \
        --keys-file "$4" >"$IT_TMP/$1.log" 2>&1
}
engine stranger "$RUN-x" 0 "$IT_TMP/stranger" & P1=$!
engine wrongserver "$RUN-y" 0 "$IT_TMP/wrongserver" & P2=$!
engine foreign other-run 0 "$IT_TMP/keys" & P3=$!
engine r0 "$RUN" 0 "$IT_TMP/keys" & P4=$!
engine r1 "$RUN" 1 "$IT_TMP/keys" & P5=$!
set +e
wait $P4; R0=$?
wait $P5; R1=$?
wait $P1; RS=$?
wait $P2; RW=$?
wait $P3; RF=$?
wait "$SPID"; RC=$?
set -e
SPID=""
for f in serve r0 r1 stranger wrongserver foreign; do echo "---- $f"; cat "$IT_TMP/$f.log"; done
[ "$R0" = 0 ] && [ "$R1" = 0 ] || fail "engines in node-b failed ($R0, $R1)"
[ "$RC" = 0 ] || fail "the coordinator did not get every sample"
grep -q "^rank 0 samples 400 status 1" "$IT_TMP/serve.log" || fail "rank 0 samples missing"
grep -q "^rank 1 samples 400 status 1" "$IT_TMP/serve.log" || fail "rank 1 samples missing"
read -r _ DENIED _ HSFAIL _ WRONGRUN _ _ < <(grep "^auth_denied" "$IT_TMP/serve.log")
[ "$DENIED" -ge 1 ] || fail "the stranger's client key was not refused and counted"
[ "$HSFAIL" -ge 1 ] || fail "the wrong server key's handshake was not counted"
[ "$WRONGRUN" -ge 1 ] || fail "the foreign run id was not dropped and counted"
for r in $RS $RW $RF; do [ "$r" != 0 ] || fail "a refused engine reported success"; done
grep -q "no answer from the coordinator" "$IT_TMP/stranger.log" || fail "stranger: no time-out"
echo "PASS: node-a coordinator, node-b engines over tcp+CURVE; strangers refused and counted"
