#!/usr/bin/env bash
# Handover through HAProxy (docs/SCALE-OUT.md): time from SIGKILL of the receiver holding a stream
# to the first Ack from the receiver that takes it over, and catch-up after it, against a link cut
# to the same receiver. Needs haproxy (scripts/install-deps.sh). HANDOVER_TRIALS (default 5) per
# scenario; each trial streams paced PCM. A third scenario kills the receiver while the other is
# down for HANDOVER_OUTAGE seconds (default 10) and measures the catch-up after it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v haproxy >/dev/null || { echo "haproxy is not installed; run scripts/install-deps.sh" >&2; exit 1; }
work=${BENCH_WORK:-$(mktemp -d /tmp/capture-bench.XXXXXX)}/handover
mkdir -p "$work"
python3 "$here/handover.py" "${BENCH_BIN:-.build/release}" "$work" "${HANDOVER_TRIALS:-5}" "${HANDOVER_OUTAGE:-10}"
