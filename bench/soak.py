#!/usr/bin/env python3
"""The soak (issues 19 and 27): many paced streams for a long time while faults are injected, then
every stream's audio is checked exactly. Not part of `make test`.

Four receivers, each with its own output folder:
- main: most simulated field units and four real capture-send processes record here. It is
  SIGKILLed and restarted on the same --out, and stalled (SIGSTOP for a few seconds, then SIGCONT:
  a hung receiver whose peers must notice through their idle timeouts).
- steady: the rest of the simulated units. It is never faulted, so its memory (RSS) is sampled over
  the whole run: it must not grow without bound.
- backup: every real sender also sends its stream here (`--also`). It is stalled for long stretches
  (SIGSTOP 20-60 s): a backup that makes no progress may cost itself its copy, never the main its
  audio (issue 27, item 3).
- segments: one real sender with a 1 MB spool (`--spool-max 1M`) records here in one-minute
  segments with a name template, with the stalled backup beside it: its segments concatenated must
  be the whole tone, with no spool-full gap.

Faults besides: real senders are SIGKILLed and restarted (each restart delivers what the killed run
left in its spool), sometimes with one bit of the killed run's spool flipped (the damage must be
reported, and only the damaged records may be missing from the file: silence at their place); the
simulated units reset their own links at random; and hostile Hellos (bench/hostile.py: the extreme
times and sample positions that once stopped a receiver, a continuation without the resume secret)
are sent to the main, steady and segments receivers, each of which must still be running after them.

At the end: `capture-load verify` checks every simulated stream (PCM bit-exact, Opus-shaped
packet-exact, against their deterministic payloads); every main file of a real sender must be a
bit-exact prefix of the tone (decoded by ffmpeg, against a clean reference recording), except
frames silenced by a spool-damage gap that its sender reported; every backup file a bit-exact prefix;
the segments concatenated the whole tone; every spool empty.

usage: soak.py BIN WORK MINUTES STREAMS [SEED]
Prints Markdown tables of the faults injected, of what was checked and lost, and of the receivers'
RSS; exits 1 if anything was lost or failed verification.
"""
import json, os, random, re, signal, socket, subprocess, sys, threading, time, uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402

