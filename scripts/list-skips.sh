#!/usr/bin/env bash
# list-skips.sh LOG - the skips a ctest log (Testing/Temporary/LastTest.log, which keeps every
# test's output, passing ones too) records, each once with its count: a program's own "SKIP:"
# or "SKIPPED:" reason (a whole program or a part of one skipped) and cmocka's
# "[  SKIPPED ] test" line (a test skipped inside a passing program; the list cmocka repeats
# after "[  SKIPPED ] N test(s), listed below:" is not counted again). Prints nothing when
# there are none. Used by `make test` and scripts/gpu-run.sh's test step.
[ -r "${1:-}" ] || { echo "list-skips.sh: cannot read the log '${1:-}'" >&2; exit 2; }
LC_ALL=C awk '
  /^\[  SKIPPED \] [0-9]+ test[(]s[)], listed below:/ { listed = 1; next }
  listed && /^\[  SKIPPED \] / { next }
  { listed = 0 }
  match($0, /SKIP(PED)?:.*/) { print substr($0, RSTART); next }
  /^\[  SKIPPED \] [A-Za-z_]/ { print }
' "$1" | sort | uniq -c
exit 0
