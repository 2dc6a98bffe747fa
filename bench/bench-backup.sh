#!/usr/bin/env bash
# Backup receivers (issue 20): what `--also` costs and how fast two receivers catch up.
#  1. catch-up with one and with two receivers: a live 48 kHz stereo Opus 64 kb/s stream loses
#     every receiver for OUTAGE (60) s (SIGTERM; restarted on the same ports and folders). Measured:
#     the time from the restarted receivers listening until every one has acknowledged (an Ack means
#     durable: in the file or in its commit log) everything captured up to that moment, as audio
#     seconds caught up per second (goal >= 50x); read from the sender's JSON status every 50 ms
#     (the main receiver's acked_s; each backup's behind_s). One destination, then two,
#     CATCHUP_RUNS (1) times each, interleaved.
#  2. sender CPU with a backup against without: user+sys CPU of capture-send streaming 10 min of
#     48 kHz stereo audio as fast as possible to one receiver, and to a receiver and a backup, CPU_RUNS
#     (5) runs each, alternating; medians. Twice: Opus 64 kb/s (the encoder dominates) and 16-bit PCM
#     (the sockets dominate: every byte is sent twice). Goal <= 1.15x.
# Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them). About 2 + 2.5 x CATCHUP_RUNS minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

OUTAGE=${BENCH_OUTAGE_SECONDS:-60}
CATCHUP_RUNS=${CATCHUP_RUNS:-1}
CPU_RUNS=${CPU_RUNS:-5}
work="$BENCH_WORK/backup"
rm -rf "$work"; mkdir -p "$work"

wait_port() { for _ in $(seq 1 400); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.025; done; return 1; }

# catch_up N RUN: N receivers (1 or 2) down for OUTAGE s; sets CATCHUP (s), BACKLOG (s), SPEED (x).
catch_up() {
  local count=$1 run=$2 ports=() pids=() dirs=() also=() i
  for i in $(seq "$count"); do
    dirs+=("$work/catchup-$count-$run-$i"); mkdir -p "${dirs[-1]}"
    ports+=("$(free_port)")
    "$BENCH_BIN/capture-recv" --out "${dirs[-1]}" --listen "127.0.0.1:${ports[-1]}" --log-level warning >/dev/null 2>>"$work/recv.log" &
    pids+=($!)
    wait_port "${ports[-1]}"
    [ "$i" -gt 1 ] && also+=(--also "127.0.0.1:${ports[-1]}")
  done
  local start sender back target done_at="" p status acked behind captured lowest=""
  start=$(date +%s.%N)
  "$BENCH_BIN/capture-send" "127.0.0.1:${ports[0]}" "${also[@]}" --source tone --codec opus --bitrate 64000 --channels 2 \
    --duration $((OUTAGE + 30)) --stream-name "catchup$count" --spool "$work/spool-$count-$run" \
    --reconnect-min 0.05 --reconnect-max 0.5 --log-level info --log-format json --status-interval 0.05 \
    >/dev/null 2>"$work/status-$count-$run.log" &
  sender=$!
  sleep 5
  for p in "${pids[@]}"; do kill -TERM "$p"; wait "$p" || true; done
  sleep "$OUTAGE"
  pids=()
  for i in $(seq "$count"); do
    "$BENCH_BIN/capture-recv" --out "${dirs[$((i - 1))]}" --listen "127.0.0.1:${ports[$((i - 1))]}" --log-level warning >/dev/null 2>>"$work/recv.log" &
    pids+=($!)
  done
  for p in "${ports[@]}"; do wait_port "$p"; done
  back=$(date +%s.%N)
  # Everything captured up to now, less one second for the capture buffer and encoder still filling.
  target=$(awk -v s="$start" -v b="$back" 'BEGIN { printf "%.2f", b - s - 1.0 }')
  for _ in $(seq 1 1200); do
    read -r acked behind captured <<< "$(acknowledged "$work/status-$count-$run.log")"
    # What the furthest-behind receiver held when they came back.
    [ -n "$lowest" ] || lowest=$(awk -v a="$acked" -v b="$behind" -v c="$captured" 'BEGIN { l = (c - b < a ? c - b : a); printf "%.2f", l }')
    if awk -v a="$acked" -v b="$behind" -v c="$captured" -v t="$target" 'BEGIN { exit !(a >= t && c - b >= t) }'; then
      done_at=$(date +%s.%N); break
    fi
    sleep 0.05
  done
  kill -INT "$sender" 2>/dev/null || true
  wait "$sender" || true
  for p in "${pids[@]}"; do kill -TERM "$p"; wait "$p" || true; done
  [ -n "$done_at" ] || { echo "catch-up with $count receivers did not complete within 60 s" >&2; exit 1; }
  CATCHUP=$(awk -v b="$back" -v d="$done_at" 'BEGIN { printf "%.3f", d - b }')
  # The backlog of the receiver that was furthest behind.
  BACKLOG=$(awk -v t="$target" -v p="$lowest" 'BEGIN { printf "%.1f", t - p }')
  SPEED=$(awk -v a="$BACKLOG" -v c="$CATCHUP" 'BEGIN { printf "%.0f", a / (c > 0 ? c : 0.001) }')
}

