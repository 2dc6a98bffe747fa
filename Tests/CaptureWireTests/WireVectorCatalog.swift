import CaptureCore
import CaptureWire
import Foundation
import TestSupport

/// Every file in proto/vectors and what it must decode to.
struct WireVector {
    enum Content {
        /// The connection preamble, version 1.
        case preamble
        /// A valid frame carrying this message.
        case frame(WireMessage)
        /// Bytes a decoder in `role` must refuse with `error`.
        case invalid(bytes: [UInt8], role: WireRole, error: WireError)
        /// A frame that decodes to `message`, which the receiver's state machine refuses with `error`.
        case refusedByReceiver(WireMessage, error: WireError)
    }

    let file: String
    let comments: [String]
    let content: Content
}

enum WireVectorCatalog {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/vectors")
    static let protoFile = folder.deletingLastPathComponent().appendingPathComponent("capture.proto")

    static let all: [WireVector] = valid + invalid

    static let markersAccepted: Capture_V1_HelloAccepted = {
        var accepted = WireFixtures.helloAccepted()
        accepted.acceptedFrameTypes = [10, 11]
        return accepted
    }()

    static let valid: [WireVector] = [
        WireVector(
            file: "preamble.hex",
            comments: ["Connection preamble, sender -> receiver: \"CAPSTRM\" and protocol version 1."],
            content: .preamble),
        WireVector(
            file: "frame-01-hello.hex",
            comments: [
                "Hello (type 1): protocol 1, stream 6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b \"studio-a\", PCM s16 48000 Hz",
                "2 ch (flags 0x0C signed|packed, 4 bytes/frame), start 2026-01-01T00:00:00Z, sample 0, new stream,",
                "host \"field-recorder-1\", application \"capture-send 0.1.0\". No auth token, no cookie.",
            ],
            content: .frame(.hello(WireFixtures.hello()))),
        WireVector(
            file: "frame-01-hello-resume.hex",
            comments: [
                "Hello (type 1) after a reconnect: as frame-01-hello.hex, with resume_from_sequence 42",
                "(the oldest sequence the sender still holds).",
            ],
            content: .frame(.hello(WireFixtures.hello(resumeFrom: 42)))),
        WireVector(
            file: "frame-01-hello-continuation.hex",
            comments: [
                "Hello (type 1) of a stream that continues another the receiver no longer resumes (PROTOCOL.md §8.1):",
                "stream_id 0A0B0C0D-..., resume_from_sequence 501 (field 9), start_sample_time 96000 (field 8) at",
                "2026-01-01T00:00:02Z, resume_secret (field 13) the 32 bytes 00..1F, which prove that it owns the stream",
                "it continues, and continues (field 14) { stream_id 6F1C2A9E-... (frame-01-hello.hex's), first_sequence 501 }.",
            ],
            content: .frame(.hello(continuationHello))),
        WireVector(
            file: "frame-01-hello-surround.hex",
            comments: [
                "Hello (type 1) of a 5.1 stream: as frame-01-hello.hex with 6 channels (12 bytes/frame),",
                "clock CLOCK_STATE_SYNCHRONIZED (field 15 = 1) and channel_layout (field 16) tag 0x10000",
                "(use channel bitmap) with bitmap 0x3F (FL FR FC LFE BL BR).",
            ],
            content: .frame(.hello(surroundHello))),
        WireVector(
            file: "frame-02-hello-accepted.hex",
            comments: [
                "HelloAccepted (type 2): next_sequence 1, next_sample_time 0, heartbeat 5000 ms,",
                "max frame 1114112 bytes, file \"studio-a/20260101T000000Z-studio-a.caf\", not resumed.",
            ],
            content: .frame(.helloAccepted(WireFixtures.helloAccepted()))),
        WireVector(
            file: "frame-02-hello-accepted-markers.hex",
            comments: [
                "HelloAccepted (type 2) of a receiver that accepts markers and filled gaps: as frame-02-hello-accepted.hex,",
                "with accepted_frame_types (field 8, packed) [10, 11]: the sender may send Marker and FilledGap frames",
                "(PROTOCOL.md §12).",
            ],
            content: .frame(.helloAccepted(markersAccepted))),
        WireVector(
            file: "frame-03-audio-data-pcm.hex",
            comments: [
                "AudioData (type 3), PCM s16 stereo: sequence 1, first sample 0, 4 packets (= frames),",
                "payload 16 bytes little-endian (0,0) (1000,-1000) (2000,-2000) (32767,-32768), frame_count 4.",
            ],
            content: .frame(.audioData(WireFixtures.pcmAudio()))),
        WireVector(
            file: "frame-03-audio-data-pcm-levels.hex",
            comments: [
                "AudioData (type 3), PCM s16 stereo, as frame-03-audio-data-pcm.hex with levels (field 7):",
                "peak 0, 0 and RMS 600, 600 hundredths of a dB below full scale (0 dBFS peak, -6.00 dBFS RMS).",
            ],
            content: .frame(.audioData(WireFixtures.pcmAudioWithLevels()))),
        WireVector(
            file: "frame-03-audio-data-bad-levels.hex",
            comments: [
                "AudioData (type 3), PCM s16 stereo, as frame-03-audio-data-pcm.hex with levels for one channel",
                "only (peak 1200, RMS 1500): a valid frame; the receiver records the audio and ignores the levels.",
            ],
            content: .frame(.audioData(WireFixtures.pcmAudioWithBadLevels()))),
        WireVector(
            file: "frame-03-audio-data-vbr.hex",
            comments: [
                "AudioData (type 3), VBR (Opus, 960 frames/packet): sequence 7, first sample 17280, 3 packets",
                "of 5, 3 and 4 bytes (packet_sizes, packed), payload 12 bytes, frame_count 2880.",
            ],
            content: .frame(.audioData(WireFixtures.vbrAudio()))),
        WireVector(
            file: "frame-04-gap.hex",
            comments: ["Gap (type 4): sequence 2, sample_time 4, 480 frames lost, reason \"overrun\"."],
            content: .frame(.gap(WireFixtures.gap()))),
        WireVector(
            file: "frame-10-marker.hex",
            comments: [
                "Marker (type 10): sequence 3, sample_time 484 (where the Gap of frame-04-gap.hex ended: a marker",
                "covers no frames), label \"interview starts\". Sent only to a receiver whose HelloAccepted lists 10.",
            ],
            content: .frame(.marker(WireFixtures.marker()))),
        WireVector(
            file: "frame-11-filled-gap.hex",
            comments: [
                "FilledGap (type 11): sequence 8, sample_time 18000, 1920 frames, reason \"paused\": after the AudioData of",
                "frame-03-audio-data-vbr.hex (sequence 7, frames 17280..<20160), it labels frames those packets carry as",
                "encoded silence; it covers no frames itself. Sent only to a receiver whose HelloAccepted lists 11.",
            ],
            content: .frame(.filledGap(WireFixtures.filledGap()))),
        WireVector(
            file: "frame-05-ack.hex",
            comments: ["Ack (type 5): durable through sequence 2, durable sample time 484."],
            content: .frame(.ack(WireFixtures.ack(2, sampleTime: 484)))),
        WireVector(
            file: "frame-06-heartbeat.hex",
            comments: ["Heartbeat (type 6): sent_unix_ns 2026-01-01T00:00:05Z."],
            content: .frame(.heartbeat(WireFixtures.heartbeat()))),
        WireVector(
            file: "frame-06-heartbeat-empty.hex",
            comments: ["Heartbeat (type 6) with every field at its default: length 1, empty body (the smallest frame)."],
            content: .frame(.heartbeat(Capture_V1_Heartbeat()))),
        WireVector(
            file: "frame-07-end-of-stream.hex",
            comments: ["EndOfStream (type 7): last_sequence 3, end_sample_time 488, no remainder, reason \"duration\"."],
            content: .frame(.endOfStream(WireFixtures.endOfStream()))),
        WireVector(
            file: "frame-08-end-accepted.hex",
            comments: ["EndAccepted (type 8): file \"studio-a/20260101T000000Z-studio-a.caf\", 488 frames, 8 packets, for the EndOfStream of last_sequence 3 and end_sample_time 488."],
            content: .frame(.endAccepted(WireFixtures.endAccepted()))),
        WireVector(
            file: "frame-09-error.hex",
            comments: ["Error (type 9): code SEQUENCE_GAP (9), fatal, with the receiver's message."],
            content: .frame(.error(WireFixtures.error()))),
    ]

