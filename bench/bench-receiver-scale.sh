#!/usr/bin/env bash
# One capture-recv under many field units (issues 15 and 28): for each stream count, plaintext then
# TLS, capture-load plays paced Opus-shaped streams (~130 kb/s, 0.5 s AudioData) for
# BENCH_SCALE_SECONDS against one release capture-recv (--sync-ms 200, its commit log in the output
# folder), then checks every file packet by packet.
# Measured over the steady part (all streams running): the receiver's CPU in cores (utime+stime
# from /proc/PID/stat) and in ms per stream-second, beside the generator's; the receiver's RSS and
# open descriptors per stream; the bytes written to the disk that holds the recordings and the log
# (/sys/class/block/DEV/stat, everything written to that disk in the window: the receiver's files
# with the file system's metadata) per audio byte received, beside the bytes the receiver dirtied
# (/proc/PID/io write_bytes, which on kernels with large page-cache folios counts a whole folio
# each time one is dirtied again, and so overstates what reaches the disk); ack latency p50/p99 (AudioData written → first Ack covering it); files
# complete and verified. The reference in the same invocation is the disk's sequential write rate
# (dd of 1 GiB with conv=fdatasync), beside the audio rate the streams need.
# Goals (issue 28, 2 cores): 5,000 streams ack p99 <= 500 ms; 10,000 streams all complete and
# verified, ack p99 <= 1 s; <= 0.12 ms receiver CPU per stream-second; <= 32 KB RSS per stream;
# <= 2.2 bytes written per audio byte. Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them);
# runs as root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

counts=${BENCH_SCALE_COUNTS:-2000 5000 10000}
seconds=${BENCH_SCALE_SECONDS:-60}
# BENCH_SCALE_MODES="plaintext" measures one mode only (comparing two builds quickly).
modes=${BENCH_SCALE_MODES:-plaintext TLS}
# Extra words for the receiver's and the generator's command lines (bench-alarms.sh: --no-alarms,
# --levels).
read -r -a extra_receiver <<< "${BENCH_SCALE_RECEIVER_ARGS:-}"
read -r -a extra_load <<< "${BENCH_SCALE_LOAD_ARGS:-}"
largest=$(maximum $counts)

# Open files: each stream costs the receiver 1 descriptor (its socket: claims are bytes of one lock
# file, the journal and position log are opened only to write them, and the CAF file is held open
# only when the limit has room for 2 per stream; the commit log's few are the receiver's) and the
# generator one socket, and both processes inherit this shell's limits. Raise the hard limit first
# where it is below what the largest count needs (root may; fs.nr_open caps it) and the soft one to
# match. A count that still does not fit (no CAP_SYS_RESOURCE, e.g. in a container) is skipped with
# a row that says so, rather than measured against a receiver that runs out of descriptors.
files_for() { echo $(($1 + 1024)); }
needed=$(files_for "$largest")
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$needed" ]; then
  ulimit -Hn "$needed" 2>/dev/null || prlimit --pid $$ --nofile="$needed:$needed" 2>/dev/null ||
    echo "bench-receiver-scale: $largest streams need $needed open files but the hard limit is $hard and cannot be raised here (run as root with CAP_SYS_RESOURCE); larger counts are skipped" >&2
fi
ulimit -Sn "$(ulimit -Hn)"
limit=$(ulimit -Hn)

"$BENCH_BIN/capture-recv" gen-cert --out "$BENCH_WORK/scale-cert" --host 127.0.0.1 --force > "$BENCH_WORK/scale-gen-cert.txt" 2> "$BENCH_WORK/scale-gen-cert.err"
pin=$(sed -n 's/^sha256 fingerprint: //p' "$BENCH_WORK/scale-gen-cert.txt")
ticks=$(getconf CLK_TCK)

