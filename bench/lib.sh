# Helpers shared by the benchmarks; source it. Needs BENCH_BIN and BENCH_WORK (bench/run.sh sets them).

# measure NAME COMMAND... : runs COMMAND under GNU time; sets WALL (s), CPU (user+sys s), RSS (peak KiB).
measure() {
  local out="$BENCH_WORK/time.$$"
  /usr/bin/time -f "%e %U %S %M" -o "$out" "$@"
  read -r WALL user sys RSS < "$out"
  CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}

# free_port: prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_receiver DIR [ARGS...]: starts capture-recv under GNU time in the background on a free port;
# sets RECV_PID, RECV_PORT, RECV_TIME (the file GNU time writes at exit).
start_receiver() {
  local dir=$1; shift
  RECV_PORT=$(free_port)
  RECV_TIME="$BENCH_WORK/recv-time.$RECV_PORT"
  /usr/bin/time -f "%e %U %S %M" -o "$RECV_TIME" "$BENCH_BIN/capture-recv" --out "$dir" --listen "127.0.0.1:$RECV_PORT" --log-level warning "$@" >/dev/null &
  RECV_PID=$!
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$RECV_PORT") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "capture-recv did not start" >&2
  return 1
}

# stop_receiver: SIGTERM to the receiver, waits; sets RECV_RSS (peak KiB) and RECV_CPU (s).
stop_receiver() {
  # Signal capture-recv itself: GNU time would die on the signal without writing its figures.
  pkill -TERM -P "$RECV_PID"
  wait "$RECV_PID" || true
  local wall user sys
  read -r wall user sys RECV_RSS < "$RECV_TIME"
  RECV_CPU=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}

# median VALUES...: prints the median of the numbers given (the lower middle one for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# maximum VALUES...: prints the largest of the numbers given.
maximum() { printf '%s\n' "$@" | sort -g | tail -1; }

# ratio A B: prints A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }

# acknowledged STATUS_LOG: capture-send run with --log-format json --status-interval S; prints "MAIN_ACKED_S MOST_BEHIND_S CAPTURED_S" from the sender's
# last JSON status line (0 0 0 before the first).
acknowledged() {
  python3 - "$1" <<'PY'
import json, sys
line = ""
try:
    with open(sys.argv[1]) as log:
        for candidate in log:
            if '"message":"status"' in candidate:
                line = candidate
    status = json.loads(line)
    behind = max([backup.get("behind_s", 0) for backup in status.get("backups", [])] or [0])
    print(status.get("acked_s", 0), behind, status.get("captured_s", 0))
except (OSError, ValueError):
    print(0, 0, 0)
PY
}
