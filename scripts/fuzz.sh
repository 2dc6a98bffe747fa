#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer and AddressSanitizer (CAPTURE_FUZZ=1, see Package.swift)
# and runs each for FUZZ_SECONDS (default 60), starting from its seed corpus in Fuzz/corpus/TARGET.
# New inputs go to .build/fuzz/corpus/TARGET (kept between runs), findings to .build/fuzz/findings/TARGET.
# Prints one line per target (executions, executions per second, coverage, findings) and exits
# non-zero when a target found a crash, naming the input that reproduces it:
#   .build/debug/fuzz-TARGET INPUT        replays it (a normal build replays, a fuzz build fuzzes)
#   scripts/fuzz.sh [TARGET...]           default: frames hello caf spool spool-meta export settings
# FUZZ_CONFIGURATION=release builds every target optimized, dependencies included (a full release
# build, minutes more): for long runs, where it pays (ArgumentParser's debug build checks a command's
# whole definition at every parse, which holds the settings target's whole parses to a few a second).
# The default, debug, reuses what `make test` built: for short runs like CI's.
# FUZZ_SCRATCH=DIR builds in DIR instead of .build, so that a fuzz build (other compiler flags) does
# not make the next normal build start over; CI leaves it unset, reusing what `make test` built.
set -uo pipefail
cd "$(dirname "$0")/.."
swift=${SWIFT:-swift}
scratch=()
[ -z "${FUZZ_SCRATCH:-}" ] || scratch=(--scratch-path "$FUZZ_SCRATCH")
seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frames hello caf spool spool-meta export settings)
configuration() { echo "${FUZZ_CONFIGURATION:-debug}"; }
# The settings target allocates heavily inside ArgumentParser (Swift without unsafe memory):
# ASan's allocation stacks and leak checks would halve its speed.
asan_options() { case "$1" in settings) echo "malloc_context_size=0:detect_leaks=0" ;; *) echo "${ASAN_OPTIONS:-}" ;; esac; }
# The settings target's inputs are bounded to 1,024 bytes (libFuzzer's -max_len; FUZZ_SETTINGS_MAX_LEN
# changes it): a whole ArgumentParser parse costs more with every argument an input carries, and
# unbounded inputs grew to 4 KiB and more and cut the target from 3,350 to under 900 executions a second.
# 1 KiB is nearly three times the largest seed (a config file setting every numeric option of capture-send).
input_bound() { case "$1" in settings) echo "-max_len=${FUZZ_SETTINGS_MAX_LEN:-1024}" ;; *) echo "" ;; esac; }
mkdir -p .build/fuzz
for target in "${targets[@]}"; do
  if ! CAPTURE_FUZZ=1 "$swift" build -c "$(configuration "$target")" "${scratch[@]}" --product "fuzz-$target" > .build/fuzz/build.log 2>&1; then
    grep -E "error:" .build/fuzz/build.log | head -20 >&2
    echo "fuzz: the build of fuzz-$target failed (.build/fuzz/build.log)" >&2
    exit 1
  fi
done
# FUZZ_JOBS=N runs N targets at once (default 1; one per core at most makes sense), and
# FUZZ_RUNS=N stops a target after N executions (libFuzzer's -runs) before its FUZZ_SECONDS run out:
#   FUZZ_CONFIGURATION=release FUZZ_JOBS=2 FUZZ_RUNS=10000000 FUZZ_SECONDS=7200 make fuzz
#                                         every target to 10^7, optimized, on both cores
jobs=${FUZZ_JOBS:-1}
runs_limit=()
[ -z "${FUZZ_RUNS:-}" ] || runs_limit=(-runs="$FUZZ_RUNS")
row() { printf '%-10s %9s %12s %10s %8s %8s %9s\n' "$@"; }
fuzz_one() {
  local target=$1 corpus=.build/fuzz/corpus/$1 findings=.build/fuzz/findings/$1 log=.build/fuzz/$1.log bin code started
  mkdir -p "$corpus" "$findings"
  cp -n Fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
  bin=$(CAPTURE_FUZZ=1 "$swift" build -c "$(configuration "$target")" "${scratch[@]}" --show-bin-path)
  started=$SECONDS
  local bound; bound=$(input_bound "$target")
  ASAN_OPTIONS=$(asan_options "$target") "$bin/fuzz-$target" "$corpus" -max_total_time="$seconds" "${runs_limit[@]}" ${bound:+"$bound"} \
    -print_final_stats=1 -artifact_prefix="$findings/" -timeout=10 -rss_limit_mb=4096 > "$log" 2>&1
  code=$?
  local runs rate cov ft found
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  found=$(find "$findings" -type f | wc -l)
  row "$target" "$((SECONDS - started)) s" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$found" > ".build/fuzz/$target.row"
  if [ "$code" -ne 0 ] || [ "$found" -gt 0 ]; then
    {
      echo "fuzz: fuzz-$target found a failure (exit $code); inputs: $(find "$findings" -type f | tr '\n' ' ')"
      grep -E "Fatal error|Precondition failed|ERROR: AddressSanitizer|SUMMARY" "$log" | head -5
    } > ".build/fuzz/$target.failure"
  fi
}
rm -f .build/fuzz/*.row .build/fuzz/*.failure
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$target" &
done
wait
status=0
row target time executions "exec/s" cov ft findings
for target in "${targets[@]}"; do
  cat ".build/fuzz/$target.row" 2>/dev/null || row "$target" "?" "?" "?" "?" "?" "?"
  if [ -f ".build/fuzz/$target.failure" ]; then status=1; cat ".build/fuzz/$target.failure" >&2; fi
done
exit $status
