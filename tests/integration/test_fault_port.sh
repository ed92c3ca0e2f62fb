#!/usr/bin/env bash
# The coordinator's port already taken (--iface lo --port P while something listens on P):
# a clear error naming the port and the interface, exit 2, before any arm; no run folder,
# no output folder the run made, no process left.
. "$(dirname "$0")/fault_lib.sh"
set -e
# a free pair of ports on loopback (below the ephemeral range)
PORT=$(free_port_pair)
[ -n "$PORT" ] || fail "no free port pair on 127.0.0.1"

# a listener holds the port (bounded: it exits after 60 s; killed below)
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(60)' "$PORT" &
HOLDER=$!
trap 'kill "$HOLDER" 2>/dev/null || true; rm -rf "$IT_TMP"' EXIT
for i in $(seq 100); do
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
        "$PORT" 2>/dev/null && break
    sleep 0.1
done
it_run taken 4 "$IT_PLAN" --iface lo --port "$PORT"
[ "$RC" = 2 ] || fail "port taken: expected exit 2, got $RC"
grep -q "port $PORT on 127.0.0.1 (lo) is already in use" "$OUT" || fail "port taken: unclear error"
[ -z "$(ls "$IT_TMP/out-taken" 2>/dev/null)" ] || fail "port taken: a run folder was left"
# nor the output folder, when the run made it (nor a folder above it that it made); one
# that was there stays
[ ! -e "$IT_TMP/out-taken" ] || fail "port taken: the output folder the run made was left"
mkdir "$IT_TMP/kept"
run_apps taken2 -np 4 "$BK_BRACKET" run "$IT_PLAN" --iface lo --port "$PORT" --quiet \
    --out "$IT_TMP/kept/new/deeper/"
[ "$RC" = 2 ] || fail "port taken (2): expected exit 2, got $RC"
[ -d "$IT_TMP/kept" ] && [ ! -e "$IT_TMP/kept/new" ] ||
    fail "port taken: the folders the run made were left, or the one it did not was taken"
# "." and ".." in the path: the folders made are taken back all the same (a/./b left a)
run_apps taken3 -np 4 "$BK_BRACKET" run "$IT_PLAN" --iface lo --port "$PORT" --quiet \
    --out "$IT_TMP/kept/a/./b/c/../d"
[ "$RC" = 2 ] || fail "port taken (3): expected exit 2, got $RC"
[ -d "$IT_TMP/kept" ] && [ -z "$(ls -A "$IT_TMP/kept")" ] ||
    fail "port taken: folders made through '.' or '..' were left: $(ls -R "$IT_TMP/kept")"
kill "$HOLDER"
expect_no_leftovers --no-record
echo "PASS: port taken -> a clear error (exit 2), nothing run, nothing left"