one=(); two=()
for run in $(seq "$CATCHUP_RUNS"); do
  catch_up 1 "$run"; one+=("$CATCHUP s for $BACKLOG s = ${SPEED}x")
  catch_up 2 "$run"; two+=("$CATCHUP s for $BACKLOG s = ${SPEED}x")
done

# --- 2. sender CPU with a backup -------------------------------------------------------------
mkdir -p "$work/out-main" "$work/out-backup"
start_receiver "$work/out-main"; main_port=$RECV_PORT; main_pid=$RECV_PID; main_time=$RECV_TIME
start_receiver "$work/out-backup"; backup_port=$RECV_PORT; backup_pid=$RECV_PID; backup_time=$RECV_TIME
cpu_pair() {  # LABEL ARGS...: sets SOLO and DUAL (median CPU s) and their per-run lists
  local label=$1 solo=() dual=() run; shift
  for run in $(seq "$CPU_RUNS"); do
    measure "$BENCH_BIN/capture-send" "127.0.0.1:$main_port" --source tone --duration 600 --no-pace --stream-name "$label-solo$run" \
      --spool "$work/spool-cpu" --log-level error --quiet "$@"
    solo+=("$CPU")
    measure "$BENCH_BIN/capture-send" "127.0.0.1:$main_port" --also "127.0.0.1:$backup_port" --source tone --duration 600 --no-pace \
      --stream-name "$label-dual$run" --spool "$work/spool-cpu" --log-level error --quiet "$@"
    dual+=("$CPU")
  done
  SOLO=$(median "${solo[@]}"); DUAL=$(median "${dual[@]}")
  SOLO_RUNS="${solo[*]}"; DUAL_RUNS="${dual[*]}"
}
cpu_pair opus --codec opus --bitrate 64000
opus_solo=$SOLO; opus_dual=$DUAL; opus_runs="one receiver: $SOLO_RUNS; with a backup: $DUAL_RUNS"
cpu_pair pcm
pcm_solo=$SOLO; pcm_dual=$DUAL; pcm_runs="one receiver: $SOLO_RUNS; with a backup: $DUAL_RUNS"
RECV_PID=$main_pid RECV_TIME=$main_time stop_receiver
RECV_PID=$backup_pid RECV_TIME=$backup_time stop_receiver
# Both receivers' files of every run with a backup: the same audio, 10 minutes of it.
for label in opus pcm; do
  for run in $(seq "$CPU_RUNS"); do
    main_file=$(ls "$work"/out-main/"$label-dual$run"_*.caf) backup_file=$(ls "$work"/out-backup/"$label-dual$run"_*.caf)
    main_sum=$(ffmpeg -v error -i "$main_file" -f md5 -) backup_sum=$(ffmpeg -v error -i "$backup_file" -f md5 -)
    frames=$(ffprobe -v error -show_entries stream=duration_ts -of csv=p=0 "$backup_file")
    if [ -z "$main_sum" ] || [ "$main_sum" != "$backup_sum" ]; then echo "$label run $run: the main and backup files differ" >&2; exit 1; fi
    [ "$label" = opus ] || [ "$frames" = 28800000 ] || { echo "$label run $run: the backup holds $frames frames, not 28800000" >&2; exit 1; }
  done
done

echo "every run with a backup: both files decode to the same audio (ffmpeg md5)"
echo "catch-up runs, one receiver: ${one[*]}; two receivers: ${two[*]}"
echo "sender CPU s per run, Opus: $opus_runs"
echo "sender CPU s per run, PCM: $pcm_runs"
echo
echo "| measurement | one receiver | with a backup (--also) | ratio | goal |"
echo "| --- | --- | --- | --- | --- |"
echo "| catch-up after a ${OUTAGE} s outage of every receiver (Opus 64 kb/s stereo) | ${one[0]} | ${two[0]} | | >= 50x |"
echo "| sender CPU, 10 min Opus 64 kb/s stereo as fast as possible (median of $CPU_RUNS) | ${opus_solo} s | ${opus_dual} s | $(ratio "$opus_dual" "$opus_solo")x | <= 1.15x |"
echo "| sender CPU, 10 min PCM 48 kHz stereo s16 as fast as possible (median of $CPU_RUNS) | ${pcm_solo} s | ${pcm_dual} s | $(ratio "$pcm_dual" "$pcm_solo")x | <= 1.15x |"
