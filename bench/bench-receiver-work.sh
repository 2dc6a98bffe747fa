#!/usr/bin/env bash
# The receiver's own work for each piece of audio (issue 32), against a reference build in the same
# invocation: one release capture-recv at a time under BENCH_WORK_STREAMS paced Opus streams from
# capture-load (0.5 s AudioData, --sync-ms 200), while uprobes count its calls of swift_retain,
# swift_release and swift_allocObject, and perf counts its system calls, over the steady window.
# Counts, unlike CPU time, do not move with the machine's load, so a few per AudioData more or less
# show between two builds where the CPU figures of bench-receiver-scale.sh (which move by ±5 %
# between runs) cannot. (Its CPU is not measured here: each uprobe hit is a trap into the kernel.)
# Counted per AudioData received
# (streams × window × 2), so they include the receiver's timers and commit-log rounds spread over
# the audio. Compares BENCH_BIN against BENCH_REFERENCE_BIN (the release binaries of another commit,
# e.g. built in a worktree with scripts/build-release.sh); without it, it says so and measures
# nothing. Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them); runs as root (uprobes, tracefs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

if [ -z "${BENCH_REFERENCE_BIN:-}" ]; then
  echo "bench-receiver-work compares two builds: set BENCH_REFERENCE_BIN to the release binaries of the build to compare with; nothing measured."
  exit 0
fi
streams=${BENCH_WORK_STREAMS:-200}
seconds=${BENCH_WORK_SECONDS:-30}
rounds=${BENCH_WORK_ROUNDS:-2}
tracing=/sys/kernel/tracing
[ -w "$tracing/uprobe_events" ] || tracing=/sys/kernel/debug/tracing
if [ ! -w "$tracing/uprobe_events" ]; then
  echo "bench-receiver-work needs uprobes: run it as root with tracefs mounted at /sys/kernel/tracing." >&2
  exit 1
fi

# file_offset BINARY SYMBOL: the symbol's offset in the file, which a uprobe is set at.
file_offset() {
  local address segment
  address=$(nm "$1" | awk -v symbol="$2" '$3 == symbol { print $1; exit }')
  [ -n "$address" ] || { echo "no $2 in $1" >&2; return 1; }
  segment=$(readelf -lW "$1" | awk '$1 == "LOAD" && / E / { print $2, $3; exit }')
  printf '0x%x\n' $((16#$address - ${segment#* } + ${segment% *}))
}

probes=(swift_retain swift_release swift_allocObject)
remove_probes() {
  local name
  for name in "${probes[@]}"; do echo "-:capture_work/$name" >> "$tracing/uprobe_events" 2> /dev/null || true; done
}
trap remove_probes EXIT

# count BINDIR: one run; prints "RETAINS RELEASES ALLOCATIONS SYSCALLS" per AudioData.
count() {
  local bin=$1 port out name
  remove_probes
  for name in "${probes[@]}"; do
    echo "p:capture_work/$name $bin/capture-recv:$(file_offset "$bin/capture-recv" "$name")" >> "$tracing/uprobe_events"
  done
  out=$(mktemp -d "$BENCH_WORK/work.XXXXXX")
  port=$(free_port)
  "$bin/capture-recv" --out "$out/files" --listen "127.0.0.1:$port" --log-level warning --sync-ms 200 \
    --max-streams $((streams + 16)) > /dev/null 2> "$out/recv.log" &
  local recv_pid=$!
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  "$bin/capture-load" "127.0.0.1:$port" --streams "$streams" --codec opus --duration "$seconds" --ramp-seconds 2 \
    --json > "$out/load.json" 2> "$out/load.log" &
  local load_pid=$!
  # Steady window: from 6 s in (every stream started) to 6 s before the end.
  local window=$((seconds - 12))
  sleep 6
  perf stat -x, -o "$out/stat.txt" -p "$recv_pid" \
    -e capture_work:swift_retain -e capture_work:swift_release -e capture_work:swift_allocObject -e raw_syscalls:sys_enter -- sleep "$window"
  local load_status=0
  wait "$load_pid" || load_status=$?
  kill -TERM "$recv_pid"
  wait "$recv_pid" || true
  remove_probes
  if [ "$load_status" -ne 0 ]; then
    echo "capture-load failed ($load_status) against $bin: $(tail -3 "$out/load.log")" >&2
    return 1
  fi
  awk -F, -v audio=$((streams * window * 2)) '
    /capture_work:swift_retain/ { r = $1 } /capture_work:swift_release/ { s = $1 } /capture_work:swift_allocObject/ { a = $1 }
    /raw_syscalls:sys_enter/ { c = $1 }
    END {
      if (r == "" || c == "") { print "perf counted nothing" > "/dev/stderr"; exit 1 }
      printf "%.1f %.1f %.1f %.1f\n", r / audio, s / audio, a / audio, c / audio
    }' "$out/stat.txt"
  rm -rf "$out"
}

declare -a new_rows reference_rows
for round in $(seq 1 "$rounds"); do
  reference_rows+=("$(count "$BENCH_REFERENCE_BIN")")
  new_rows+=("$(count "$BENCH_BIN")")
done

column() { local index=$1; shift; printf '%s\n' "$@" | awk -v i="$index" '{ print $i }'; }
echo "Calls per AudioData received by one capture-recv under $streams paced Opus streams ($seconds s, window $((seconds - 12)) s), $rounds interleaved rounds each, medians"
echo
echo "| | swift_retain | swift_release | swift_allocObject | system calls |"
echo "|---|---:|---:|---:|---:|"
row() {
  local label=$1; shift
  printf '| %s | %s | %s | %s | %s |\n' "$label" \
    "$(median $(column 1 "$@"))" "$(median $(column 2 "$@"))" "$(median $(column 3 "$@"))" "$(median $(column 4 "$@"))"
}
row "this build ($BENCH_BIN)" "${new_rows[@]}"
row "reference ($BENCH_REFERENCE_BIN)" "${reference_rows[@]}"
printf '| ratio | %s | %s | %s | %s |\n' \
  "$(ratio "$(median $(column 1 "${new_rows[@]}"))" "$(median $(column 1 "${reference_rows[@]}"))")" \
  "$(ratio "$(median $(column 2 "${new_rows[@]}"))" "$(median $(column 2 "${reference_rows[@]}"))")" \
  "$(ratio "$(median $(column 3 "${new_rows[@]}"))" "$(median $(column 3 "${reference_rows[@]}"))")" \
  "$(ratio "$(median $(column 4 "${new_rows[@]}"))" "$(median $(column 4 "${reference_rows[@]}"))")"
