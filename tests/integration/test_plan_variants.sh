#!/usr/bin/env bash
# `bracket plan variants`: every variant the catalog answers a plan with (the "known:" list
# of an unknown-variant error, another path through the catalog) is listed under its
# target, and none other; --target narrows the list; the diagnostics say what they are and
# their params; bad usage exits 2 naming what is wrong. A --set candidate.variant that leaves
# candidate.source_digest as it was is noted.
. "$(dirname "$0")/lib.sh"
set -e
"$BK_BRACKET" plan variants >"$IT_TMP/all.txt"
cat "$IT_TMP/all.txt"
known() { # PLAN TARGET: the variant names an unknown-variant error lists for it
    local out
    out=$("$BK_BRACKET" plan check "$1" --set candidate.variant=nope 2>&1) && fail "nope accepted"
    grep -q "for target '$2'" <<<"$out" || fail "unexpected error: $out"
    sed -n 's/.*(known: \([^)]*\)).*/\1/p' <<<"$out" | tr -d ' ' | tr ',' '\n' | sort
}
listed() { # TARGET: the variant names `plan variants --target` prints for it
    "$BK_BRACKET" plan variants --target "$1" >"$IT_TMP/one.txt"
    head -n 1 "$IT_TMP/one.txt" | grep -q "^$1: " || fail "--target $1: first line is not the target"
    sed -n 's/^  \([a-z0-9_]*\)$/\1/p' "$IT_TMP/one.txt" | sort
}
for pt in "$IT_PLAN collective.allreduce_residual_rmsnorm" \
          "$BK_SOURCE_DIR/plans/moe-cpu.json moe.fused_experts_reduce"; do
    set -- $pt
    want=$(known "$1" "$2")
    got=$(listed "$2")
    [ -n "$want" ] || fail "$2: no known variants parsed"
    [ "$want" = "$got" ] || fail "$2: listed $(echo $got) but the catalog knows $(echo $want)"
    grep -q "^$2: " "$IT_TMP/all.txt" || fail "$2 missing from the full list"
done
# a build without the cuda backend says its cuda variants are not listed; one with it lists
# nccl_then_rmsnorm and says nothing of the kind
if "$BK_BRACKET" --version | grep -q "backends in this build: cpu cuda"; then
    grep -q "^  nccl_then_rmsnorm$" "$IT_TMP/all.txt" || fail "a cuda build does not list nccl_then_rmsnorm"
    ! grep -q "built without its cuda backend" "$IT_TMP/all.txt" || fail "a cuda build says it lacks cuda"
else
    tail -n 1 "$IT_TMP/all.txt" | grep -q "^(this bracket was built without its cuda backend: its cuda variants and cuda incumbents are not listed" ||
        fail "a build without cuda does not say its cuda variants are not listed"
fi
# the moe target's list holds no allreduce variant
"$BK_BRACKET" plan variants --target moe.fused_experts_reduce | grep -q "shm_twopass" &&
    fail "--target moe.fused_experts_reduce listed shm_twopass"
# what a diagnostic is, and its params; a domain in words
grep -A1 "^  slowed$" "$IT_TMP/all.txt" | grep -q "DIAGNOSTIC: .*(params: base, fraction" ||
    fail "slowed's line does not say it is a diagnostic with its params"
grep -A2 "^  shm_oneshot_fused$" "$IT_TMP/all.txt" | grep -q "domain: cpu; bf16; tokens 1\.\.512; hidden 8\.\.16384, a multiple of 8" ||
    fail "shm_oneshot_fused's domain line"
# each target's incumbents this build has and how to verify without a plan; a variant
# reaching its peers through NCCL says it needs a GPU a rank (a cpu-only build has none)
if grep -q "^  nccl_then_rmsnorm$" "$IT_TMP/all.txt"; then
    cuda_ar=", nccl_then_rmsnorm (cuda)" cuda_moe=", moe_serial_cuda (cuda)"
else
    cuda_ar="" cuda_moe=""
fi
grep -A1 "^collective.allreduce_residual_rmsnorm: " "$IT_TMP/all.txt" |
    grep -qF "  incumbent: shm_twopass (cpu)$cuda_ar; \`bracket verify --target collective.allreduce_residual_rmsnorm --variant V\` checks V without a plan" ||
    fail "the allreduce target's incumbents line"
grep -A1 "^moe.fused_experts_reduce: " "$IT_TMP/all.txt" | grep -qF "  incumbent: moe_serial (cpu)$cuda_moe;" ||
    fail "the moe target's incumbents line"
if grep -q "^  nccl_then_rmsnorm$" "$IT_TMP/all.txt"; then
    grep -A3 "^  nccl_then_rmsnorm$" "$IT_TMP/all.txt" | grep -q "^      NCCL at lanes above 1: one GPU a rank$" ||
        fail "nccl_then_rmsnorm does not say it needs a GPU a rank"
fi
! grep -A3 "^  shm_oneshot_fused$" "$IT_TMP/all.txt" | grep -q "NCCL" || fail "shm_oneshot_fused said NCCL"

# --set candidate.variant without candidate.source_digest: the digest is still the plan's
# candidate's, and plan check says so (not for the plan's own candidate, nor a digest set too)
"$BK_BRACKET" plan check "$IT_PLAN" --set candidate.variant=shm_twopass >"$IT_TMP/sd1.txt"
"$BK_BRACKET" plan check "$IT_PLAN" >"$IT_TMP/sd2.txt"
"$BK_BRACKET" plan check "$IT_PLAN" --set candidate.variant=shm_twopass \
    --set candidate.source_digest=sha256:$(printf '%064d' 1) >"$IT_TMP/sd3.txt"
cat "$IT_TMP/sd1.txt"
grep -qF "  candidate.source_digest: still the plan's (for shm_oneshot_fused); --set changed candidate.variant to shm_twopass: the record's identity.candidate_source_digest names the plan's candidate's source, not shm_twopass's" "$IT_TMP/sd1.txt" ||
    fail "plan check: no source digest note after --set candidate.variant"
! grep -q "source_digest" "$IT_TMP/sd2.txt" "$IT_TMP/sd3.txt" ||
    fail "plan check: a source digest note without a --set that changed only the variant"
set +e
"$BK_BRACKET" plan variants --target nope >"$IT_TMP/e1" 2>&1; rc1=$?
"$BK_BRACKET" plan variants stray >"$IT_TMP/e2" 2>&1; rc2=$?
"$BK_BRACKET" plan frobnicate >"$IT_TMP/e3" 2>&1; rc3=$?
set -e
cat "$IT_TMP/e1" "$IT_TMP/e2" "$IT_TMP/e3"
[ "$rc1" = 2 ] && grep -q "no target 'nope' (known: collective.allreduce_residual_rmsnorm, moe.fused_experts_reduce)" "$IT_TMP/e1" ||
    fail "--target nope: exit $rc1"
[ "$rc2" = 2 ] && grep -q "unexpected argument 'stray'" "$IT_TMP/e2" || fail "stray argument: exit $rc2"
[ "$rc3" = 2 ] && grep -q "unknown subcommand 'frobnicate' (check or variants)" "$IT_TMP/e3" ||
    fail "unknown subcommand: exit $rc3"
echo "PASS: plan variants lists the catalog"
