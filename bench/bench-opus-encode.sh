#!/usr/bin/env bash
# Issue 4: CPU time of capture-send encoding and streaming 60 s of 48 kHz stereo at 128 kb/s, 20 ms,
# complexity 10 from a file (--no-pace), against opusenc encoding the same file with the same
# settings, in the same run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
work="$BENCH_WORK/opus"
mkdir -p "$work/out"
sox -n -r 48000 -c 2 -b 16 -e signed-integer "$work/in.wav" synth 60 sine 440 sine 1000 gain -6

measure opusenc --quiet --bitrate 128 --framesize 20 --comp 10 --vbr "$work/in.wav" "$work/ref.opus"
opusenc_cpu=$CPU

start_receiver "$work/out"
measure "$BENCH_BIN/capture-send" "127.0.0.1:$RECV_PORT" --source file --file "$work/in.wav" --no-pace \
  --codec opus --bitrate 128000 --frame-ms 20 --complexity 10 --vbr --stream-name bench --log-level warning
send_cpu=$CPU
stop_receiver

echo "60 s of 48 kHz stereo, Opus 128 kb/s VBR, 20 ms, complexity 10"
echo
echo "| run | CPU s | ratio to opusenc |"
echo "|---|---:|---:|"
echo "| opusenc (file → .opus) | $opusenc_cpu | 1.00 |"
echo "| capture-send (file → Opus → loopback → capture-recv) | $send_cpu | $(ratio "$send_cpu" "$opusenc_cpu") (goal ≤ 1.3) |"
