#!/usr/bin/env bash
# bracket verify: the cpu candidates pass against the float64 reference across their
# domain (token and hidden edges, one past each served by the incumbent); a corrupting
# variant fails with exit 3 and names its first bad element; a candidate that serves none
# of the shapes is refused (exit 2), never PASSED; engines leave nothing behind.
. "$(dirname "$0")/lib.sh"
set -e
v() { set +e; "$BK_BRACKET" verify "$@" >"$IT_TMP/v.log" 2>&1; RC=$?; set -e; cat "$IT_TMP/v.log"; }
has() { grep -Eq -- "$1" "$IT_TMP/v.log"; }
MOE_PLAN=$BK_SOURCE_DIR/plans/moe-cpu.json

# a plan given as a pipe is read once (a second read found it empty: a "syntax error")
v <(cat "$IT_PLAN") --checks 1
[ "$RC" = 0 ] && has "^PASSED" || fail "verify of a plan given as a pipe: exit $RC"
v "$IT_PLAN" --checks 2
[ "$RC" = 0 ] || fail "verify of shm_oneshot_fused exited $RC"
grep -q "^PASSED" "$IT_TMP/v.log" || fail "no PASSED line"
has " 513 +4096 +shm_twopass " || fail "the shape past the domain was not routed to the incumbent"
# the first column holds the seed, and is called so
has "^seed +shape +tokens +hidden " || fail "the first column is not headed seed"
# hidden edges at the smallest tokens: smallest and largest served, one past the largest,
# one below the smallest (7: 8 - 8 is no size) and a non-multiple of 8 routed to the
# incumbent
has " 1 +8 +shm_oneshot_fused " || fail "the smallest hidden was not probed"
has " 1 +16384 +shm_oneshot_fused " || fail "the largest hidden was not probed"
has " 1 +16392 +shm_twopass " || fail "one past the largest hidden was not probed (or not routed)"
has " 1 +12 +shm_twopass " || fail "a hidden not a multiple of 8 was not probed (or not routed)"
has " 1 +7 +shm_twopass " || fail "one below the smallest hidden was not probed (or not routed)"
# 11 shapes x 2 seeds: 7 served by the candidate, 4 (513 tokens, hidden 7, 12, 16392) routed
has "^PASSED: 0 failing shape check\(s\) of 22; the candidate shm_oneshot_fused served 14, the incumbent shm_twopass 8 " ||
    fail "the summary does not count the checks the candidate and the incumbent served"

# an out-of-domain first shape: the probes take the hidden of the first shape it serves
v "$IT_PLAN" --checks 1 --seed 5 --set 'workload.shapes[0].hidden=4100'
[ "$RC" = 0 ] || fail "verify with shapes[0].hidden=4100 exited $RC"
has " 7 +4096 +shm_oneshot_fused " || fail "the probes copied shapes[0]'s out-of-domain hidden"
# no shape served: the probes take the domain's smallest hidden
v "$IT_PLAN" --checks 1 --seed 5 --set 'workload.shapes[0].hidden=4100' \
    --set 'workload.shapes[1].hidden=16392'
[ "$RC" = 0 ] || fail "verify with both hiddens outside the domain exited $RC"
has " 7 +8 +shm_oneshot_fused " || fail "the probes did not fall back to the domain's smallest hidden"

# a candidate serving nothing: refused, never PASSED (world outside, or every shape outside)
v "$IT_PLAN" --checks 1 --seed 5 --world 9
[ "$RC" = 2 ] || fail "verify at world 9 (outside the domain) exited $RC, expected 2"
has "the candidate shm_oneshot_fused serves none of the [0-9]+ shape check" ||
    fail "world 9: no 'serves none' message"
has "world 9 not in" || fail "world 9: the reason is not given"
! grep -q "PASSED" "$IT_TMP/v.log" || fail "world 9: PASSED although the candidate ran nowhere"
v "$IT_PLAN" --checks 1 --seed 5 --no-domain-shapes --set 'workload.shapes[0].hidden=4100' \
    --set 'workload.shapes[1].hidden=16392'
[ "$RC" = 2 ] || fail "verify with no shape in the domain exited $RC, expected 2"
has "hidden 4100 not a multiple of 8" && has "hidden 16392 > max 16384" ||
    fail "no shape in the domain: the reasons are not given"
! grep -q "PASSED" "$IT_TMP/v.log" || fail "no shape in the domain: PASSED"