# cpu_ticks PID: utime + stime of the process, in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# write_bytes PID: bytes the process caused to be written to storage.
write_bytes() { awk '/^write_bytes:/ { print $2 }' "/proc/$1/io" 2>/dev/null || echo 0; }
# disk_device DIR: the block device (its /sys/class/block name) holding DIR, empty when there is none
# (tmpfs, overlay).
disk_device() {
  local source name
  source=$(df --output=source "$1" 2>/dev/null | tail -1)
  name=$(basename "$(readlink -f "$source" 2>/dev/null)")
  [ -n "$name" ] && [ -r "/sys/class/block/$name/stat" ] && echo "$name"
}
# disk_written DEVICE: bytes written to the block device since boot (sectors of 512 bytes).
disk_written() { [ -n "$1" ] && awk '{ print $7 * 512 }' "/sys/class/block/$1/stat" 2>/dev/null || echo 0; }
# segment_inodes DIR: the inode numbers of the commit log's segment files under DIR, one per line.
# A segment made new (its whole size in zeros written and synced, once per segment the log ever
# has) has an inode the folder did not have before; a recycled one keeps its inode under a new name.
segment_inodes() { find "$1" -path '*/.commit-log/*' -name 'segment-*' -printf '%i\n' 2>/dev/null | sort; }
# descriptors PID: open file descriptors.
descriptors() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# rss_kib PID: resident set size in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
# json_field FILE NAME: one field of capture-load's JSON report ("n/a" when absent).
json_field() {
  python3 -c 'import json, sys
try:
    value = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]).get(sys.argv[2])
except Exception:
    value = None
print("n/a" if value is None else value)' "$1" "$2"
}

