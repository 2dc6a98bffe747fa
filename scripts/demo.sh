#!/usr/bin/env bash
# make demo: starts a receiver on localhost, streams 5 s of tone to it, prints the file's path and
# format, and stops the receiver.
set -euo pipefail
bin=${1:-.build/debug}
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$bin/capture-recv" --out "$out" --listen "127.0.0.1:$port" --log-level notice &
receiver=$!
trap 'kill -TERM $receiver 2>/dev/null || true; wait $receiver 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
echo "demo: streaming 5 s of a 440 Hz tone to 127.0.0.1:$port ..."
"$bin/capture-send" "127.0.0.1:$port" --source tone --duration 5 --rate 48000 --channels 2 --format s24 --stream-name demo
file=$(ls -t "$out"/demo_*.caf | head -1)
echo
echo "demo: recorded $file"
ffprobe -v error -show_entries stream=codec_name,sample_rate,channels,bits_per_raw_sample,duration -of default=noprint_wrappers=1 "$file" | sed 's/^/  /'
