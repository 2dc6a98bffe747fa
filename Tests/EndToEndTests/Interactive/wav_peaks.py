#!/usr/bin/env python3
"""Prints the largest absolute sample of each frame range of a PCM WAV file (16 or 24 bits, any
channel count, plain or WAVE_FORMAT_EXTENSIBLE) as JSON, read straight from its `fmt ` and `data`
chunks, without the project's code or libsndfile.

Usage: wav_peaks.py FILE.wav START:END [START:END ...]   (frame indexes, END excluded)
Output: {"frames": N, "peaks": [P, ...]} with one peak per range (0 for an empty range).
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as riff:
        data = riff.read()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        sys.exit("not a RIFF WAVE file")
    position, fmt, samples = 12, None, None
    while position + 8 <= len(data):
        kind, size = data[position:position + 4], struct.unpack("<I", data[position + 4:position + 8])[0]
        body = data[position + 8:position + 8 + size]
        if kind == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
        elif kind == b"data":
            samples = body
        position += 8 + size + (size & 1)
    if fmt is None or samples is None:
        sys.exit("no fmt or data chunk")
    channels, width = fmt[1], fmt[5] // 8
    if width not in (2, 3):
        sys.exit("only 16- and 24-bit PCM is read")
    return samples, channels, width


def main():
    samples, channels, width = read(sys.argv[1])
    frames = len(samples) // (channels * width)
    peaks = []
    for spec in sys.argv[2:]:
        start, end = (int(part) for part in spec.split(":"))
        start, end = max(0, start), min(frames, end)
        peak = 0
        for offset in range(start * channels * width, max(start, end) * channels * width, width):
            peak = max(peak, abs(int.from_bytes(samples[offset:offset + width], "little", signed=True)))
        peaks.append(peak)
    print(json.dumps({"frames": frames, "peaks": peaks}))


main()
