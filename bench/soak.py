#!/usr/bin/env python3
"""The soak (issue 19): many paced streams for a long time while faults are injected, then every
stream's audio is checked exactly. Not part of `make test`.

Streams: `capture-load run` plays the simulated field units (half PCM, half Opus-shaped), which
also reset their own connections at random (--disconnect-probability); a few real `capture-send`
processes (tone, each with its own spool) are SIGKILLed and restarted, and each restart delivers
what the killed run left in its spool. Faults on the receiver: SIGKILL and restart on the same
--out, and stalls (SIGSTOP for a few seconds, then SIGCONT: a hung receiver whose peers must notice
through their idle timeouts). At the end: `capture-load verify` checks every simulated stream
(PCM bit-exact, Opus-shaped packet-exact, against their deterministic payloads), and every file of
a real sender must be a bit-exact prefix of the tone (decoded by ffmpeg, against a clean reference
recording), with every spool empty (everything captured was delivered).

usage: soak.py BIN WORK MINUTES STREAMS [SEED]
Prints a Markdown table of faults injected and of what was checked and lost; exits 1 if anything
was lost or failed verification.
"""
import json, os, random, signal, socket, subprocess, sys, time

BIN, WORK, MINUTES, STREAMS = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
SEED = int(sys.argv[5]) if len(sys.argv) > 5 else 7
rng = random.Random(SEED)
REAL_SENDERS = min(4, max(1, STREAMS // 25))
SIMULATED = STREAMS - REAL_SENDERS
DURATION = MINUTES * 60
OUT = os.path.join(WORK, "out")
os.makedirs(OUT, exist_ok=True)


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def wait_port(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return True
        except OSError:
            time.sleep(0.05)
    return False


PORT = free_port()
faults = {"receiver SIGKILL + restart": 0, "receiver stall (SIGSTOP 2-8 s)": 0, "sender SIGKILL + restart": 0}


def start_receiver():
    log = open(os.path.join(WORK, "recv.log"), "a")
    process = subprocess.Popen([f"{BIN}/capture-recv", "--out", OUT, "--listen", f"127.0.0.1:{PORT}", "--resume-window", "7200",
                                "--idle-timeout", "5", "--max-streams", str(STREAMS + 50), "--log-level", "warning"],
                               stdout=subprocess.DEVNULL, stderr=log)
    if not wait_port(PORT):
        sys.exit("soak: capture-recv did not start")
    return process


def start_real_sender(index, seconds):
    spool = os.path.join(WORK, f"spool-{index}")
    log = open(os.path.join(WORK, f"real-{index}.log"), "a")
    return subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{PORT}", "--source", "tone", "--duration", f"{max(1, int(seconds))}",
                             "--stream-name", f"real-{index}", "--spool", spool, "--reconnect-min", "0.2", "--reconnect-max", "2",
                             "--idle-timeout", "6", "--buffer-seconds", "0.1", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=log)


start = time.time()
receiver = start_receiver()
shapes = [("pcm", SIMULATED // 2, "soak-pcm", SEED), ("opus", SIMULATED - SIMULATED // 2, "soak-opus", SEED + 1)]
generators = []
for codec, count, prefix, seed in shapes:
    if count == 0:
        continue
    arguments = ["--streams", str(count), "--duration", f"{DURATION:.0f}", "--codec", codec, "--name-prefix", prefix, "--seed", str(seed)]
    report = open(os.path.join(WORK, f"load-{codec}.json"), "w")
    generators.append((codec, arguments, subprocess.Popen(
        [f"{BIN}/capture-load", "run", f"127.0.0.1:{PORT}"] + arguments + [
            "--ramp-seconds", "10", "--disconnect-probability", "0.002", "--reconnect-delay", "0.5", "--max-failures", "100000",
            "--timeout", f"{DURATION + 900:.0f}", "--json"],
        stdout=report, stderr=open(os.path.join(WORK, f"load-{codec}.log"), "w"))))
reals = {index: start_real_sender(index, DURATION) for index in range(REAL_SENDERS)}
runs_started = REAL_SENDERS

# Faults until the streams' duration is over.
while time.time() - start < DURATION - 20:
    time.sleep(rng.uniform(15, 45))
    if time.time() - start >= DURATION - 20:
        break
    kind = rng.choice(["kill-receiver", "stall-receiver", "kill-sender"])
    if kind == "kill-receiver":
        receiver.send_signal(signal.SIGKILL); receiver.wait()
        time.sleep(rng.uniform(0.5, 3))
        receiver = start_receiver()
        faults["receiver SIGKILL + restart"] += 1
    elif kind == "stall-receiver":
        receiver.send_signal(signal.SIGSTOP); time.sleep(rng.uniform(2, 8)); receiver.send_signal(signal.SIGCONT)
        faults["receiver stall (SIGSTOP 2-8 s)"] += 1
    else:
        index = rng.randrange(REAL_SENDERS)
        reals[index].send_signal(signal.SIGKILL); reals[index].wait()
        time.sleep(rng.uniform(0.2, 2))
        reals[index] = start_real_sender(index, DURATION - (time.time() - start))
        runs_started += 1
        faults["sender SIGKILL + restart"] += 1

# Let everything finish, then stop the receiver.
reports = {}
for codec, arguments, process in generators:
    process.wait()
    try:
        reports[codec] = json.load(open(os.path.join(WORK, f"load-{codec}.json")))
    except ValueError:
        reports[codec] = {}
real_status = {index: process.wait(timeout=900) for index, process in reals.items()}
receiver.send_signal(signal.SIGTERM); receiver.wait()

# Simulated streams: verified packet by packet against their payloads.
verified, problems = 0, 0
for codec, arguments, _ in generators:
    check = subprocess.run([f"{BIN}/capture-load", "verify", OUT] + arguments, capture_output=True, text=True)
    import re
    found = re.search(r"(\d+) of (\d+) files verified", check.stdout)
    if found:
        verified += int(found.group(1)); problems += int(found.group(2)) - int(found.group(1))
    if check.returncode != 0:
        problems = max(problems, 1)
        print(f"soak: capture-load verify ({codec}): {(check.stdout + check.stderr)[-600:]}", file=sys.stderr)

# Real senders: each file a bit-exact prefix of the tone; every spool empty.
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
real_files, real_frames, real_bad = 0, 0, []
for name in sorted(os.listdir(OUT)):
    if name.startswith("real-") and name.endswith(".caf"):
        audio = decode(os.path.join(OUT, name))
        real_files += 1
        real_frames += len(audio) // 4
        if reference[:len(audio)] != audio:
            real_bad.append(name)
leftover = [f"spool-{index}" for index in range(REAL_SENDERS)
            if any(not entry.startswith(".") for entry in os.listdir(os.path.join(WORK, f"spool-{index}")))]
failed_senders = [index for index, status in real_status.items() if status != 0]

sent_resets = sum(report.get("injectedDisconnects", 0) for report in reports.values())
reconnects = sum(report.get("reconnects", 0) for report in reports.values())
failed_streams = sum(report.get("failed", 0) for report in reports.values())
lost = problems + len(real_bad) + len(leftover) + failed_streams + len(failed_senders)
print(f"Soak, {time.strftime('%Y-%m-%d')}: {MINUTES:g} min, {STREAMS} streams ({SIMULATED} simulated, half PCM and half Opus-shaped; "
      f"{REAL_SENDERS} real capture-send), seed {SEED}\n")
print("| | count |\n|---|---|")
for kind, count in faults.items():
    print(f"| {kind} | {count} |")
print(f"| link resets by the simulated senders | {sent_resets} |")
print(f"| reconnects of the simulated senders | {reconnects} |")
print(f"| simulated streams verified exactly / with problems | {verified} / {problems} |")
print(f"| simulated streams failed | {failed_streams} |")
print(f"| real sender runs / files / frames checked against the tone | {runs_started} / {real_files} / {real_frames} |")
print(f"| real sender files not a bit-exact prefix of the tone | {len(real_bad)} |")
print(f"| spools left with undelivered audio / senders exiting non-zero | {len(leftover)} / {len(failed_senders)} |")
print(f"| **streams with audio lost** | **{lost}** |")
sys.exit(1 if lost else 0)
