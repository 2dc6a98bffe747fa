#!/usr/bin/env python3
"""Prints the markers of a CAF file as JSON, read straight from its chunks (Apple's Core Audio
Format Specification: `mark` and `strg`), without the project's own parser.

Usage: caf_markers.py FILE.caf
Output: [{"frame": N, "name": "..."}, ...] in the order of the `mark` chunk.
"""
import json
import struct
import sys


def chunks(data):
    if data[:4] != b"caff":
        sys.exit("not a CAF file")
    position = 8
    found = {}
    while position + 12 <= len(data):
        kind = data[position:position + 4].decode("latin-1")
        size = struct.unpack(">q", data[position + 4:position + 12])[0]
        if size < 0:  # an unfinished file's data chunk runs to the end
            found[kind] = data[position + 12:]
            break
        found[kind] = data[position + 12:position + 12 + size]
        position += 12 + size
    return found


def markers(path):
    with open(path, "rb") as caf:
        found = chunks(caf.read())
    strings = {}
    if "strg" in found:
        body = found["strg"]
        count = struct.unpack(">I", body[:4])[0]
        base = 4 + 12 * count
        for index in range(count):
            string_id, offset = struct.unpack(">Iq", body[4 + 12 * index:16 + 12 * index])
            end = body.index(b"\0", base + offset)
            strings[string_id] = body[base + offset:end].decode("utf-8")
    result = []
    if "mark" in found:
        body = found["mark"]
        count = struct.unpack(">I", body[4:8])[0]
        for index in range(count):
            _, frame, string_id = struct.unpack(">IdI", body[8 + 28 * index:24 + 28 * index])
            result.append({"frame": int(frame), "name": strings.get(string_id)})
    return result


if __name__ == "__main__":
    print(json.dumps(markers(sys.argv[1]), ensure_ascii=False))
