#!/usr/bin/env python3
"""Handover through HAProxy (docs/SCALE-OUT.md): how long a sender goes without an Ack when the
receiver holding its stream is SIGKILLed and another receiver on the same folder takes the stream
over, and how fast it then catches up. Reference, in the same invocation: the same sender and
HAProxy, but the link is cut by restarting HAProxy while the receiver stays up (a plain reconnect
and resume on the same receiver). Default reconnect settings (--reconnect-min 0.5 s, full jitter).

A third scenario measures catch-up after a handover: the receiver is killed while the other is
not yet up, and OUTAGE_S later the other one starts; the time is then counted from its start.

usage: handover.py BIN WORK TRIALS OUTAGE_S
Prints a Markdown table: per scenario, the time from the cut (or from the second receiver's start)
to the first Ack after it (min / median / max over the trials), the audio backlog then, and the
catch-up speed (seconds of backlog delivered per second, x real time).
"""
import json, os, signal, socket, statistics, subprocess, sys, time
from datetime import datetime

BIN, WORK, TRIALS, OUTAGE = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def wait_port(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close(); return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port}")


def receiver(out, port):
    process = subprocess.Popen([f"{BIN}/capture-recv", "--out", out, "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return process


def haproxy(path, port, backends):
    servers = "\n".join(f"    server r{i} 127.0.0.1:{p} check inter 250ms fall 1 rise 1" for i, p in enumerate(backends))
    with open(path, "w") as f:
        f.write(f"""defaults
    mode tcp
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
frontend capture
    bind 127.0.0.1:{port}
    default_backend receivers
backend receivers
    balance leastconn
{servers}
""")
    process = subprocess.Popen(["haproxy", "-db", "-f", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return process


def status_lines(text):
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("message") == "status":
            t = datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()
            yield t, record["acked_s"], record["backlog_s"], record["captured_s"]


def trial(scenario, index):
    folder = os.path.join(WORK, f"{scenario}-{index}")
    out = os.path.join(folder, "out"); os.makedirs(out)
    ports = [free_port(), free_port()]
    front = free_port()
    first = receiver(out, ports[0])
    balancer = haproxy(os.path.join(folder, "haproxy.cfg"), front, ports)
    log = open(os.path.join(folder, "sender.log"), "w+")
    sender = subprocess.Popen([f"{BIN}/capture-send", f"127.0.0.1:{front}", "--source", "tone", "--duration", str(OUTAGE + 20 if scenario == "outage" else 8),
                               "--stream-name", "handover", "--spool", os.path.join(folder, "spool"), "--log-format", "json",
                               "--status-interval", "0.02"], stdout=subprocess.DEVNULL, stderr=log)
    second = receiver(out, ports[1]) if scenario != "outage" else None
    time.sleep(3)
    if scenario == "handover":
        first.send_signal(signal.SIGKILL); first.wait()
        cut = time.time()
    elif scenario == "outage":
        first.send_signal(signal.SIGKILL); first.wait()
        time.sleep(OUTAGE)
        second = receiver(out, ports[1])
        cut = time.time()
    else:
        balancer.send_signal(signal.SIGKILL); balancer.wait()
        cut = time.time()
        balancer = haproxy(os.path.join(folder, "haproxy.cfg"), front, ports)
    code = sender.wait(timeout=OUTAGE + 120)
    for process in (first, second, balancer):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM); process.wait()
    log.seek(0)
    lines = list(status_lines(log.read()))
    if code != 0:
        raise RuntimeError(f"{scenario} trial {index}: capture-send exited {code}; see {log.name}")
    before = [l for l in lines if l[0] <= cut]
    acked_at_cut = before[-1][1] if before else 0
    after = [l for l in lines if l[0] > cut]
    first_ack = next(l for l in after if l[1] > acked_at_cut)
    # The audio to catch up: captured but not acknowledged when the first Ack after the cut came.
    backlog = first_ack[3] - acked_at_cut
    caught_up = next((l for l in after if l[0] >= first_ack[0] and l[3] - l[1] <= 0.5), None)
    if caught_up is None:
        speed = float("nan")
    elif caught_up[0] - first_ack[0] < 0.05:
        speed = float("inf")  # everything was acknowledged with the first Ack
    else:
        speed = (caught_up[1] - acked_at_cut) / (caught_up[0] - first_ack[0] + 0.02)
    return first_ack[0] - cut, backlog, speed


def main():
    results = {}
    for scenario in ("reference", "handover", "outage"):
        results[scenario] = [trial(scenario, i) for i in range(TRIALS)]
    print("| scenario | trials | → first Ack: min | median | max | audio to catch up (s, median) | catch-up (× real time, median) |")
    print("|---|---|---|---|---|---|---|")
    for scenario, label in (("reference", "link cut, same receiver (HAProxy restarted)"),
                            ("handover", "receiver SIGKILLed, the other one takes over"),
                            (f"outage", f"receiver SIGKILLed, the other one starts {OUTAGE:g} s later (from its start)")):
        rows = results[scenario]
        gaps = [r[0] for r in rows]
        speeds = [r[2] for r in rows if r[2] == r[2]]
        middle = statistics.median(speeds) if speeds else float("nan")
        speed = "with the first Ack" if middle == float("inf") else f"{middle:.0f}×" if middle == middle else "n/a"
        print(f"| {label} | {len(rows)} | {min(gaps):.2f} s | {statistics.median(gaps):.2f} s | {max(gaps):.2f} s | "
              f"{statistics.median(r[1] for r in rows):.2f} | {speed} |")
    ratio = statistics.median(r[0] for r in results["handover"]) / statistics.median(r[0] for r in results["reference"])
    print(f"\nhandover / reference (median time to the first Ack): {ratio:.2f}")


main()
