#!/usr/bin/env bash
# Live listening (docs/HTTP-API.md): receiver CPU with 10 listeners on 10 PCM streams (encoded to
# Opus) and on 10 Opus streams (remuxed), against no listener in the same run; latency from capture
# to a listener's first decodable sample for --buffer-seconds 0.5, 0.1 and 0.05. About 4 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_WORK:-$(mktemp -d /tmp/capture-bench.XXXXXX)}/listen
mkdir -p "$work"
python3 "$here/listen.py" "${BENCH_BIN:-.build/release}" "$work"
