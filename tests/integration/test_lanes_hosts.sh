#!/usr/bin/env bash
# `bracket lanes` on topologies of several hosts: lanes larger than a host span hosts, and
# the output says which plans `bracket run` takes them for (the cuda backend with variants
# that need no peer memory); lanes of one host each say nothing of it.
. "$(dirname "$0")/lib.sh"
set -e
fx=$BK_SOURCE_DIR/tests/fixtures/topo
lanes() { # NAME ARGS...: `bracket lanes ARGS`, its output in $IT_TMP/NAME.log; must exit 0
    local name=$1 rc=0
    shift
    "$BK_BRACKET" lanes "$@" >"$IT_TMP/$name.log" 2>&1 || rc=$?
    echo "---- $name: exit $rc"
    cat "$IT_TMP/$name.log"
    [ "$rc" = 0 ] || fail "$name: exit $rc"
}
lanes tp16 --topology "$fx/cluster128x8.json" --tp 16
grep -q "(2 hosts per lane)" "$IT_TMP/tp16.log" || fail "TP 16: not two hosts a lane"
grep -qF "note: each lane spans hosts; \`bracket run\` takes such lanes only on the cuda backend with variants that need no peer memory (NCCL: nccl_then_rmsnorm, the MoE variants); the cpu backend and the IPC variants need each lane on one host" \
    "$IT_TMP/tp16.log" || fail "TP 16: the note on lanes over hosts is missing"
lanes tp8 --topology "$fx/cluster2x8_ib.json" --tp 8
grep -q "(1 host per lane)" "$IT_TMP/tp8.log" || fail "TP 8: not one host a lane"
! grep -q "spans hosts" "$IT_TMP/tp8.log" || fail "TP 8: lanes of one host said to span hosts"
echo "PASS: lanes over hosts are said to be for NCCL-only cuda plans"