# token probes past 4096 (moe_fused_combine's upper edge), and the bound on a probe's memory
v "$MOE_PLAN" --checks 1 --seed 5
[ "$RC" = 0 ] || fail "verify of moe_fused_combine exited $RC"
has " 4096 +64 +4 +2 +32 +moe_fused_combine " || fail "moe: the token edge 4096 was not probed"
has " 4097 +64 +4 +2 +32 +moe_serial " || fail "moe: one past the token edge was not probed"
v "$MOE_PLAN" --checks 1 --seed 5 --set 'workload.shapes[0].hidden=65536'
[ "$RC" = 0 ] || fail "verify of moe_fused_combine at hidden 65536 exited $RC"
has "probe tokens 4097, hidden 65536 runs at hidden 1 .*more than the 1024 MiB" ||
    fail "moe: the too-big probe is not explained"
has " 4097 +1 +4 +2 +32 +moe_serial " || fail "moe: the too-big token probe was not run smaller"

v "$IT_PLAN" --variant shm_twopass --checks 1 --world 4 --no-domain-shapes
[ "$RC" = 0 ] || fail "verify of shm_twopass at world 4 exited $RC"
has "^PASSED: 0 failing shape check\(s\) of 2; the candidate shm_twopass served all 2" ||
    fail "--no-domain-shapes: not the plan's 2 shapes only"

v "$IT_PLAN" --set candidate.variant=corrupt --set 'candidate.params={"base":"shm_oneshot_fused"}' --checks 1
[ "$RC" = 3 ] || fail "verify of corrupt exited $RC, expected 3"
grep -q "FAILED" "$IT_TMP/v.log" || fail "corrupt not reported"
has "^ +first bad: shape 0 \(tokens 1, hidden 4096\) out rank [0-9]+ element [0-9]+: got [-0-9.e+]+, want [-0-9.e+]+ " ||
    fail "corrupt: the first bad element is not named"
# a diagnostic serves its base's domain widened by the default base (shm_twopass on cpu):
# the probes span every shape, none left out (tests/test_verify_probes.c: without one)
v "$IT_PLAN" --set candidate.variant=lazy --set 'candidate.params={"base":"shm_oneshot_fused"}' \
    --checks 1 --seed 5
[ "$RC" = 0 ] || fail "verify of lazy over shm_oneshot_fused exited $RC"
has " 1 +1 +lazy " && has " 64 +4096 +lazy " || fail "lazy: the probes of what it serves"
! has "left out" || fail "lazy on cpu: a probe left out although the default base serves it"
has "^PASSED: 0 failing shape check\(s\) of 5; the candidate lazy served all 5" ||
    fail "lazy on cpu: not every probe served by the candidate"
v "$IT_PLAN" --variant nope
[ "$RC" = 2 ] || fail "unknown variant exited $RC"
# named by the flag the user typed, not by the plan field it sets
grep -q "^bracket verify: --variant: no variant 'nope' for target" "$IT_TMP/v.log" ||
    fail "unknown variant message does not name --variant"
! grep -q "candidate.variant" "$IT_TMP/v.log" || fail "unknown --variant named as candidate.variant"
# ... even beside a --set of the same field, which --variant overrides: not "from --set"
v "$IT_PLAN" --set candidate.variant=lazy --variant nope
[ "$RC" = 2 ] && grep -q "^bracket verify: --variant: no variant 'nope' for target" "$IT_TMP/v.log" ||
    fail "unknown --variant beside a --set: exit $RC, or not named by --variant"
! grep -q "from --set" "$IT_TMP/v.log" || fail "unknown --variant blamed on the --set it overrode"
# --target T --variant V, no plan: the target's cpu incumbent, its typical shape (8 x 4096),
# the probes, a lane of 2, tolerance 1e-2 (the shipped plans')
AR=collective.allreduce_residual_rmsnorm
v --target $AR --variant shm_oneshot_fused --checks 1 --seed 5
[ "$RC" = 0 ] || fail "verify --target of shm_oneshot_fused exited $RC"
has "^bracket verify: shm_oneshot_fused on $AR, backend cpu, lane of 2, 1 check\(s\), tolerance rtol 0.01 atol 0.01$" ||
    fail "--target: not the cpu lane of 2 at 1e-2"