BIN, WORK, MINUTES, STREAMS = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
SEED = int(sys.argv[5]) if len(sys.argv) > 5 else 7
rng = random.Random(SEED)
REAL_SENDERS = min(4, max(1, STREAMS // 25))
SEGMENT_SENDERS = 1 if STREAMS > REAL_SENDERS + 2 else 0
SIMULATED = STREAMS - REAL_SENDERS - SEGMENT_SENDERS
STEADY_SIMULATED = SIMULATED // 5
MAIN_SIMULATED = SIMULATED - STEADY_SIMULATED
DURATION = MINUTES * 60
GIVE_UP = "40s"
# A PCM stream (48 kHz stereo 16-bit) writes 192,000 bytes a second, 0.69 GB an hour, and a main
# recording of it is stored twice over by the real senders (main and backup); Opus-shaped streams
# write what their bit rate says (32 kb/s here, a talk-radio rate: 4,000 bytes a second). One in 20
# simulated streams is PCM, as long as all of it fits in half of the free space of the work folder:
# a soak that fills the disk tests something else (an hour of 500 streams needs about 35 GB).
PCM_SHARE = float(os.environ.get("SOAK_PCM_SHARE", "0.05"))
OPUS_BITRATE = int(os.environ.get("SOAK_OPUS_BITRATE", "32000"))
PCM_BYTES_PER_SECOND, OPUS_BYTES_PER_SECOND = 192_000, OPUS_BITRATE / 8 * 1.05


def needed_bytes(pcm_share):
    pcm = round(SIMULATED * pcm_share)
    real = REAL_SENDERS * 2 + SEGMENT_SENDERS * 2 + 1  # main and backup copies, and the reference
    return DURATION * (PCM_BYTES_PER_SECOND * (pcm + real) + OPUS_BYTES_PER_SECOND * (SIMULATED - pcm)) * 1.1


free = os.statvfs(WORK).f_bavail * os.statvfs(WORK).f_frsize
if needed_bytes(PCM_SHARE) > free / 2:
    sys.exit(f"soak: {STREAMS} streams for {MINUTES:g} min ({PCM_SHARE:.0%} of them PCM) need about "
             f"{needed_bytes(PCM_SHARE) / 1e9:.0f} GB, more than half of the {free / 1e9:.0f} GB free in {WORK}: "
             "use fewer streams or minutes, or a smaller SOAK_PCM_SHARE")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return True
        except OSError:
            time.sleep(0.05)
    return False


class Receiver:
    """One capture-recv: its port, folder and process, restarted on the same port and folder."""

    def __init__(self, role, extra=()):
        self.role, self.extra, self.port = role, list(extra), free_port()
        self.out = os.path.join(WORK, role)
        os.makedirs(self.out, exist_ok=True)
        self.process = None
        self.start()

    def start(self):
        log = open(os.path.join(WORK, f"recv-{self.role}.log"), "a")
        self.process = subprocess.Popen(
            [f"{BIN}/capture-recv", "--out", self.out, "--listen", f"127.0.0.1:{self.port}", "--resume-window", "7200",
             "--idle-timeout", "5", "--max-streams", str(STREAMS + 50), "--log-level", "warning"] + self.extra,
            stdout=subprocess.DEVNULL, stderr=log)
        if not wait_port(self.port):
            sys.exit(f"soak: capture-recv ({self.role}) did not start")

    def alive(self):
        return self.process.poll() is None

    def rss_kib(self):
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None


faults = {"main receiver SIGKILL + restart": 0, "main receiver stall (SIGSTOP 2-8 s)": 0, "sender SIGKILL + restart": 0,
          "sender SIGKILL + one bit of its spool flipped + restart": 0, "backup receiver stall (SIGSTOP 20-60 s)": 0,
          "hostile Hellos sent (each to 3 receivers)": 0}
hostile_answers = {}
receivers_lost = []

start = time.time()
main = Receiver("main")
steady = Receiver("steady")
backup = Receiver("backup")
segments = Receiver("segments", ["--segment", "1m", "--name-template", "{stream}_%Y%m%d%H%M%S"])

# RSS of every receiver every 10 s: (elapsed seconds, role, pid, KiB).
rss_samples = []
sampling = threading.Event()


def sample_rss():
    while not sampling.wait(10):
        for receiver in (main, steady, backup, segments):
            value = receiver.rss_kib()
            if value is not None:
                rss_samples.append((time.time() - start, receiver.role, receiver.process.pid, value))


threading.Thread(target=sample_rss, daemon=True).start()


def start_real_sender(index, seconds):
    spool = os.path.join(WORK, f"spool-{index}")
    log = open(os.path.join(WORK, f"real-{index}.log"), "a")
    log.write(f"--- run started at {time.time() - start:.1f} s\n"); log.flush()
    return subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{main.port}", "--source", "tone", "--duration", f"{max(1, int(seconds))}",
                             "--stream-name", f"real-{index}", "--spool", spool, "--reconnect-min", "0.2", "--reconnect-max", "2",
                             "--idle-timeout", "6", "--buffer-seconds", "0.1", "--log-level", "warning",
                             "--also", f"127.0.0.1:{backup.port}", "--also-give-up", GIVE_UP],
                            stdout=subprocess.DEVNULL, stderr=log)


def start_segment_sender():
    log = open(os.path.join(WORK, "segmented.log"), "a")
    return subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{segments.port}", "--source", "tone", "--duration", f"{DURATION:.0f}",
                             "--stream-name", "segmented", "--spool", os.path.join(WORK, "spool-segmented"), "--spool-max", "1M",
                             "--reconnect-min", "0.2", "--reconnect-max", "2", "--idle-timeout", "6", "--buffer-seconds", "0.1",
                             "--log-level", "warning", "--also", f"127.0.0.1:{backup.port}", "--also-give-up", GIVE_UP],
                            stdout=subprocess.DEVNULL, stderr=log)


