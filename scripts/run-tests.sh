#!/usr/bin/env bash
# Runs the built test suite (`make test` calls this after building) and keeps its whole output in
# .build/test-output.log. When something fails, the last lines printed name each failing test and
# its assertion, so the end of a CI log is enough to see what broke.
#   scripts/run-tests.sh [arguments for `swift test --skip-build`, e.g. --filter NAME]
set -uo pipefail
swift=${SWIFT:-swift}
log=.build/test-output.log
mkdir -p .build
"$swift" test --skip-build "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "run-tests: the test suite failed (exit $status). Failing tests and their assertions:"
  grep -E ": error: |' failed \(|✘ " "$log" | grep -v "^Test Suite" | tail -n 40 || echo "  (no assertion lines found: see $log)"
  echo "run-tests: the whole output is in $log"
fi
exit "$status"