has "^5 +0 +8 +4096 +shm_oneshot_fused " || fail "--target: the typical shape is not shape 0"
has "^5 +[0-9]+ +513 +4096 +shm_twopass " || fail "--target: the probe past the tokens not routed to shm_twopass"
has "^PASSED: 0 failing shape check\(s\) of 11; the candidate shm_oneshot_fused served 7, the incumbent shm_twopass 4 " ||
    fail "--target: not 11 shapes, 7 served by the candidate"
# --world, --set and --no-domain-shapes apply to that plan as to a file's
v -t $AR -v shm_oneshot_fused --checks 1 --seed 5 --world 4 --no-domain-shapes \
    --set 'workload.shapes=[{"tokens":3,"hidden":64,"weight":1}]' --set quality.atol=0.02
[ "$RC" = 0 ] || fail "verify --target with --world 4 and --set exited $RC"
has "lane of 4, 1 check\(s\), tolerance rtol 0.01 atol 0.02$" || fail "--target: --world 4 or --set quality.atol not applied"
has "^5 +0 +3 +64 +shm_oneshot_fused " && has "^PASSED: 0 failing shape check\(s\) of 1;" ||
    fail "--target: --set workload.shapes not applied"
v --target moe.fused_experts_reduce --variant moe_fused_combine --checks 1 --seed 5
[ "$RC" = 0 ] || fail "verify --target of moe_fused_combine exited $RC"
has "^5 +0 +4 +256 +8 +2 +64 +moe_fused_combine " || fail "--target moe: the typical shape is not shape 0"
has " 4097 +256 +8 +2 +64 +moe_serial " || fail "--target moe: the probe past the tokens not routed to moe_serial"
# a diagnostic wrapper without a plan wraps its backend's incumbent (corrupt runs on cpu
# alone, so that is its backend, GPU or not): corrupt fails its checks
v --target $AR --variant corrupt --checks 1 --seed 5 --no-domain-shapes
[ "$RC" = 3 ] || fail "verify --target of corrupt exited $RC, expected 3"
has "^ +first bad: shape 0 \(tokens 8, hidden 4096\) out rank 0 element " || fail "--target corrupt: no first bad element"
# bad usage: exit 2, saying what is wrong, before any engine starts
v --target nope --variant shm_oneshot_fused
[ "$RC" = 2 ] && has "^bracket verify: --target: no target 'nope' \(known: $AR, moe.fused_experts_reduce\)$" ||
    fail "--target nope: exit $RC, or the known targets not listed"
v "$IT_PLAN" --target $AR --variant shm_oneshot_fused
[ "$RC" = 2 ] && has "^bracket verify: a PLAN \(.*it-cpu.json\) or --target, not both$" ||
    fail "a PLAN and --target: exit $RC, or no message"
v
[ "$RC" = 2 ] && has "^bracket verify: a PLAN, or --target T, expected$" ||
    fail "no PLAN and no --target: exit $RC, or no message"
v --target $AR --variant nope
[ "$RC" = 2 ] && has "^bracket verify: --variant: no variant 'nope' for target '$AR' \(known: shm_twopass," ||
    fail "--target with an unknown variant: exit $RC, or the message"
v --target $AR --variant shm_oneshot_fused --set quality.rtol=-1
[ "$RC" = 2 ] && has "^bracket verify: --target $AR: quality.rtol: must be a number >= 0, got -1 \(from --set \"quality.rtol=-1\"\)$" ||
    fail "--target with a bad --set: exit $RC, or the message"
# a candidate of cuda alone where no GPU is visible: refused, without the --set backend=cpu
# hint that cannot help it (a build without cuda names it a cuda variant it lacks); where a
# GPU is, tests/gpu/test_verify_cuda.sh runs it
if ! nvidia-smi -L >/dev/null 2>&1; then
    v --target $AR --variant ipc_twoshot_fused
    [ "$RC" = 2 ] || fail "ipc_twoshot_fused without a GPU: exit $RC, expected 2"
    has "no GPU is visible here .* \(the candidate ipc_twoshot_fused runs on cuda alone\)$" ||
        has "^bracket verify: --variant: 'ipc_twoshot_fused' is a cuda variant of target '$AR', and this bracket was built without its cuda backend" ||
        fail "ipc_twoshot_fused without a GPU: not refused as a candidate of cuda alone"
    ! has "backend=cpu" || fail "ipc_twoshot_fused without a GPU: told to use --set backend=cpu"
fi
if pgrep -f "bracket engine --plan $IT_TMP/" >/dev/null; then fail "engines left behind by --target"; fi