rows=()
# run_scale COUNT MODE: one receiver, one capture-load run; appends a table row.
run_scale() {
  local count=$1 mode=$2
  local out="$BENCH_WORK/scale-out-$count-$mode" report="$BENCH_WORK/scale-report-$count-$mode.json"
  local receiver_tls=() load_tls=()
  if [ "$mode" = TLS ]; then
    receiver_tls=(--tls-cert "$BENCH_WORK/scale-cert/cert.pem" --tls-key "$BENCH_WORK/scale-cert/key.pem")
    load_tls=(--tls --pin "$pin")
  fi
  # Starts spread over up to a third of the run (at most 500 Hellos a second), so that the steady
  # window, when every stream is running, is at least the middle third.
  local ramp
  ramp=$(awk -v n="$count" -v s="$seconds" 'BEGIN { r = n / 500; if (r < 1) r = 1; if (r > s / 3) r = s / 3; printf "%.1f", r }')
  mkdir -p "$out"
  # What earlier runs (or anything else) left dirty in the page cache is written out first: the
  # receiver's first syncfs (new streams' files) would otherwise flush it and bill this run.
  sync
  local port
  port=$(free_port)
  "$BENCH_BIN/capture-recv" --out "$out" --listen "127.0.0.1:$port" --log-level warning --sync-ms 200 \
    --max-streams "$((count + 16))" ${receiver_tls[@]+"${receiver_tls[@]}"} ${extra_receiver[@]+"${extra_receiver[@]}"} > /dev/null 2> "$BENCH_WORK/scale-recv-$count-$mode.log" &
  local recv_pid=$!
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  local rss_before
  rss_before=$(rss_kib "$recv_pid")
  "$BENCH_BIN/capture-load" "127.0.0.1:$port" --streams "$count" --codec opus --duration "$seconds" \
    --ramp-seconds "$ramp" --verify "$out" --json ${load_tls[@]+"${load_tls[@]}"} ${extra_load[@]+"${extra_load[@]}"} > "$report" 2> "$BENCH_WORK/scale-load-$count-$mode.log" &
  local load_pid=$!
  # Steady window: from 2 s after the last stream started to 2 s before the first one ends.
  local start_at end_at
  start_at=$(awk -v r="$ramp" 'BEGIN { printf "%.1f", r + 2 }')
  end_at=$(awk -v s="$seconds" 'BEGIN { printf "%.1f", s - 2 }')
  sleep "$start_at"
  local recv0 load0 t0 recv1 load1 t1 rss_steady written0 written1 fds
  local device disk0 disk1
  device=$(disk_device "$out")
  recv0=$(cpu_ticks "$recv_pid"); load0=$(cpu_ticks "$load_pid"); written0=$(write_bytes "$recv_pid"); disk0=$(disk_written "$device"); t0=$(date +%s.%N)
  segment_inodes "$out" > "$BENCH_WORK/scale-segments-before"
  sleep "$(awk -v a="$start_at" -v b="$end_at" 'BEGIN { d = b - a; if (d < 1) d = 1; print d }')"
  recv1=$(cpu_ticks "$recv_pid"); load1=$(cpu_ticks "$load_pid"); written1=$(write_bytes "$recv_pid"); disk1=$(disk_written "$device"); t1=$(date +%s.%N)
  # Log segments made in the window (not recycled ones): what making the log wrote, once.
  local made_segments segment_bytes
  made_segments=$(segment_inodes "$out" | comm -13 "$BENCH_WORK/scale-segments-before" - | wc -l)
  # -quit, not `| head -1`: under pipefail, find killed by SIGPIPE after head exits ended the script.
  segment_bytes=$(find "$out" -path '*/.commit-log/*' -name 'segment-*' -printf '%s\n' -quit 2>/dev/null)
  rss_steady=$(rss_kib "$recv_pid")
  fds=$(descriptors "$recv_pid")
  local load_status=0
  wait "$load_pid" || load_status=$?
  kill -TERM "$recv_pid" 2>/dev/null || true
  wait "$recv_pid" || true
  local recv_cores load_cores rss_per_stream
  recv_cores=$(awk -v a="$recv0" -v b="$recv1" -v t="$ticks" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", (b - a) / t / (e - s) }')
  load_cores=$(awk -v a="$load0" -v b="$load1" -v t="$ticks" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", (b - a) / t / (e - s) }')
  rss_per_stream=$(awk -v a="$rss_before" -v b="$rss_steady" -v n="$count" 'BEGIN { printf "%.1f", (b - a) / n }')
  local cpu_ms_per_stream_second fds_per_stream bytes_per_audio_byte disk_per_audio_byte making_per_audio_byte
  cpu_ms_per_stream_second=$(awk -v c="$recv_cores" -v n="$count" 'BEGIN { printf "%.3f", c * 1000 / n }')
  fds_per_stream=$(awk -v f="$fds" -v n="$count" 'BEGIN { printf "%.2f", f / n }')
  # Audio received in the window: the streams' payload rate (16,250 bytes/s each) over its length.
  bytes_per_audio_byte=$(awk -v a="$written0" -v b="$written1" -v n="$count" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", (b - a) / (n * 16250 * (e - s)) }')
  if [ -n "$device" ]; then
    disk_per_audio_byte=$(awk -v a="$disk0" -v b="$disk1" -v n="$count" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", (b - a) / (n * 16250 * (e - s)) }')
    making_per_audio_byte=$(awk -v m="$made_segments" -v z="${segment_bytes:-0}" -v n="$count" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", m * z / (n * 16250 * (e - s)) }')
    disk_per_audio_byte="$disk_per_audio_byte ($making_per_audio_byte making $made_segments log segments)"
  else
    disk_per_audio_byte="n/a (no block device)"
  fi
  local completed verified p50 p99
  completed=$(json_field "$report" completed)
  verified=$(json_field "$report" verified)
  p50=$(json_field "$report" ackLatencyP50Ms)
  p99=$(json_field "$report" ackLatencyP99Ms)
  if [ "$load_status" -ne 0 ]; then
    echo "bench-receiver-scale: $count streams ($mode): $(tail -1 "$BENCH_WORK/scale-load-$count-$mode.log")" >&2
  fi
  rows+=("| $count | $mode | $completed | $verified | $recv_cores | $cpu_ms_per_stream_second | $load_cores | $rss_per_stream | $fds_per_stream | $disk_per_audio_byte | $bytes_per_audio_byte | $p50 | $p99 |")
  rm -rf "$out"
}

for count in $counts; do
  if [ "$limit" != unlimited ] && [ "$limit" -lt "$(files_for "$count")" ]; then
    rows+=("| $count | skipped: needs $(files_for "$count") open files, the limit is $limit | | | | | | | | | | | |")
    continue
  fi
  for mode in $modes; do run_scale "$count" "$mode"; done
done

# The reference: the disk's sequential write rate where the recordings go.
sequential=$(dd if=/dev/zero of="$BENCH_WORK/scale-dd" bs=1M count=1024 conv=fdatasync 2>&1 | awk '/copied/ { print $(NF-1), $NF }')
rm -f "$BENCH_WORK/scale-dd"

echo "Paced Opus-shaped streams (130 kb/s, 20 ms packets, 0.5 s AudioData) for ${seconds} s each, one capture-recv --sync-ms 200, loopback; $(nproc) cores"
echo "Disk sequential write (dd 1 GiB, conv=fdatasync): $sequential; 10,000 such streams need 163 MB/s of audio."
echo
echo "| streams | mode | completed | verified | receiver CPU (cores) | receiver CPU ms per stream-second | generator CPU (cores) | receiver RSS per stream (KiB) | descriptors per stream | disk bytes written per audio byte | bytes dirtied per audio byte (write_bytes) | ack p50 (ms) | ack p99 (ms) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
echo "Goals (issue 28): 5,000 streams ack p99 <= 500 ms; 10,000 streams complete and verified with ack p99 <= 1000 ms; <= 0.12 ms CPU per stream-second; <= 32 KiB RSS per stream; <= 2.2 disk bytes written per audio byte."
