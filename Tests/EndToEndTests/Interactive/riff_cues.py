#!/usr/bin/env python3
"""Prints the cue points of a WAV or RF64 file with their labels as JSON, read straight from the
RIFF chunks (`cue ` and `LIST`/`adtl`/`labl`), without the project's code or libsndfile.

Usage: riff_cues.py FILE.wav
Output: [{"position": N, "label": "..."}, ...] in the order of the `cue ` chunk.
"""
import json
import os
import struct
import sys


def cues(path):
    end = os.path.getsize(path)
    points, labels, ds64 = [], {}, None
    with open(path, "rb") as riff:
        if riff.read(12)[8:12] != b"WAVE":
            sys.exit("not a WAV or RF64 file")
        position = 12
        while position + 8 <= end:
            riff.seek(position)
            header = riff.read(8)
            kind, size = header[:4], struct.unpack("<I", header[4:8])[0]
            if kind == b"data" and ds64 is not None and size == 0xFFFFFFFF:
                size = ds64
            body = riff.read(size) if kind != b"data" else b""
            if kind == b"ds64":
                ds64 = struct.unpack("<QQQ", body[:24])[1]
            elif kind == b"cue ":
                count = struct.unpack("<I", body[:4])[0]
                for index in range(count):
                    ident, place, _, _, _, _ = struct.unpack("<II4sIII", body[4 + 24 * index:28 + 24 * index])
                    points.append((ident, place))
            elif kind == b"LIST" and body[:4] == b"adtl":
                offset = 4
                while offset + 8 <= len(body):
                    sub, length = body[offset:offset + 4], struct.unpack("<I", body[offset + 4:offset + 8])[0]
                    if sub == b"labl":
                        ident = struct.unpack("<I", body[offset + 8:offset + 12])[0]
                        labels[ident] = body[offset + 12:offset + 8 + length].rstrip(b"\0").decode("utf-8")
                    offset += 8 + length + (length & 1)
            position += 8 + size + (size & 1)
    return [{"position": place, "label": labels.get(ident)} for ident, place in points]


if __name__ == "__main__":
    print(json.dumps(cues(sys.argv[1]), ensure_ascii=False))