# --target T alone: each real variant of T in turn (on cpu: the backend auto picks without
# a GPU, else --set), its own section as --variant V gives it, then a line a variant
CPU=()
nvidia-smi -L >/dev/null 2>&1 && CPU=(--set backend=cpu)
v --target $AR --checks 1 --seed 5 "${CPU[@]}"
[ "$RC" = 0 ] || fail "verify --target $AR exited $RC"
has "^bracket verify: --target $AR: its 2 variant\(s\) on backend cpu, .*its 5 diagnostic variant\(s\), wrong on purpose, are left out" ||
    fail "--target alone: the header does not count 2 variants and 5 diagnostic ones left out"
has "^== 1 of 2: shm_twopass ==$" && has "^== 2 of 2: shm_oneshot_fused ==$" ||
    fail "--target alone: not a section for each of shm_twopass and shm_oneshot_fused"
! has "^== .*(corrupt|slowed|crash|lazy|mutate)" || fail "--target alone: a diagnostic variant verified"
has "^PASSED: 0 failing shape check\(s\) of 5; the candidate shm_twopass served all 5$" ||
    fail "--target alone: the incumbent shm_twopass not verified as a candidate"
has "^PASSED: 0 failing shape check\(s\) of 11; the candidate shm_oneshot_fused served 7, the incumbent shm_twopass 4 " ||
    fail "--target alone: shm_oneshot_fused not verified as --variant does"
has "^  shm_twopass +PASSED$" && has "^  shm_oneshot_fused +PASSED$" && has "^PASSED: all 2 variant\(s\)$" ||
    fail "--target alone: no summary line for each variant, or no PASSED"
v --target moe.fused_experts_reduce --checks 1 --seed 5 --no-domain-shapes "${CPU[@]}"
[ "$RC" = 0 ] && has "^  moe_serial +PASSED$" && has "^  moe_fused_combine +PASSED$" ||
    fail "--target moe alone: exit $RC, or not both variants passed"
# one refused (tokens past shm_oneshot_fused's 512), the other passed: not verified, exit 2,
# with the refusal's reason in its section
ONE='workload.shapes=[{"tokens":1000,"hidden":64,"weight":1}]'
v --target $AR --checks 1 --seed 5 --no-domain-shapes --set "$ONE" "${CPU[@]}"
[ "$RC" = 2 ] || fail "--target alone, one variant refused: exit $RC, expected 2"
has "the candidate shm_oneshot_fused serves none of the 1 shape check\(s\)" ||
    fail "--target alone: the refusal's reason not in the output"
has "^  shm_twopass +PASSED$" && has "^  shm_oneshot_fused +not verified: refused " &&
    has "^NOT ALL VERIFIED: 1 of 2 variant\(s\) passed, 0 failed, 1 not verified$" ||
    fail "--target alone, one refused: the summary does not say so"
# the summary on standard output says where the reason went: standard error
set +e
"$BK_BRACKET" verify --target $AR --checks 1 --seed 5 --no-domain-shapes --set "$ONE" "${CPU[@]}" \
    2>/dev/null >"$IT_TMP/v.log"
set -e
has "^  shm_oneshot_fused +not verified: refused \(the reason: on standard error, in its section\)$" &&
    ! has "serves none" || fail "--target alone, stdout alone: the summary does not say the reason went to stderr"
# a failure outranks a refusal: exit 3
v --target $AR --checks 1 --seed 5 --no-domain-shapes --set "$ONE" --set quality.rtol=0 \
    --set quality.atol=0 "${CPU[@]}"
[ "$RC" = 3 ] || fail "--target alone, one failed and one refused: exit $RC, expected 3"
has "^  shm_twopass +FAILED$" && has "^FAILED: 0 of 2 variant\(s\) passed, 1 failed, 1 not verified$" ||
    fail "--target alone, one failed: the summary does not say so"
# a bad --set is said once, before any variant's verify
v --target $AR --set quality.rtol=-1
[ "$RC" = 2 ] && [ "$(grep -c "quality.rtol: must be a number >= 0, got -1" "$IT_TMP/v.log")" = 1 ] ||
    fail "--target alone with a bad --set: exit $RC, or not said exactly once"
! has "^== " || fail "--target alone with a bad --set: a variant's verify started"
if pgrep -f "bracket engine --plan $IT_TMP/" >/dev/null; then fail "engines left behind by --target alone"; fi

