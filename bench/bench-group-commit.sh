#!/usr/bin/env bash
# Group commit strategies for the receiver's sync round (docs/DURABILITY.md, "Group commit"): per
# file fdatasync spread over 1, 2, 8 and 32 threads vs syncfs on the folder's file system, at 500,
# 2,000 and 5,000 files each written 8 KB per tick. The folder must be on the disk the receiver
# records to (BENCH_WORK, or GROUP_COMMIT_DIR). About 10 minutes; GROUP_COMMIT_FILES and
# GROUP_COMMIT_TICKS shorten it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
folder=${GROUP_COMMIT_DIR:-${BENCH_WORK:-/tmp}/group-commit}
python3 "$here/group-commit.py" "$folder" "${GROUP_COMMIT_FILES:-500,2000,5000}" "${GROUP_COMMIT_TICKS:-5}"
