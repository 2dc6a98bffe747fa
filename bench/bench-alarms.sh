#!/usr/bin/env bash
# What the receiver's alarms cost (issue 30): bench-receiver-scale at BENCH_ALARMS_STREAMS (2,000)
# paced plaintext streams whose senders send levels and loudness with every AudioData, as
# capture-send does (capture-load --levels), against one capture-recv with its default alarm
# conditions and, as the reference in the same invocation, one with --no-alarms; BENCH_ALARMS_ROUNDS
# (2) interleaved rounds of each, so that a slow moment of the machine weighs on both. Prints each
# run's row and the ratio of the receivers' CPU per stream-second (alarms on / off), pair by pair
# and over all runs. Goal (issue 30): <= 1.05.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
count=${BENCH_ALARMS_STREAMS:-2000}
rounds=${BENCH_ALARMS_ROUNDS:-2}
rows=()
ratios=()
on_total=0
off_total=0
for round in $(seq "$rounds"); do
  per_run=()
  for alarms in on off; do
    receiver_args=""
    [ "$alarms" = off ] && receiver_args="--no-alarms"
    row=$(BENCH_SCALE_COUNTS="$count" BENCH_SCALE_MODES=plaintext BENCH_SCALE_LOAD_ARGS="--levels" BENCH_SCALE_RECEIVER_ARGS="$receiver_args" \
      bash "$here/bench-receiver-scale.sh" | grep -E "^\| $count \|")
    rows+=("| $round | $alarms |${row#|}")
    # The sixth column is the receiver's CPU in ms per stream-second.
    per_run+=("$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $7); print $7 }')")
  done
  ratios+=("$(awk -v a="${per_run[0]}" -v b="${per_run[1]}" 'BEGIN { printf "%.3f", a / b }')")
  on_total=$(awk -v t="$on_total" -v a="${per_run[0]}" 'BEGIN { print t + a }')
  off_total=$(awk -v t="$off_total" -v b="${per_run[1]}" 'BEGIN { print t + b }')
done
echo "Receiver alarms: $count paced Opus-shaped plaintext streams with levels and loudness in every AudioData, alarms on (default conditions) against --no-alarms, $rounds interleaved rounds"
echo
echo "| round | alarms | streams | mode | completed | verified | receiver CPU (cores) | receiver CPU ms per stream-second | generator CPU (cores) | receiver RSS per stream (KiB) | descriptors per stream | disk bytes written per audio byte | bytes dirtied per audio byte (write_bytes) | ack p50 (ms) | ack p99 (ms) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
echo "CPU per stream-second, alarms on / off: round by round ${ratios[*]}; all runs $(awk -v a="$on_total" -v b="$off_total" 'BEGIN { printf "%.3f", a / b }') (goal <= 1.05)"