    static let invalid: [WireVector] = [
        WireVector(
            file: "invalid-preamble-garbage.hex",
            comments: ["Invalid preamble \"GARBAGE!\": MALFORMED_FRAME, the receiver closes (no Error frame)."],
            content: .invalid(bytes: Array("GARBAGE!".utf8), role: .receiver,
                              error: .badPreamble(received: Array("GARBAGE!".utf8)))),
        WireVector(
            file: "invalid-preamble-tls-client-hello.hex",
            comments: [
                "A TLS 1.2/1.3 ClientHello record start on a plaintext port: \"the client speaks TLS\" (MALFORMED_FRAME).",
            ],
            content: .invalid(
                bytes: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03, 0x5A, 0x1B, 0x7E, 0x22, 0x90],
                role: .receiver, error: .clientSpeaksTLS)),
        WireVector(
            file: "invalid-preamble-http-get.hex",
            comments: ["An HTTP request \"GET / HTTP/1.1\\r\\n\": MALFORMED_FRAME naming HTTP GET."],
            content: .invalid(bytes: Array("GET / HTTP/1.1\r\n".utf8), role: .receiver,
                              error: .clientSpeaksHTTP(method: "GET"))),
        WireVector(
            file: "invalid-preamble-version-2.hex",
            comments: ["Preamble of protocol version 2: UNSUPPORTED_VERSION naming versions 2 and 1."],
            content: .invalid(bytes: Array("CAPSTRM".utf8) + [2], role: .receiver,
                              error: .unsupportedVersion(received: 2, supported: 1))),
        WireVector(
            file: "invalid-frame-zero-length.hex",
            comments: ["Frame with length 0 (a frame has at least its type byte): MALFORMED_FRAME."],
            content: .invalid(bytes: [0x00, 0x00, 0x00, 0x00, 0x06], role: .sender, error: .zeroLengthFrame)),
        WireVector(
            file: "invalid-frame-oversize-length.hex",
            comments: [
                "Frame header announcing 2147483647 bytes, no body: FRAME_TOO_LARGE (limit 1114112),",
                "refused from the length field alone.",
            ],
            content: .invalid(bytes: [0x7F, 0xFF, 0xFF, 0xFF, 0x03], role: .sender,
                              error: .frameTooLarge(length: 0x7FFF_FFFF, limit: WireProtocol.defaultMaxFrameBytes))),
        WireVector(
            file: "invalid-frame-unknown-type.hex",
            comments: ["Frame of length 1 with type 42: MALFORMED_FRAME naming type 42."],
            content: .invalid(bytes: [0x00, 0x00, 0x00, 0x01, 0x2A], role: .sender, error: .unknownFrameType(42))),
        WireVector(
            file: "invalid-frame-truncated-body.hex",
            comments: [
                "The first 15 bytes of frame-03-audio-data-pcm.hex (length 25 announced, 10 body bytes arrived),",
                "then the connection closed: the decoder waits for more; at end of input MALFORMED_FRAME",
                "(truncated, 15 of 29 bytes).",
            ],
            content: .invalid(
                bytes: [0x00, 0x00, 0x00, 0x19, 0x03, 0x08, 0x01, 0x18, 0x04, 0x2A, 0x10, 0x00, 0x00, 0xE8, 0x03],
                role: .sender, error: .truncatedFrame(receivedBytes: 15, expectedBytes: 29))),
        WireVector(
            file: "invalid-frame-undecodable-body.hex",
            comments: [
                "AudioData frame whose body claims a 16-byte payload field but holds 2 bytes: not valid",
                "protobuf, MALFORMED_FRAME (undecodable AudioData).",
            ],
            content: .invalid(bytes: [0x00, 0x00, 0x00, 0x05, 0x03, 0x2A, 0x10, 0x01, 0x02], role: .sender,
                              error: .undecodableBody(type: .audioData, byteCount: 4, reason: "truncated"))),
        WireVector(
            file: "invalid-hello-bad-format.hex",
            comments: [
                "A well-formed Hello whose PCM format has sample rate 1000 Hz: the receiver refuses it with",
                "BAD_FORMAT and the StreamFormatError text.",
            ],
            content: .refusedByReceiver(
                .hello(badFormatHello), error: .badFormat(.sampleRateOutOfRange(1000)))),
    ]


    static var surroundHello: Capture_V1_Hello {
        var hello = WireFixtures.hello()
        hello.format.channelsPerFrame = 6
        hello.format.bytesPerFrame = 12
        hello.format.bytesPerPacket = 12
        hello.clock = .synchronized
        hello.channelLayout = .with {
            $0.tag = 0x10000
            $0.bitmap = 0x3F
        }
        return hello
    }
    static var continuationHello: Capture_V1_Hello {
        var hello = WireFixtures.hello()
        hello.streamID = Data([0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x40, 0x11, 0x82, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19])
        hello.startTimeUnixNs = WireFixtures.startUnixNs + 2_000_000_000
        hello.startSampleTime = 96_000
        hello.resumeFromSequence = 501
        hello.resumeSecret = Data(0..<32)
        hello.continues = .with {
            $0.streamID = WireFixtures.streamID.wireBytes
            $0.firstSequence = 501
        }
        return hello
    }
    static var badFormatHello: Capture_V1_Hello {
        var hello = WireFixtures.hello()
        hello.format.sampleRate = 1000
        return hello
    }

    /// The bytes a vector file must hold.
    static func expectedBytes(_ vector: WireVector) throws -> [UInt8] {
        switch vector.content {
        case .preamble: return WirePreamble.bytes()
        case .frame(let message), .refusedByReceiver(let message, _): return try message.encode()
        case .invalid(let bytes, _, _): return bytes
        }
    }

    static func load(_ vector: WireVector) throws -> [UInt8] {
        let text = try String(contentsOf: folder.appendingPathComponent(vector.file), encoding: .utf8)
        return try WireHexFile.parse(text)
    }
}
