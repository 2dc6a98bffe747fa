#!/usr/bin/env bash
# One capture, several encodings (issue 29): what a second and a third encoding cost the sender.
#  1. sender CPU (user+sys) streaming 10 min of a 48 kHz stereo tone as fast as possible: PCM alone
#     to one receiver, Opus 128 kb/s alone, and both at once from one capture (PCM to the main
#     receiver, Opus to a backup: --also HOST:PORT,codec=opus,bitrate=128k); CPU_RUNS (3) runs each,
#     interleaved; medians. Goal: both at once <= (PCM alone + Opus alone) x 1.05.
#  2. sender peak RSS with three encodings (PCM, Opus 128k, Opus 64k to three receivers) against one
#     (PCM), the same 10 minutes. Goal <= 1.5x.
# Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them). About 4 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

CPU_RUNS=${CPU_RUNS:-3}
work="$BENCH_WORK/encodings"
rm -rf "$work"; mkdir -p "$work/a" "$work/b" "$work/c"
start_receiver "$work/a"; a_port=$RECV_PORT; a_pid=$RECV_PID; a_time=$RECV_TIME
start_receiver "$work/b"; b_port=$RECV_PORT; b_pid=$RECV_PID; b_time=$RECV_TIME
start_receiver "$work/c"; c_port=$RECV_PORT; c_pid=$RECV_PID; c_time=$RECV_TIME

send() {  # NAME ARGS...: 10 min of the tone, unpaced, to receiver a; sets CPU and RSS
  local name=$1; shift
  measure "$BENCH_BIN/capture-send" "127.0.0.1:$a_port" --source tone --channels 2 --rate 48000 --duration 600 --no-pace \
    --stream-name "$name" --spool "$work/spool" --log-level error --quiet "$@"
}

pcm=(); opus=(); both=(); pcm_rss=()
for run in $(seq "$CPU_RUNS"); do
  send "pcm$run"; pcm+=("$CPU"); pcm_rss+=("$RSS")
  send "opus$run" --codec opus --bitrate 128k; opus+=("$CPU")
  send "both$run" --also "127.0.0.1:$b_port,codec=opus,bitrate=128k"; both+=("$CPU")
done
send three --also "127.0.0.1:$b_port,codec=opus,bitrate=128k" --also "127.0.0.1:$c_port,codec=opus,bitrate=64k"; three_rss=$RSS
for pid_time in "$a_pid $a_time" "$b_pid $b_time" "$c_pid $c_time"; do
  read -r RECV_PID RECV_TIME <<< "$pid_time"; stop_receiver
done

# Every run's files: the PCM streams are 10 minutes, the Opus ones decode to 10 minutes.
for run in $(seq "$CPU_RUNS"); do
  for file in "$work"/a/pcm$run*.caf "$work"/a/both$run*.caf; do
    frames=$(ffprobe -v error -show_entries stream=duration_ts -of csv=p=0 "$file")
    [ "$frames" = 28800000 ] || { echo "$file holds $frames frames, not 28800000" >&2; exit 1; }
  done
  for file in "$work"/a/opus$run*.caf "$work"/b/both$run*.caf; do
    seconds=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$file")
    awk -v s="$seconds" 'BEGIN { exit !(s > 599.9 && s < 600.1) }' || { echo "$file lasts $seconds s, not 600" >&2; exit 1; }
  done
done

pcm_median=$(median "${pcm[@]}"); opus_median=$(median "${opus[@]}"); both_median=$(median "${both[@]}")
sum=$(awk -v a="$pcm_median" -v b="$opus_median" 'BEGIN { printf "%.2f", a + b }')
one_rss=$(median "${pcm_rss[@]}")
echo "every run: the PCM files hold 28,800,000 frames, the Opus files decode to 600 s (ffprobe)"
echo "sender CPU s per run: PCM alone ${pcm[*]}; Opus alone ${opus[*]}; both from one capture ${both[*]}"
echo "sender peak RSS KiB: one encoding (PCM) ${pcm_rss[*]}; three encodings $three_rss"
echo
echo "| measurement | reference | one capture, several encodings | ratio | goal |"
echo "| --- | --- | --- | --- | --- |"
echo "| sender CPU, 10 min 48 kHz stereo as fast as possible (median of $CPU_RUNS): PCM + Opus 128k | PCM alone ${pcm_median} s + Opus alone ${opus_median} s = ${sum} s | ${both_median} s | $(ratio "$both_median" "$sum")x | <= 1.05x |"
echo "| sender peak RSS, same run: PCM + Opus 128k + Opus 64k to three receivers | one encoding (PCM) ${one_rss} KiB | ${three_rss} KiB | $(ratio "$three_rss" "$one_rss")x | <= 1.5x |"
