#!/usr/bin/env python3
"""Hostile Hellos for the soak (issue 27, item 1): the first frames an attacker could send a receiver
without audio or a token. Each is sent on a connection of its own; the receiver must answer it (an
Error frame, or HelloAccepted for a Hello that is merely odd) or close, and go on recording every
other stream. The protobuf messages are encoded by hand (proto/capture.proto), so the soak needs
no protobuf package.

usage as a program: hostile.py PORT     sends each Hello once and prints what the receiver answered
"""
import os, socket, struct, sys, uuid

PREAMBLE = b"CAPSTRM\x01"
ERROR_CODES = {1: "MALFORMED_FRAME", 2: "FRAME_TOO_LARGE", 3: "UNSUPPORTED_VERSION", 4: "BAD_FORMAT", 5: "UNEXPECTED_MESSAGE",
               6: "AUTHENTICATION_FAILED", 7: "TOO_MANY_STREAMS", 8: "TIMEOUT", 9: "SEQUENCE_GAP", 10: "STORAGE_FAILED",
               11: "SHUTTING_DOWN", 12: "STREAM_BUSY", 13: "INTERNAL", 14: "INVALID_MESSAGE", 15: "RATE_LIMITED",
               16: "NOT_STREAM_OWNER"}


def varint(value):
    value &= (1 << 64) - 1  # int64 fields: two's complement, ten bytes for a negative value
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, data):
    return varint((number << 3) | 2) + varint(len(data)) + data


def field_double(number, value):
    return varint((number << 3) | 1) + struct.pack("<d", value)


def pcm_format(rate=48000.0, channels=2):
    return (field_double(1, rate) + field_varint(2, 0x6C70636D) + field_varint(3, 12) + field_varint(4, 2 * channels)
            + field_varint(5, 1) + field_varint(6, 2 * channels) + field_varint(7, channels) + field_varint(8, 16))


def hello(name, start_time_ns=1_700_000_000_000_000_000, start_sample_time=0, continues=None, stream_id=None):
    body = (field_varint(1, 1) + field_bytes(2, (stream_id or uuid.uuid4()).bytes) + field_bytes(3, name.encode())
            + field_bytes(5, pcm_format()) + field_varint(7, start_time_ns) + field_varint(8, start_sample_time)
            + field_bytes(10, b"hostile") + field_bytes(11, b"soak hostile.py") + field_bytes(13, os.urandom(32)))
    if continues is not None:
        body += field_bytes(14, field_bytes(1, continues.bytes) + field_varint(2, 1))
    return struct.pack(">IB", len(body) + 1, 1) + body


def cases(victim=None):
    """(label, frame) pairs: the Hellos that crashed the receiver before issue 27, and a forged
    continuation of `victim` (a UUID) when one is given."""
    result = [
        ("start_time_unix_ns = 2^63-1", hello("hostile-max-time", start_time_ns=2**63 - 1)),
        ("start_time_unix_ns = -2^63", hello("hostile-min-time", start_time_ns=-2**63)),
        ("start_sample_time = 2^63-1", hello("hostile-max-sample", start_sample_time=2**63 - 1)),
        ("start_sample_time = -2^63", hello("hostile-min-sample", start_sample_time=-2**63)),
    ]
    if victim is not None:
        result.append(("continuation without the resume secret", hello("hostile-continuation", continues=victim)))
    return result


def read_exact(connection, count):
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def parse_error(body):
    code, message, index = 0, "", 0
    while index < len(body):
        key, shift = 0, 0
        while True:
            byte = body[index]; index += 1
            key |= (byte & 0x7F) << shift; shift += 7
            if byte < 0x80:
                break
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, shift = 0, 0
            while True:
                byte = body[index]; index += 1
                value |= (byte & 0x7F) << shift; shift += 7
                if byte < 0x80:
                    break
            if number == 1:
                code = value
        elif wire == 2:
            length, shift = 0, 0
            while True:
                byte = body[index]; index += 1
                length |= (byte & 0x7F) << shift; shift += 7
                if byte < 0x80:
                    break
            if number == 2:
                message = body[index:index + length].decode("utf-8", "replace")
            index += length
        else:
            break
    return code, message


def send(port, frame, host="127.0.0.1", timeout=10):
    """Sends the preamble and `frame` and returns what the receiver answered: 'accepted',
    'error CODE: message', or 'closed'."""
    with socket.create_connection((host, port), timeout) as connection:
        connection.sendall(PREAMBLE + frame)
        header = read_exact(connection, 5)
        if header is None:
            return "closed"
        length, kind = struct.unpack(">IB", header)
        body = read_exact(connection, length - 1) or b""
        if kind == 2:
            return "accepted"
        if kind == 9:
            code, message = parse_error(body)
            return f"error {ERROR_CODES.get(code, code)}: {message}"
        return f"frame type {kind}"


if __name__ == "__main__":
    port = int(sys.argv[1])
    for label, frame in cases(uuid.uuid4()):
        print(f"{label}: {send(port, frame)}")
