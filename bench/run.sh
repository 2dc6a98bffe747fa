#!/usr/bin/env bash
# Runs every benchmark (bench/bench-*.sh) against the release binaries in $1 and prints their
# tables. Each benchmark compares against a reference run in the same invocation and prints a
# Markdown table with the ratio; the README's performance section quotes them.
set -euo pipefail
bin=${1:-.build/release}
here=$(cd "$(dirname "$0")" && pwd)
export BENCH_BIN=$(cd "$bin" && pwd)
export BENCH_WORK=${BENCH_WORK:-$(mktemp -d /tmp/capture-bench.XXXXXX)}
trap 'rm -rf "$BENCH_WORK"' EXIT
status=0
for script in "$here"/bench-*.sh; do
  [ -e "$script" ] || continue
  echo
  echo "## $(basename "$script" .sh)"
  bash "$script" || { echo "benchmark $(basename "$script") failed" >&2; status=1; }
done
exit $status
