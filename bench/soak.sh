#!/usr/bin/env bash
# The soak (issues 19 and 27; not part of make test): bench/soak.py with the release build.
#   bench/soak.sh [--minutes M] [--streams N] [--seed S]     defaults: 60 minutes, 500 streams, seed 7
# BIN=DIR uses other binaries (e.g. BIN=.build/debug for a quick run without a release build).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=60 streams=500 seed=7
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "soak: unknown argument $1 (use --minutes M, --streams N, --seed S)" >&2; exit 2 ;;
  esac
done
if [ -z "${BIN:-}" ]; then
  scripts/build-release.sh >/dev/null
  BIN=.build-static/release
fi
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true' EXIT
status=0
python3 bench/soak.py "$BIN" "$work" "$minutes" "$streams" "$seed" || status=$?
echo "(files and logs in $work)"
exit $status