def flip_spool_bit(index):
    """Flips one bit in the middle of the newest segment of the killed run's spool; returns where."""
    root = os.path.join(WORK, f"spool-{index}")
    candidates = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.startswith("seg-") and name.endswith(".spool"):
                path = os.path.join(folder, name)
                candidates.append((os.path.getmtime(path), path))
    if not candidates:
        return None
    path = max(candidates)[1]
    size = os.path.getsize(path)
    if size < 64:
        return None
    offset = rng.randrange(size // 3, 2 * size // 3)
    with open(path, "r+b") as segment:
        segment.seek(offset)
        byte = segment.read(1)[0]
        segment.seek(offset)
        segment.write(bytes([byte ^ (1 << rng.randrange(8))]))
    return f"{os.path.relpath(path, WORK)} byte {offset}"


generators = []


def start_generators(receiver, count, tag, seed):
    pcm = round(count * PCM_SHARE)
    shapes = [("pcm", pcm, f"soak-{tag}-pcm", seed), ("opus", count - pcm, f"soak-{tag}-opus", seed + 1)]
    for codec, number, prefix, shape_seed in shapes:
        if number == 0:
            continue
        arguments = ["--streams", str(number), "--duration", f"{DURATION:.0f}", "--codec", codec, "--name-prefix", prefix,
                     "--seed", str(shape_seed)] + (["--bitrate", str(OPUS_BITRATE)] if codec == "opus" else [])
        report = open(os.path.join(WORK, f"load-{tag}-{codec}.json"), "w")
        generators.append((receiver, f"{tag}-{codec}", arguments, subprocess.Popen(
            [f"{BIN}/capture-load", "run", f"127.0.0.1:{receiver.port}"] + arguments + [
                "--ramp-seconds", "10", "--disconnect-probability", "0.002", "--reconnect-delay", "0.5", "--max-failures", "100000",
                "--timeout", f"{DURATION + 900:.0f}", "--json"],
            stdout=report, stderr=open(os.path.join(WORK, f"load-{tag}-{codec}.log"), "w"))))


start_generators(main, MAIN_SIMULATED, "main", SEED)
start_generators(steady, STEADY_SIMULATED, "steady", SEED + 10)
reals = {index: start_real_sender(index, DURATION) for index in range(REAL_SENDERS)}
flipped = {index: [] for index in range(REAL_SENDERS)}
segmented = start_segment_sender() if SEGMENT_SENDERS else None
runs_started = REAL_SENDERS


def recording_stream(spool):
    """The id of a stream a real sender is recording now (its spool folder), or None."""
    for entry in sorted(os.listdir(spool)) if os.path.isdir(spool) else []:
        try:
            return uuid.UUID(entry)
        except ValueError:
            continue
    return None


def send_hostile():
    # The forged continuation names a stream the receiver is recording (a real sender's), which must
    # be refused, NOT_STREAM_OWNER; the steady receiver records only simulated streams, so there it
    # names a stream it never saw, which starts a new stream linked to nothing.
    victims = {"main": recording_stream(os.path.join(WORK, "spool-0")),
               "segments": recording_stream(os.path.join(WORK, "spool-segmented")), "steady": None}
    for receiver in (main, steady, segments):
        victim = victims[receiver.role]
        for label, frame in hostile.cases(victim or uuid.uuid4()):
            if label.startswith("continuation"):
                label = ("continuation of a stream being recorded, without its resume secret" if victim
                         else "continuation of a stream the receiver never saw (a new stream)")
            try:
                answer = hostile.send(receiver.port, frame)
            except OSError as error:
                answer = f"connection failed: {error}"
            key = re.sub(r":.*", "", answer)
            hostile_answers[(label, key)] = hostile_answers.get((label, key), 0) + 1
        if not wait_port(receiver.port, 5) or not receiver.alive():
            receivers_lost.append(f"{receiver.role} receiver stopped after hostile Hellos at {time.time() - start:.0f} s")
            receiver.process.wait()
            receiver.start()


# Faults until the streams' duration is over: every kind once first (in a random order), so even a
# short run meets each of them, then a random kind each time.
KINDS = ["kill-receiver", "stall-receiver", "kill-sender", "kill-sender-flip", "stall-backup", "hostile"]
first_round = rng.sample(KINDS, len(KINDS))
while time.time() - start < DURATION - 20:
    time.sleep(rng.uniform(15, 45))
    if time.time() - start >= DURATION - 20:
        break
    kind = first_round.pop(0) if first_round else rng.choice(KINDS)
    if kind == "kill-receiver":
        main.process.send_signal(signal.SIGKILL); main.process.wait()
        time.sleep(rng.uniform(0.5, 3))
        main.start()
        faults["main receiver SIGKILL + restart"] += 1
    elif kind == "stall-receiver":
        main.process.send_signal(signal.SIGSTOP); time.sleep(rng.uniform(2, 8)); main.process.send_signal(signal.SIGCONT)
        faults["main receiver stall (SIGSTOP 2-8 s)"] += 1
    elif kind == "stall-backup":
        backup.process.send_signal(signal.SIGSTOP); time.sleep(rng.uniform(20, 60)); backup.process.send_signal(signal.SIGCONT)
        faults["backup receiver stall (SIGSTOP 20-60 s)"] += 1
    elif kind == "hostile":
        send_hostile()
        faults["hostile Hellos sent (each to 3 receivers)"] += 1
    else:
        index = rng.randrange(REAL_SENDERS)
        reals[index].send_signal(signal.SIGKILL); reals[index].wait()
        if kind == "kill-sender-flip":
            where = flip_spool_bit(index)
            if where:
                flipped[index].append(where)
                with open(os.path.join(WORK, f"real-{index}.log"), "a") as log:
                    log.write(f"--- soak flipped a bit: {where}\n")
            faults["sender SIGKILL + one bit of its spool flipped + restart"] += 1
        else:
            faults["sender SIGKILL + restart"] += 1
        time.sleep(rng.uniform(0.2, 2))
        reals[index] = start_real_sender(index, DURATION - (time.time() - start))
        runs_started += 1

# Let everything finish, then stop the receivers.
reports = {}
for receiver, tag, arguments, process in generators:
    process.wait()
    try:
        reports[tag] = json.load(open(os.path.join(WORK, f"load-{tag}.json")))
    except ValueError:
        reports[tag] = {}
real_status = {index: process.wait(timeout=900) for index, process in reals.items()}
segmented_status = segmented.wait(timeout=900) if segmented else 0
sampling.set()
for receiver in (main, steady, backup, segments):
    if not receiver.alive():
        receivers_lost.append(f"{receiver.role} receiver had stopped by the end (exit {receiver.process.returncode})")
        continue
    receiver.process.send_signal(signal.SIGTERM); receiver.process.wait()

# Simulated streams: verified packet by packet against their payloads.
verified, problems = 0, 0
for receiver, tag, arguments, _ in generators:
    check = subprocess.run([f"{BIN}/capture-load", "verify", receiver.out] + arguments, capture_output=True, text=True)
    found = re.search(r"(\d+) of (\d+) files verified", check.stdout)
    if found:
        verified += int(found.group(1)); problems += int(found.group(2)) - int(found.group(1))
    if check.returncode != 0:
        problems = max(problems, 1)
        print(f"soak: capture-load verify ({tag}): {(check.stdout + check.stderr)[-600:]}", file=sys.stderr)

# Real senders: checked against a clean recording of the same tone.
reference_out = os.path.join(WORK, "reference")
os.makedirs(reference_out, exist_ok=True)
reference_port = free_port()
ref = subprocess.Popen([f"{BIN}/capture-recv", "--out", reference_out, "--listen", f"127.0.0.1:{reference_port}", "--log-level", "error"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wait_port(reference_port)
subprocess.run([f"{BIN}/capture-send", f"127.0.0.1:{reference_port}", "--source", "tone", "--duration", f"{DURATION + 60:.0f}", "--no-pace",
                "--stream-name", "reference", "--spool", os.path.join(WORK, "spool-reference"), "--log-level", "error"], check=True)
ref.send_signal(signal.SIGTERM); ref.wait()


def decode(path):
    return subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-f", "s16le", "-"], capture_output=True, check=True).stdout


reference = decode(os.path.join(reference_out, next(name for name in os.listdir(reference_out) if name.endswith(".caf"))))


def silenced_only(audio):
    """Whether every 4-byte frame where `audio` differs from the reference is silence (a gap)."""
    if len(audio) > len(reference):
        return False
    for offset in range(0, len(audio), 4):
        if audio[offset:offset + 4] != reference[offset:offset + 4] and audio[offset:offset + 4] != b"\0\0\0\0":
            return False
    return True


def reported_damage(index):
    text = open(os.path.join(WORK, f"real-{index}.log"), errors="replace").read()
    return re.search(r"damage", text, re.IGNORECASE) is not None


real_files, real_frames, real_bad, real_silenced = 0, 0, [], 0
for name in sorted(os.listdir(main.out)):
    if name.startswith("real-") and name.endswith(".caf"):
        audio = decode(os.path.join(main.out, name))
        real_files += 1
        real_frames += len(audio) // 4
        if reference[:len(audio)] != audio:
            index = int(name.split("-")[1].split("_")[0])
            if flipped[index] and reported_damage(index) and silenced_only(audio):
                real_silenced += 1
            else:
                real_bad.append(name)
backup_files, backup_frames, backup_bad = 0, 0, []
for name in sorted(os.listdir(backup.out)):
    if name.endswith(".caf"):
        audio = decode(os.path.join(backup.out, name))
        backup_files += 1
        backup_frames += len(audio) // 4
        if reference[:len(audio)] != audio:
            backup_bad.append(name)
segment_names = sorted(name for name in os.listdir(segments.out) if name.startswith("segmented_") and name.endswith(".caf"))
segment_audio = b"".join(decode(os.path.join(segments.out, name)) for name in segment_names)
segment_expected = reference[:int(DURATION) * 48000 * 4]
segments_whole = segment_audio == segment_expected if SEGMENT_SENDERS else True
# What a spool keeps after delivering: nothing but the damaged bytes of a flipped bit (STREAM.damaged,
# kept for inspection, each reported in the sender's log).
def undelivered(entry):
    return not entry.startswith(".") and not entry.endswith(".damaged")


leftover = [f"spool-{index}" for index in range(REAL_SENDERS)
            if any(undelivered(entry) for entry in os.listdir(os.path.join(WORK, f"spool-{index}")))]
kept_damaged = sum(1 for index in range(REAL_SENDERS) for entry in os.listdir(os.path.join(WORK, f"spool-{index}")) if entry.endswith(".damaged"))
damage_reports = [line for index in range(REAL_SENDERS)
                  for line in open(os.path.join(WORK, f"real-{index}.log"), errors="replace").read().splitlines()
                  if "capture-send:" in line and "damage" in line]
damage_without_loss = sum(1 for line in damage_reports if "no audio was lost" in line)
unreported_damage = [f"spool-{index}" for index in range(REAL_SENDERS) if flipped[index] and not reported_damage(index)]
if SEGMENT_SENDERS and any(undelivered(entry) for entry in os.listdir(os.path.join(WORK, "spool-segmented"))):
    leftover.append("spool-segmented")
# A sender may exit 4 (a backup was given up: the main has everything) or, after a flipped bit, with
# the status that reports audio lost to spool damage; anything else is a failure.
failed_senders = [f"real-{index} (exit {status})" for index, status in real_status.items()
                  if status not in (0, 4) and not (flipped[index] and reported_damage(index))]
if segmented_status not in (0, 4):
    failed_senders.append(f"segmented (exit {segmented_status})")
backups_given_up = sum(len(re.findall(r"gave up|given up|giving up", open(os.path.join(WORK, name), errors="replace").read(), re.IGNORECASE))
                       for name in os.listdir(WORK) if name.startswith(("real-", "segmented")) and name.endswith(".log"))

sent_resets = sum(report.get("injectedDisconnects", 0) for report in reports.values())
reconnects = sum(report.get("reconnects", 0) for report in reports.values())
failed_streams = sum(report.get("failed", 0) for report in reports.values())
lost = (problems + len(real_bad) + len(backup_bad) + len(leftover) + failed_streams + len(failed_senders) + len(unreported_damage)
        + (0 if segments_whole else 1) + len(receivers_lost))
print(f"Soak, {time.strftime('%Y-%m-%d')}: {MINUTES:g} min, {STREAMS} streams ({SIMULATED} simulated, {PCM_SHARE:.0%} PCM and the rest Opus-shaped, "
      f"{MAIN_SIMULATED} to the main receiver and {STEADY_SIMULATED} to the steady one; {REAL_SENDERS} real capture-send with a backup; "
      f"{SEGMENT_SENDERS} real capture-send in 1-minute segments with a 1 MB spool and the same backup), seed {SEED}\n")
print("| | count |\n|---|---|")
for kind, count in faults.items():
    print(f"| {kind} | {count} |")
print(f"| link resets by the simulated senders | {sent_resets} |")
print(f"| reconnects of the simulated senders | {reconnects} |")
print(f"| simulated streams verified exactly / with problems | {verified} / {problems} |")
print(f"| simulated streams failed | {failed_streams} |")
print(f"| real sender runs / main files / frames checked against the tone | {runs_started} / {real_files} / {real_frames} |")
print(f"| real sender main files not a bit-exact prefix of the tone | {len(real_bad)} |")
print(f"| spool damage reports by the senders (no audio lost / audio lost) | {damage_without_loss} / {len(damage_reports) - damage_without_loss} |")
print(f"| damaged bytes kept for inspection (STREAM.damaged folders) / flipped bits never reported | {kept_damaged} / {len(unreported_damage)} |")
print(f"| main files with frames silenced by a reported spool damage (only there) | {real_silenced} |")
print(f"| backup files / frames checked; not a bit-exact prefix | {backup_files} / {backup_frames}; {len(backup_bad)} |")
print(f"| backups given up (lines in the senders' logs) | {backups_given_up} |")
print(f"| segments / the whole tone when concatenated | {len(segment_names)} / {'yes' if segments_whole else 'NO'} |")
print(f"| spools left with undelivered audio / senders failing | {len(leftover)} / {len(failed_senders)} |")
print(f"| receivers stopped by a fault they should survive | {len(receivers_lost)} |")
print(f"| **streams with audio lost** | **{lost}** |")
print("\nAnswers to the hostile Hellos:\n\n| Hello | answer | times |\n|---|---|---|")
for (label, answer), count in sorted(hostile_answers.items()):
    print(f"| {label} | {answer} | {count} |")
print("\nReceiver memory (RSS, MiB; main: its longest-lived process):\n\n| receiver | first sample | at half time | last sample | max |\n|---|---|---|---|---|")
for role in ("main", "steady", "backup", "segments"):
    samples = [s for s in rss_samples if s[1] == role]
    if role == "main" and samples:
        by_pid = {}
        for sample in samples:
            by_pid.setdefault(sample[2], []).append(sample)
        samples = max(by_pid.values(), key=len)
    if not samples:
        continue
    half = min(samples, key=lambda s: abs(s[0] - DURATION / 2))
    print(f"| {role} | {samples[0][3] / 1024:.1f} ({samples[0][0]:.0f} s) | {half[3] / 1024:.1f} ({half[0]:.0f} s) | "
          f"{samples[-1][3] / 1024:.1f} ({samples[-1][0]:.0f} s) | {max(s[3] for s in samples) / 1024:.1f} |")
with open(os.path.join(WORK, "rss.csv"), "w") as table:
    table.write("seconds,receiver,pid,rss_kib\n")
    for sample in rss_samples:
        table.write(f"{sample[0]:.0f},{sample[1]},{sample[2]},{sample[3]}\n")
for line in receivers_lost + real_bad + backup_bad + failed_senders + leftover + [f"{name}: a flipped bit the sender never reported" for name in unreported_damage]:
    print(f"soak: {line}", file=sys.stderr)
sys.exit(1 if lost else 0)
