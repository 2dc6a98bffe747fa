#!/usr/bin/env bash
# Issue 3: CPU time to capture 10 minutes of 48 kHz 16-bit stereo through the ALSA file-plugin PCM
# into the queue and a discarding callback (capture-bench), against arecord on the same PCM for the
# same number of frames, in the same run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
work="$BENCH_WORK/alsa"
mkdir -p "$work"
frames=$((48000 * 600))
head -c $((frames * 4)) /dev/urandom > "$work/fixture.raw"
cat > "$work/asound.conf" <<CONF
pcm.benchcapture {
    type file
    slave.pcm { type null }
    file "/dev/null"
    infile "$work/fixture.raw"
    format "raw"
}
CONF
export ALSA_CONFIG_PATH="$work/asound.conf"


# The file plugin is not paced, so 10 minutes take a few tens of milliseconds: each side runs 20
# times, in 4 alternating blocks of 5 so that a slow moment of the machine weighs on both sides, and
# the totals stand well above GNU time's 10 ms resolution.
blocks=4
per_block=5
runs=$((blocks * per_block))
arecord_cpu=0; arecord_wall=0; queue_cpu=0; queue_wall=0
: > "$work/bench.out"
for block in $(seq $blocks); do
  measure bash -c "for i in \$(seq $per_block); do arecord -q -D benchcapture -f S16_LE -r 48000 -c 2 -t raw -s $frames /dev/null; done"
  arecord_cpu=$(awk -v a="$arecord_cpu" -v b="$CPU" 'BEGIN { printf "%.2f", a + b }')
  arecord_wall=$(awk -v a="$arecord_wall" -v b="$WALL" 'BEGIN { printf "%.2f", a + b }')
  measure bash -c "for i in \$(seq $per_block); do '$BENCH_BIN/capture-bench' benchcapture 48000 2 $frames 0.5 3; done" >> "$work/bench.out"
  queue_cpu=$(awk -v a="$queue_cpu" -v b="$CPU" 'BEGIN { printf "%.2f", a + b }')
  queue_wall=$(awk -v a="$queue_wall" -v b="$WALL" 'BEGIN { printf "%.2f", a + b }')
done

echo "10 min of 48 kHz s16 stereo ($frames frames) from the ALSA file plugin (not paced), $runs runs each;"
echo "capture-bench over all runs: $(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); sum[kv[1]] += kv[2] } }
  END { printf "captured=%d lost=%d overruns=%d", sum["captured"], sum["lost"], sum["overruns"] }' "$work/bench.out")"
echo "(frames lost: the unpaced plugin outruns any consumer; a device cannot)"
echo
echo "| run | CPU s | wall s | CPU ratio to arecord |"
echo "|---|---:|---:|---:|"
echo "| arecord -D benchcapture -t raw > /dev/null, ×$runs | $arecord_cpu | $arecord_wall | 1.00 |"
echo "| CaptureQueue + ALSASource, discarding callback, ×$runs | $queue_cpu | $queue_wall | $(ratio "$queue_cpu" "$arecord_cpu") (goal ≤ 1.2) |"
