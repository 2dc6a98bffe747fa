#!/usr/bin/env bash
# Durability benchmarks (docs/DURABILITY.md):
#  1. catch-up: a live 48 kHz stereo Opus 64 kb/s stream loses its receiver for 60 s (SIGTERM, which
#     leaves the stream resumable; restarted on the same port and folder after 60 s). Measured: the
#     time from the restarted receiver listening until it has acknowledged everything captured up to
#     that moment (an Ack means durable: in the file or in its commit log; read from the sender's JSON
#     status every 50 ms), reported as audio seconds caught up per second (goal >= 50x).
#     The sender runs with --reconnect-max 0.5 so the figure is the catch-up, not the backoff delay.
#  2. spool write cost: sender CPU time (user+sys) streaming 10 min of 48 kHz stereo 16-bit PCM as fast
#     as possible, with the disk spool and with --no-spool, alternating, SPOOL_RUNS (8) runs each
#     (goal <= 1.1x). Every byte goes to the spool, so this is the worst case: a live source spools
#     the same bytes over minutes instead of seconds.
# Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them). About 3 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

OUTAGE=${BENCH_OUTAGE_SECONDS:-60}
work="$BENCH_WORK/durability"
rm -rf "$work"; mkdir -p "$work/out" "$work/spool"

# --- 1. catch-up -------------------------------------------------------------------------------
port=$(free_port)
"$BENCH_BIN/capture-recv" --out "$work/out" --listen "127.0.0.1:$port" --log-level warning >/dev/null 2>"$work/recv1.log" &
recv=$!
wait_port() { for _ in $(seq 1 400); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.025; done; return 1; }
wait_port "$port"
start=$(date +%s.%N)
"$BENCH_BIN/capture-send" "127.0.0.1:$port" --source tone --codec opus --bitrate 64000 --channels 2 \
  --duration $((OUTAGE + 30)) --stream-name catchup --spool "$work/spool" \
  --reconnect-min 0.05 --reconnect-max 0.5 --log-level info --log-format json --status-interval 0.05 >/dev/null 2>"$work/send.log" &
sender=$!
sleep 5
kill -TERM "$recv"; wait "$recv" || true
sleep "$OUTAGE"
"$BENCH_BIN/capture-recv" --out "$work/out" --listen "127.0.0.1:$port" --log-level warning >/dev/null 2>"$work/recv2.log" &
recv=$!
wait_port "$port"
back=$(date +%s.%N)
# Everything captured up to now, less one second for the capture buffer and encoder still filling.
target=$(awk -v s="$start" -v b="$back" 'BEGIN { printf "%.2f", b - s - 1.0 }')
read -r before _ _ <<< "$(acknowledged "$work/send.log")"
done_at=""
for _ in $(seq 1 1200); do
  read -r acked _ _ <<< "$(acknowledged "$work/send.log")"
  if awk -v a="$acked" -v t="$target" 'BEGIN { exit !(a >= t) }'; then done_at=$(date +%s.%N); break; fi
  sleep 0.05
done
kill -INT "$sender" 2>/dev/null || true
wait "$sender" || true
kill -TERM "$recv"; wait "$recv" || true
if [ -z "$done_at" ]; then
  echo "catch-up did not complete within 60 s (target $target s acknowledged, reached $acked s)" >&2
  exit 1
fi
catchup=$(awk -v b="$back" -v d="$done_at" 'BEGIN { printf "%.3f", d - b }')
backlog=$(awk -v t="$target" -v p="$before" 'BEGIN { printf "%.1f", t - p }')
speed=$(awk -v a="$backlog" -v c="$catchup" 'BEGIN { printf "%.0f", a / (c > 0 ? c : 0.001) }')

# --- 2. spool write cost -----------------------------------------------------------------------
mkdir -p "$work/out2"
port=$(free_port)
"$BENCH_BIN/capture-recv" --out "$work/out2" --listen "127.0.0.1:$port" --log-level warning >/dev/null 2>"$work/recv3.log" &
recv=$!
wait_port "$port"
SPOOL_RUNS=${SPOOL_RUNS:-8}
spool_cpu=0; memory_cpu=0
for run in $(seq "$SPOOL_RUNS"); do
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$port" --source tone --duration 600 --no-pace --stream-name "spooled$run" \
    --spool "$work/spool2" --log-level error --quiet
  spool_cpu=$(awk -v a="$spool_cpu" -v b="$CPU" 'BEGIN { printf "%.2f", a + b }')
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$port" --source tone --duration 600 --no-pace --stream-name "memory$run" \
    --no-spool --log-level error --quiet
  memory_cpu=$(awk -v a="$memory_cpu" -v b="$CPU" 'BEGIN { printf "%.2f", a + b }')
done
kill -TERM "$recv"; wait "$recv" || true

echo
echo "| measurement | value | goal |"
echo "| --- | --- | --- |"
echo "| catch-up after a ${OUTAGE} s outage (Opus 64 kb/s stereo, ${backlog} s behind) | ${catchup} s = ${speed}x real time | >= 50x |"
echo "| sender CPU, 10 min PCM 48 kHz stereo s16 as fast as possible, ${SPOOL_RUNS} runs, with spool / --no-spool | ${spool_cpu} s / ${memory_cpu} s = $(ratio "$spool_cpu" "$memory_cpu")x | <= 1.1x |"
