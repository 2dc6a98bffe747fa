#!/bin/sh
# Writes a raw capture fixture for capturetest.conf: SECONDS of s16 stereo 48 kHz where every
# sample is distinct in a short window (a per-channel counter: left = 2n, right = 2n+1, mod 65536),
# so a lost, repeated or shifted frame shows up in `cmp`.
#   make-fixture.sh OUTPUT [SECONDS]
set -eu
output=${1:?usage: make-fixture.sh OUTPUT [SECONDS]}
seconds=${2:-1}
python3 - "$output" "$seconds" <<'PY'
import struct, sys
path, seconds = sys.argv[1], float(sys.argv[2])
frames = int(48000 * seconds)
with open(path, "wb") as f:
    for n in range(frames):
        f.write(struct.pack("<HH", (2 * n) % 65536, (2 * n + 1) % 65536))
PY
