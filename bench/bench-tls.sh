#!/usr/bin/env bash
# PCM throughput over TLS against plaintext: the same 5-minute 48 kHz 24-bit stereo file streamed
# with --no-pace, once over plaintext TCP and once over TLS (gen-cert + --pin), in the same run.
# Goal: TLS >= 0.7 x plaintext throughput. Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

seconds=${BENCH_TLS_SECONDS:-300}
source_file="$BENCH_WORK/tls-source.wav"
sox -q -n -r 48000 -b 24 -c 2 "$source_file" synth "$seconds" whitenoise vol 0.5
audio_bytes=$((seconds * 48000 * 2 * 3))
"$BENCH_BIN/capture-recv" gen-cert --out "$BENCH_WORK/tls-cert" --host 127.0.0.1 --force > "$BENCH_WORK/gen-cert.txt"
pin=$(sed -n 's/^sha256 fingerprint: //p' "$BENCH_WORK/gen-cert.txt")

# stop_timed_receiver: like lib.sh's stop_receiver, but signals capture-recv itself: RECV_PID is GNU
# time's, which SIGTERM would kill without passing the signal on (leaving the receiver running).
stop_timed_receiver() {
  pkill -TERM -P "$RECV_PID" || true
  wait "$RECV_PID" || true
  local wall user sys
  read -r wall user sys RECV_RSS < "$RECV_TIME"
  RECV_CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}

# run_mode NAME [RECEIVER ARGS...] -- [SENDER ARGS...]: streams the file; sets WALL and CPU.
run_mode() {
  local name=$1; shift
  local receiver_args=() sender_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do receiver_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  sender_args=("$@")
  local out="$BENCH_WORK/tls-out-$name"
  mkdir -p "$out"
  start_receiver "$out" ${receiver_args[@]+"${receiver_args[@]}"} 2>/dev/null
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$RECV_PORT" --source file --file "$source_file" --no-pace \
    --stream-name "bench-$name" --log-level error ${sender_args[@]+"${sender_args[@]}"}
  stop_timed_receiver
  rm -rf "$out"
}

run_mode plain
plain_wall=$WALL plain_cpu=$CPU
run_mode tls --tls-cert "$BENCH_WORK/tls-cert/cert.pem" --tls-key "$BENCH_WORK/tls-cert/key.pem" -- --tls --pin "$pin"
tls_wall=$WALL tls_cpu=$CPU

mbps() { awk -v b="$audio_bytes" -v w="$1" 'BEGIN { if (w == 0) print "n/a"; else printf "%.1f", b / 1e6 / w }'; }
plain_mbps=$(mbps "$plain_wall")
tls_mbps=$(mbps "$tls_wall")
echo "PCM 48 kHz 24-bit stereo, ${seconds} s ($(awk -v b="$audio_bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB), --no-pace, loopback"
echo
echo "| mode | wall s | sender CPU s | MB/s | ratio to plaintext |"
echo "| --- | --- | --- | --- | --- |"
echo "| plaintext | $plain_wall | $plain_cpu | $plain_mbps | 1.00 |"
echo "| TLS (pin) | $tls_wall | $tls_cpu | $tls_mbps | $(ratio "$tls_mbps" "$plain_mbps") |"
echo
echo "Goal: TLS >= 0.70 x plaintext throughput."