# a long seed widens its column: every row's variant starts under "served by"
v "$IT_PLAN" --checks 2 --seed 123456789012 --no-domain-shapes
[ "$RC" = 0 ] || fail "verify with a 12-digit seed exited $RC"
python3 - "$IT_TMP/v.log" <<'PY' || fail "a long seed misaligns the table"
import sys
lines = open(sys.argv[1]).read().splitlines()
head = next(l for l in lines if l.startswith("seed "))
col = head.index("served by")
rows = [l for l in lines if l[:12] in ("123456789012", "123456789013")]
assert len(rows) == 4, rows
# each check draws a fresh seed: the second check's rows carry the next one
assert sorted(l[:12] for l in rows) == ["123456789012"] * 2 + ["123456789013"] * 2, rows
for l in rows:
    assert l[col - 1] == " " and l[col:].startswith("shm_"), (col, l)
PY
# --seed 0 is a seed like any other: a failure at seed 0 replays with it (not the clock's)
v "$IT_PLAN" --checks 1 --seed 0 --no-domain-shapes
[ "$RC" = 0 ] || fail "verify --seed 0 exited $RC"
has "^0 +0 +1 +4096 +shm_oneshot_fused " && has "^0 +1 +8 +4096 +shm_oneshot_fused " ||
    fail "--seed 0: the rows are not of seed 0"

# one failing row fails verify wherever it stands, before passing rows too: the incumbent
# (corrupt here) serves shape 0, outside the candidate's domain; the candidate shape 1
v "$IT_PLAN" --no-domain-shapes --checks 1 --seed 5 --set incumbent.variant=corrupt \
    --set 'workload.shapes=[{"tokens":600,"hidden":1024,"weight":1},{"tokens":1,"hidden":1024,"weight":1}]'
[ "$RC" = 3 ] || fail "a failing first row and a passing last one: exit $RC, expected 3"
has "^FAILED: 1 failing shape check\(s\) of 2;" || fail "the failing first row is not counted"
has "^ +first bad: shape 0 \(tokens 600, hidden 1024\) out rank 0 element 0: got " ||
    fail "the incumbent's bad element is not named"

# an engine that dies (here: killed) is verify's failure, exit 1, not a failed check (3);
# seen at once, not at timeouts.arm_s (60 s); the message names that engine, not its peer
# that verify stopped after it
TMPDIR=$IT_TMP timeout 120 "$BK_BRACKET" verify "$IT_PLAN" --checks 1000 >"$IT_TMP/v.log" 2>&1 &
VP=$!
KILLED=
for i in $(seq 3000); do # at most about 60 s
    kill -0 "$VP" 2>/dev/null || break
    E=$(pgrep -f "bracket engine --plan $IT_TMP/.* --rank 1 " | head -n 1 || true)
    if [ -n "$E" ] && kill -KILL "$E" 2>/dev/null; then
        KILLED=${KILLED:-$(date +%s)}
    fi
    sleep 0.02
done
set +e
wait "$VP"
RC=$?
set -e
END=$(date +%s)
cat "$IT_TMP/v.log"
[ -n "$KILLED" ] || fail "no engine of verify was seen to kill"
[ "$RC" = 1 ] || fail "a killed engine: verify exited $RC, expected 1"
[ $((END - KILLED)) -le 15 ] || fail "a killed engine: verify took $((END - KILLED)) s to notice"
has "^bracket verify: seed [0-9]+: engine rank 1 \(signal 9 \(Killed\)\)" ||
    fail "a killed engine: the message does not name engine rank 1 and its signal"
! has "^PASSED" || fail "a killed engine: PASSED"
if pgrep -f "bracket engine --plan $IT_TMP/" >/dev/null; then fail "engines left behind"; fi
# a parameter that holds at the plan's lane (2) but not at --world's: refused before any
# engine starts (exit 2, naming --world), as the same lane given by arena.tp is
v "$IT_PLAN" --variant slowed --set 'candidate.params={"rank":1}' --world 1 --checks 1 --seed 1 \
    --no-domain-shapes
[ "$RC" = 2 ] && has "candidate.params.rank: must be a rank of the lane, an integer in 0..0 \(the lane has 1 rank\) \(from --set \"candidate.params=\{\"rank\":1\}\"\) \(with --world 1\)$" ||
    fail "a diagnostic's rank past --world's lane: exit $RC, or the message"
