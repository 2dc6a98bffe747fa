#!/usr/bin/env bash
# Regenerates scripts/release-order.txt, the symbol ordering file that scripts/build-release.sh hands
# to the linker: every function the executables run in typical use, so that the linker puts them
# next to each other at the front of the code instead of scattered over 25 MB of it.
#
# Why: the kernel maps an executable's code in whole page-cache folios (64 kB and more) around every
# page that is touched, so a few thousand functions spread over the whole text made about 11 MB of
# it resident in capture-send. Packed together they take a fraction of that (README, Performance).
#
# How: a release build without the ordering runs, under valgrind's callgrind, the workloads below
# (tone, WAV file, ALSA through a file-plugin PCM, Opus, TLS with a pinned certificate, the
# receiver taking all of them). Every function that ran at least once, in either executable, is
# listed, sorted by name so that the file diffs well. Run it after changes that add or rename much
# code; a stale file only costs memory, never correctness (unknown names are skipped).
#
# Needs valgrind (apt-get install valgrind), sox and openssl; takes about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
command -v valgrind >/dev/null || { echo "generate-order-file.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }

scripts/build-release.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# valgrind 3.19 cannot read the toolchain's DWARF 5: profile copies without debug information.
strip --strip-debug -o "$work/capture-send" .build-static/release/capture-send
strip --strip-debug -o "$work/capture-recv" .build-static/release/capture-recv
profile() { local name=$1; shift; valgrind --tool=callgrind --callgrind-out-file="$work/$name.callgrind" \
  --dump-instr=no --compress-strings=no --compress-pos=no --demangle=no "$@" >"$work/$name.log" 2>&1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/out" "$work/tls" "$work/state"
"$work/capture-recv" gen-cert --out "$work/tls" --host localhost >"$work/gen-cert.log"
pin=$(grep -Eo '[0-9a-f]{64}' "$work/gen-cert.log" | head -1)
profile recv "$work/capture-recv" --out "$work/out" --listen "127.0.0.1:$port" --log-level warning &
receiver=$!
profile recv-tls "$work/capture-recv" --out "$work/out" --listen "127.0.0.1:$tls_port" --log-level warning \
  --tls-cert "$work/tls/cert.pem" --tls-key "$work/tls/key.pem" &
tls_receiver=$!
for _ in $(seq 1 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null && break
  sleep 0.1
done

export XDG_STATE_HOME="$work/state"
sox -n -r 48000 -c 2 -b 24 -e signed-integer "$work/in.wav" synth 10 sine 440 gain -6
sox -n -r 48000 -c 2 -b 16 -e signed-integer -t raw "$work/fixture.raw" synth 10 sine 440 gain -6
cat >"$work/asound.conf" <<EOF
pcm.profile {
    type file
    slave.pcm { type null }
    file "/dev/null"
    infile "$work/fixture.raw"
    format "raw"
}
EOF
send() { local name=$1; shift; profile "$name" "$work/capture-send" "$@" --stream-name "$name" --log-level warning --quiet; }
send tone "127.0.0.1:$port" --source tone --duration 10 --no-pace
send file "127.0.0.1:$port" --source file --file "$work/in.wav" --no-pace
send opus "127.0.0.1:$port" --source tone --duration 10 --no-pace --codec opus
send tls "127.0.0.1:$tls_port" --source tone --duration 10 --no-pace --tls --pin "$pin"
ALSA_CONFIG_PATH="$work/asound.conf" send alsa "127.0.0.1:$port" --source alsa --device profile --duration 10 \
  --rate 48000 --channels 2 --format s16
ALSA_CONFIG_PATH="$work/asound.conf" profile list "$work/capture-send" --list-devices
profile help "$work/capture-send" --help
kill -TERM "$receiver" "$tls_receiver"
wait "$receiver" "$tls_receiver" || true

# The functions each run entered: callgrind's "fn=" lines of the executable's own object. Names
# that several local symbols share (merged helpers like `objectdestroyTm`, one per object file) are
# left out: the linker would move every section holding one, among them whole prebuilt runtime and
# Foundation objects that are not split into a section per function.
python3 - "$work" "$root/scripts/release-order.txt" <<'PY'
import collections, glob, os, subprocess, sys
work, target = sys.argv[1], sys.argv[2]
shared = set()
for executable in ("capture-send", "capture-recv"):
    listing = subprocess.run(["nm", "--defined-only", os.path.join(work, executable)], capture_output=True, text=True, check=True)
    counts = collections.Counter(line.split()[-1] for line in listing.stdout.splitlines() if line.strip())
    shared |= {name for name, count in counts.items() if count > 1}
# How many of the runs entered each function: those every run needs (start-up, argument parsing,
# the event loop, the queue) come first, then those fewer runs need, so that each kind of run
# touches the front of the list and a few short stretches behind it. Ties sorted by name.
uses = collections.Counter()
for path in glob.glob(os.path.join(work, "*.callgrind*")):
    in_executable = False
    entered = set()
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            in_executable = os.path.basename(line[3:].strip()) in ("capture-send", "capture-recv")
        elif line.startswith("fn=") and in_executable:
            name = line[3:].strip().split("'")[0]
            if name and not name.startswith("0x") and name not in shared:
                entered.add(name)
    uses.update(entered)
if len(uses) < 1000:
    sys.exit(f"generate-order-file.sh: only {len(uses)} functions profiled; see the logs in {work}")
with open(target, "w") as out:
    out.write("\n".join(sorted(uses, key=lambda name: (-uses[name], name))) + "\n")
print(f"{len(uses)} functions from {len(glob.glob(os.path.join(work, '*.callgrind*')))} runs written to {target}")
PY
