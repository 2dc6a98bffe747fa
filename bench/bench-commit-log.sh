#!/usr/bin/env bash
# The receiver's sync round for 2,000, 5,000 and 10,000 streams, today's way (a data file, a packet
# journal and a position log per stream, two syncfs per round) against the commit log's (a data file
# per stream written without a sync, one record per stream appended to one log, one fdatasync; a
# checkpoint every 10 rounds on its own thread), in one invocation on the disk the receiver records
# to (BENCH_WORK). Issue 28. COMMIT_LOG_STREAMS and COMMIT_LOG_ROUNDS shorten it (default 50
# measured rounds, 200 ms apart, after 20 unmeasured). About 3 minutes.
set -euo pipefail
bin=${BENCH_BIN:-.build/release}
folder=${BENCH_WORK:-/tmp}/commit-log-bench
"$bin/capture-commit-log-bench" "$folder" "${COMMIT_LOG_STREAMS:-2000,5000,10000}" "${COMMIT_LOG_ROUNDS:-50}"
rm -rf "$folder"