! has "^seed " || fail "a diagnostic's rank past --world's lane: the table was started"
# a $TMPDIR that cannot hold verify's private folder is named, as bad input (this
# environment's: exit 2, as a bad flag; was 1, an internal failure)
set +e
TMPDIR=$IT_TMP/no-such-dir "$BK_BRACKET" verify "$IT_PLAN" --checks 1 --no-domain-shapes >"$IT_TMP/v.log" 2>&1
RC=$?
set -e
[ "$RC" = 2 ] && has "^bracket verify: cannot write the plan to a private folder in $IT_TMP/no-such-dir \(\\\$TMPDIR\): No such file or directory \(set TMPDIR to a writable folder" ||
    fail "an unusable TMPDIR: exit $RC, or the folder not named"
# a flag's error is its line and a pointer to --help, not the whole usage after it
v "$IT_PLAN" --variant ""
[ "$RC" = 2 ] && has "^bracket verify: --variant: a variant's name, 1 to 127 characters, got 0$" ||
    fail "--variant '': exit $RC, or not said as the flag's"
v "$IT_PLAN" --variant "$(printf 'v%.0s' $(seq 300))"
[ "$RC" = 2 ] && has "^bracket verify: --variant: a variant's name, 1 to 127 characters, got 300$" ||
    fail "--variant of 300 characters: exit $RC, or cut and looked up"
v "$IT_PLAN" --checks 0
[ "$RC" = 2 ] && [ "$(wc -l <"$IT_TMP/v.log")" = 2 ] && has "^bracket verify: --checks: '0' is out of range" ||
    fail "--checks 0: exit $RC, or more than the error and the --help pointer"
# --help to a standard output that cannot be written: said, exit 1 (as every command)
set +e
"$BK_BRACKET" verify --help >/dev/full 2>"$IT_TMP/v.log"
RC=$?
set -e
[ "$RC" = 1 ] && has "^bracket verify: cannot write the standard output" ||
    fail "verify --help >/dev/full: exit $RC, or not said"
# a closed standard output stays closed to the run: descriptor 1 is held by /dev/null (read
# only), so no file, socket or ZeroMQ eventfd of verify takes its number and the table is
# not written into one; the run says it could not write its table (exit 1)
(exec 1>&-; exec "$BK_BRACKET" verify "$IT_PLAN" --checks 2 --seed 1 --no-domain-shapes) \
    2>"$IT_TMP/v.log" &
VP=$!
SEEN=""
for _ in $(seq 400); do
    # only once the subshell is bracket: before its exec it still holds the test's stdout
    # (a pipe under ctest), which is no descriptor of verify's
    if [ "$(cat "/proc/$VP/comm" 2>/dev/null)" = bracket ]; then
        L=$(readlink "/proc/$VP/fd/1" 2>/dev/null) && SEEN="$SEEN $L"
    fi
    kill -0 "$VP" 2>/dev/null || break
    sleep 0.01
done
set +e
wait "$VP"
RC=$?
set -e
echo "descriptor 1 seen as:$(echo "$SEEN" | tr ' ' '\n' | sort | uniq -c | tr '\n' ' ')"
[ -n "$SEEN" ] || fail "closed stdout: descriptor 1 of verify never seen"
[ -z "$(echo "$SEEN" | tr ' ' '\n' | grep -v '^$' | grep -vx /dev/null)" ] ||
    fail "closed stdout: descriptor 1 of verify was taken by another file:$SEEN"
[ "$RC" = 1 ] && has "^bracket verify: cannot write the standard output: Bad file descriptor" ||
    fail "closed stdout: exit $RC, or not said"
# shapes past this host's memory: refused before any engine starts (exit 2, naming the shape
# and the sizes), not an engine killed for memory ("signal 9 (Killed): no status"); 8 engines
# of 37 GiB each, more than any machine this suite runs on has
v "$BK_SOURCE_DIR/plans/demo-cpu.json" --checks 1 --seed 1 --no-domain-shapes --world 8 \
    --variant shm_twopass --set 'workload.shapes=[{"tokens":131072,"hidden":16384,"weight":1}]'
[ "$RC" = 2 ] && has "this host would hold about [0-9.]+ GiB at the peak .*8 engine\(s\) of about [0-9.]+ GiB each.* available; lower tokens x hidden of the largest shape \(shape 0 of the table: tokens 131072 x hidden 16384\)" ||
    fail "a shape past this host's memory: exit $RC, or not refused naming it"
! has "^seed" || fail "a shape past this host's memory: verify started checking it"
if pgrep -f "bracket engine --plan $IT_TMP/" >/dev/null; then fail "engines left behind"; fi
echo "PASS: verify"
