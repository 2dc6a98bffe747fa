#!/usr/bin/env python3
"""Live listening costs (docs/HTTP-API.md, "Listening"), against the same receiver without
listeners in the same invocation:

1. Receiver CPU with 10 paced streams and no listener (reference), then with one listener on each
   (10 listeners): PCM streams (the receiver encodes to Opus) and Opus streams (remuxed).
2. Latency from capture to a listener's first decodable sample of an Opus stream: a file source of
   silence with a burst at 6 s; the listener joins at 2 s, reads the Ogg pages as they arrive and
   decodes them with libopus; latency = arrival of the page holding the burst - (the stream's start
   time + 6 s). For --buffer-seconds 0.5 (the default), 0.1 and 0.05.

usage: listen.py BIN WORK
"""
import ctypes, ctypes.util, http.client, json, math, os, signal, socket, statistics, struct, subprocess, sys, threading, time, wave
from datetime import datetime

BIN, WORK = sys.argv[1], sys.argv[2]
CORES_TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def wait_port(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def receiver(folder):
    port, http_port = free_port(), free_port()
    process = subprocess.Popen([f"{BIN}/capture-recv", "--out", os.path.join(folder, "out"), "--listen", f"127.0.0.1:{port}",
                                "--http", f"127.0.0.1:{http_port}", "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port); wait_port(http_port)
    return process, port, http_port


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CORES_TICKS


def streams(http_port):
    connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
    connection.request("GET", "/api/streams")
    return json.loads(connection.getresponse().read())


def drain(http_port, stream_id, stop, counter):
    connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
    connection.request("GET", f"/api/streams/{stream_id}/listen")
    response = connection.getresponse()
    while not stop.is_set():
        chunk = response.read1(65536)
        if not chunk:
            break
        counter[0] += len(chunk)


def cpu_run(codec):
    folder = os.path.join(WORK, f"cpu-{codec}"); os.makedirs(folder, exist_ok=True)
    process, port, http_port = receiver(folder)
    codec_args = ["--codec", "opus"] if codec == "opus" else []
    senders = [subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{port}", "--source", "tone", "--duration", "50",
                                 "--stream-name", f"{codec}-{i}", "--spool", os.path.join(folder, f"spool-{i}"), "--quiet"] + codec_args,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(10)]
    deadline = time.time() + 20
    while len([s for s in streams(http_port) if s["state"] == "live"]) < 10 and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    start = cpu_seconds(process.pid); t0 = time.time(); time.sleep(15)
    without = (cpu_seconds(process.pid) - start) / (time.time() - t0)
    stop = threading.Event(); counters = []
    threads = []
    for s in streams(http_port):
        counter = [0]; counters.append(counter)
        thread = threading.Thread(target=drain, args=(http_port, s["id"], stop, counter), daemon=True); thread.start(); threads.append(thread)
    time.sleep(2)
    start = cpu_seconds(process.pid); t0 = time.time(); bytes0 = sum(c[0] for c in counters); time.sleep(15)
    elapsed = time.time() - t0
    with_listeners = (cpu_seconds(process.pid) - start) / elapsed
    rate = (sum(c[0] for c in counters) - bytes0) * 8 / elapsed / 1000
    stop.set()
    for s in senders:
        s.send_signal(signal.SIGKILL); s.wait()
    process.send_signal(signal.SIGTERM); process.wait()
    return without, with_listeners, rate


class Opus:
    def __init__(self):
        self.lib = ctypes.CDLL(ctypes.util.find_library("opus"))
        self.lib.opus_decoder_create.restype = ctypes.c_void_p
        error = ctypes.c_int()
        self.decoder = self.lib.opus_decoder_create(48000, 2, ctypes.byref(error))
        self.pcm = (ctypes.c_int16 * (5760 * 2))()

    def peak(self, packet):
        n = self.lib.opus_decode(ctypes.c_void_p(self.decoder), packet, len(packet), self.pcm, 5760, 0)
        return max((abs(self.pcm[i]) for i in range(max(0, n) * 2)), default=0)


def read_exactly(response, count):
    data = b""
    while len(data) < count:
        chunk = response.read(count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def latency_run(buffer_seconds, trial):
    folder = os.path.join(WORK, f"latency-{buffer_seconds}-{trial}"); os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "burst.wav")
    rate = 48000
    with wave.open(source, "wb") as w:
        w.setnchannels(2); w.setsampwidth(2); w.setframerate(rate)
        frames = bytearray(rate * 10 * 4)
        for i in range(rate * 6, rate * 7):
            value = int(16000 * math.sin(2 * math.pi * 440 * i / rate))
            struct.pack_into("<hh", frames, i * 4, value, value)
        w.writeframes(bytes(frames))
    process, port, http_port = receiver(folder)
    sender = subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{port}", "--source", "file", "--file", source, "--codec", "opus",
                               "--buffer-seconds", str(buffer_seconds), "--stream-name", "burst", "--spool", os.path.join(folder, "spool"), "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    row = None
    deadline = time.time() + 20
    while row is None and time.time() < deadline:
        rows = streams(http_port)
        row = rows[0] if rows else None
        time.sleep(0.05)
    started = datetime.fromisoformat(row["started"].replace("Z", "+00:00")).timestamp()
    while time.time() < started + 2:
        time.sleep(0.05)
    connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=20)
    connection.request("GET", f"/api/streams/{row['id']}/listen")
    response = connection.getresponse()
    opus = Opus()
    arrival = None
    packets_seen = 0
    pending = b""
    while arrival is None:
        header = read_exactly(response, 27)
        segments = read_exactly(response, header[26])
        body = read_exactly(response, sum(segments))
        now = time.time()
        offset = 0
        for size in segments:
            pending += body[offset:offset + size]; offset += size
            if size < 255:
                packets_seen += 1
                if packets_seen > 2 and opus.peak(pending) > 4000:
                    arrival = now
                    break
                pending = b""
    sender.wait(); process.send_signal(signal.SIGTERM); process.wait()
    return arrival - (started + 6.0)


def main():
    print("| streams | codec at the receiver | listeners | receiver CPU (cores) | ratio | audio to listeners |")
    print("|---|---|---|---|---|---|")
    for codec, label in (("pcm", "PCM 48 kHz s16 stereo → Opus (encoded)"), ("opus", "Opus 128 kb/s stereo, the default (remuxed)")):
        without, with_listeners, rate = cpu_run(codec)
        print(f"| 10 | {label} | 0 | {without:.3f} | 1.00 | — |")
        print(f"| 10 | {label} | 10 | {with_listeners:.3f} | {with_listeners / without:.2f} | {rate:.0f} kb/s |")
    print()
    print("| --buffer-seconds | trials | capture → listener's first decodable sample: min | median | max |")
    print("|---|---|---|---|---|")
    for buffer_seconds in (0.5, 0.1, 0.05):
        values = [latency_run(buffer_seconds, trial) for trial in range(3)]
        print(f"| {buffer_seconds:g} | {len(values)} | {min(values):.2f} s | {statistics.median(values):.2f} s | {max(values):.2f} s |")


main()
