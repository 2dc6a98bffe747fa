#!/usr/bin/env python3
"""Group commit strategies for the receiver's sync round (docs/DURABILITY.md, "Group commit").

Simulates FILES recording streams in FOLDER: each has a data file, a packet-size journal and a
position log, like a receiver's CAF file, .pakt-journal and .position. Every tick each stream
appends 8 KB of audio and a 40-byte journal record; then one sync round makes every file durable
in the order the receiver needs (audio and journals durable, then position records written and
made durable). Strategies:
  fdatasync-T  each file fdatasync'ed, spread over T threads (data+journals, then position logs)
  syncfs       syncfs on the folder's filesystem, position records, syncfs again
Prints one line per (files, strategy): the round's wall time (mean and max over the ticks) and the
process CPU time per round (user+sys).

usage: group-commit.py FOLDER FILES[,FILES...] [TICKS]
"""
import ctypes, os, resource, shutil, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

libc = ctypes.CDLL("libc.so.6", use_errno=True)

def syncfs(fd):
    if libc.syncfs(fd) != 0:
        raise OSError(ctypes.get_errno(), "syncfs")

def open_streams(folder, count):
    streams = []
    for i in range(count):
        base = os.path.join(folder, f"s{i:05d}.caf")
        fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for p in (base, base + ".pakt-journal", base + ".position")]
        streams.append(fds)
    return streams

def run(folder, count, strategy, ticks):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    streams = open_streams(folder, count)
    dirfd = os.open(folder, os.O_RDONLY)
    os.sync()
    audio, journal_record, position_record = os.urandom(8192), os.urandom(40), os.urandom(32)
    offsets = [[0, 0, 0] for _ in streams]
    threads = int(strategy.split("-")[1]) if strategy.startswith("fdatasync") else 0
    pool = ThreadPoolExecutor(max_workers=threads) if threads else None
    def sync_all(fds):
        if pool:
            chunks = [fds[i::threads] for i in range(threads)]
            list(pool.map(lambda chunk: [os.fdatasync(fd) for fd in chunk], chunks))
        else:
            syncfs(dirfd)
    walls, cpus = [], []
    for _ in range(ticks):
        for fds, off in zip(streams, offsets):
            os.pwrite(fds[0], audio, off[0]); off[0] += len(audio)
            os.pwrite(fds[1], journal_record, off[1]); off[1] += len(journal_record)
        started, cpu = time.monotonic(), time.process_time()
        sync_all([fd for fds in streams for fd in fds[:2]])
        for fds, off in zip(streams, offsets):
            os.pwrite(fds[2], position_record, off[2]); off[2] += len(position_record)
        sync_all([fds[2] for fds in streams])
        walls.append(time.monotonic() - started)
        cpus.append(time.process_time() - cpu)
        time.sleep(0.2)
    for fds in streams:
        for fd in fds: os.close(fd)
    os.close(dirfd)
    if pool: pool.shutdown()
    shutil.rmtree(folder, ignore_errors=True)
    return sum(walls) / len(walls), max(walls), sum(cpus) / len(cpus)

def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    folder, counts = sys.argv[1], [int(c) for c in sys.argv[2].split(",")]
    ticks = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"{'files':>6} {'strategy':<13} {'round ms mean':>14} {'round ms max':>13} {'cpu ms/round':>13}")
    for count in counts:
        for strategy in ("fdatasync-1", "fdatasync-2", "fdatasync-8", "fdatasync-32", "syncfs"):
            mean, worst, cpu = run(folder, count, strategy, ticks)
            print(f"{count:>6} {strategy:<13} {mean * 1000:>14.1f} {worst * 1000:>13.1f} {cpu * 1000:>13.1f}", flush=True)

main()
