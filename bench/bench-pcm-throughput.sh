#!/usr/bin/env bash
# Issue 2: wall time to move 5 minutes of 48 kHz 24-bit stereo PCM from a file through
# capture-send → capture-recv → CAF on disk (--no-pace), against socat moving the same bytes over
# loopback into a file, in the same run; and the peak RSS of both processes. Each of the three
# transfers runs RUNS (3) times, interleaved; the table gives the median wall time and the largest
# peak RSS.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
work="$BENCH_WORK/pcm"
# A run of its own each time: the file check below expects one file per stream name.
rm -rf "$work"; mkdir -p "$work/out"
sox -n -r 48000 -c 2 -b 24 -e signed-integer "$work/in.wav" synth 300 sine 440 sine 1000 gain -6
sox "$work/in.wav" -t raw "$work/in.raw"
bytes=$(stat -c %s "$work/in.raw")
# The fixtures' 170 MB are written out now, not by the first transfer's syncs.
sync

RUNS=${RUNS:-3}
export XDG_STATE_HOME="$work/state"
start_receiver "$work/out"
socat_walls=(); send_walls=(); send_rsses=(); nospool_walls=(); nospool_rsses=(); shm_walls=()
send_cpus=(); nospool_cpus=(); shm_cpus=()
shm_spool=""
if [ -d /dev/shm ] && [ -w /dev/shm ]; then shm_spool=$(mktemp -d /dev/shm/capture-bench-spool.XXXXXX); fi
for run in $(seq "$RUNS"); do
  # Reference: socat over loopback into a file (fsync'd at the end, as capture-recv syncs).
  port=$(free_port)
  socat -u "TCP-LISTEN:$port,reuseaddr" "OPEN:$work/socat.raw,creat,trunc" &
  listener=$!
  sleep 0.3
  measure bash -c "socat -u 'OPEN:$work/in.raw' 'TCP:127.0.0.1:$port' && wait $listener 2>/dev/null; sync '$work/socat.raw'"
  wait $listener 2>/dev/null || true
  socat_walls+=("$WALL")
  # capture-send → capture-recv, with the disk spool (the default) and without it.
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$RECV_PORT" --source file --file "$work/in.wav" --no-pace --stream-name "bench$run" --log-level warning --quiet
  send_walls+=("$WALL"); send_rsses+=("$RSS"); send_cpus+=("$CPU")
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$RECV_PORT" --source file --file "$work/in.wav" --no-pace --stream-name "nospool$run" --log-level warning --quiet --no-spool
  nospool_walls+=("$WALL"); nospool_rsses+=("$RSS"); nospool_cpus+=("$CPU")
  if [ -n "$shm_spool" ]; then
    measure "$BENCH_BIN/capture-send" "127.0.0.1:$RECV_PORT" --source file --file "$work/in.wav" --no-pace --stream-name "shm$run" --log-level warning --quiet --spool "$shm_spool"
    shm_walls+=("$WALL"); shm_cpus+=("$CPU")
  fi
  rm -f "$work"/out/nospool*.caf "$work"/out/shm*.caf
done
stop_receiver
[ -n "$shm_spool" ] && rm -rf "$shm_spool"
socat_wall=$(median "${socat_walls[@]}")
send_wall=$(median "${send_walls[@]}"); send_rss=$(maximum "${send_rsses[@]}")
nospool_wall=$(median "${nospool_walls[@]}"); nospool_rss=$(maximum "${nospool_rsses[@]}")
file=$(ls "$work"/out/bench1_*.caf)
frames=$(ffprobe -v error -show_entries stream=duration_ts -of csv=p=0 "$file")

echo "5 min of 48 kHz 24-bit stereo PCM ($((bytes / 1000000)) MB), loopback, --no-pace; file check: $frames frames"
echo "$RUNS runs each, interleaved: median wall time, largest peak RSS (wall s per run: socat ${socat_walls[*]}; spool ${send_walls[*]}; --no-spool ${nospool_walls[*]}; spool in /dev/shm ${shm_walls[*]:-})"
echo
echo "| run | wall s | MB/s | ratio to socat | sender CPU s | peak RSS |"
echo "|---|---:|---:|---:|---:|---|"
echo "| socat file → TCP → file | $socat_wall | $(awk -v b="$bytes" -v t="$socat_wall" 'BEGIN{printf "%.0f", b/t/1e6}') | 1.00 | | |"
echo "| capture-send → capture-recv → CAF (spool on, the default) | $send_wall | $(awk -v b="$bytes" -v t="$send_wall" 'BEGIN{printf "%.0f", b/t/1e6}') | $(ratio "$send_wall" "$socat_wall") (goal ≤ 1.3) | $(median "${send_cpus[@]}") | sender $((send_rss / 1024)) MB (goal ≤ 20), receiver $((RECV_RSS / 1024)) MB (goal ≤ 30) |"
if [ -n "$shm_spool" ]; then
  shm_wall=$(median "${shm_walls[@]}")
  echo "| the same, spool in /dev/shm (no disk under the spool) | $shm_wall | $(awk -v b="$bytes" -v t="$shm_wall" 'BEGIN{printf "%.0f", b/t/1e6}') | $(ratio "$shm_wall" "$socat_wall") | $(median "${shm_cpus[@]}") | |"
fi
echo "| capture-send --no-spool → capture-recv → CAF | $nospool_wall | $(awk -v b="$bytes" -v t="$nospool_wall" 'BEGIN{printf "%.0f", b/t/1e6}') | $(ratio "$nospool_wall" "$socat_wall") (goal ≤ 1.5) | $(median "${nospool_cpus[@]}") | sender $((nospool_rss / 1024)) MB |"
