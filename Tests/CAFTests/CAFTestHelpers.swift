import CAF
import COpus
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// A scratch directory removed when the test ends.
final class ScratchDirectory {
    let path: String

    init() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("caf-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        path = url.path
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Deterministic test signals: full-scale pseudo-random samples with the extremes included, so that any
/// byte-order, width or scaling mistake changes some sample.
enum TestSignal {
    /// A little-endian integer PCM buffer of `frames` frames and the samples it holds.
    static func integerPCM(bits: Int, channels: Int, frames: Int, seed: UInt64) -> (bytes: [UInt8], samples: [Int32]) {
        var generator = SplitMix64(seed: seed)
        let maximum = Int64(1) << (bits - 1)
        var samples: [Int32] = []
        var bytes: [UInt8] = []
        for index in 0..<(frames * channels) {
            let value: Int64
            switch index {
            case 0: value = -maximum
            case 1: value = maximum - 1
            case 2: value = 0
            case 3: value = -1
            default: value = Int64(bitPattern: generator.next() % UInt64(2 * maximum)) - maximum
            }
            samples.append(Int32(value))
            for byte in 0..<(bits / 8) { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * byte))) }
        }
        return (bytes, samples)
    }

    /// A little-endian 32-bit float PCM buffer in -1...1 and the samples it holds.
    static func floatPCM(channels: Int, frames: Int, seed: UInt64) -> (bytes: [UInt8], samples: [Float]) {
        var generator = SplitMix64(seed: seed)
        var samples: [Float] = []
        var bytes: [UInt8] = []
        for index in 0..<(frames * channels) {
            let value: Float
            switch index {
            case 0: value = -1
            case 1: value = 1
            case 2: value = 0
            default: value = Float(Int64(generator.next() % 2_000_001) - 1_000_000) / 1_000_000
            }
            samples.append(value)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return (bytes, samples)
    }
}


/// Real Opus packets from libopus.
struct OpusPackets {
    var packets: [[UInt8]]
    /// The encoder's lookahead: the priming frames of the stream.
    var lookahead: Int
    var channels: Int
    var framesPerPacket: Int

    var sizes: [UInt32] { packets.map { UInt32($0.count) } }
    var joined: [UInt8] { packets.flatMap { $0 } }

    /// The 19-byte OpusHead (RFC 7845) for this stream: what an Ogg Opus file carries as its header.
    var opusHead: [UInt8] {
        var head = Array("OpusHead".utf8)
        head.append(1)
        head.append(UInt8(channels))
        head.append(UInt8(lookahead & 0xFF))
        head.append(UInt8(lookahead >> 8))
        head += [0x80, 0xBB, 0x00, 0x00]  // 48000 Hz, little-endian
        head += [0, 0, 0]  // output gain 0, channel mapping family 0
        return head
    }

    /// Encodes `count` packets of a tone with libopus at 48 kHz.
    static func make(count: Int, channels: Int, framesPerPacket: Int = 960) throws -> OpusPackets {
        var error: Int32 = 0
        guard let encoder = opus_encoder_create(48_000, Int32(channels), OPUS_APPLICATION_AUDIO, &error), error == OPUS_OK else {
            throw XCTSkip("libopus could not create an encoder (error \(error))")
        }
        defer { opus_encoder_destroy(encoder) }
        XCTAssertEqual(capture_opus_set_int(encoder, OPUS_SET_BITRATE_REQUEST, 64_000), OPUS_OK)
        var lookahead: Int32 = 0
        XCTAssertEqual(capture_opus_get_int(encoder, OPUS_GET_LOOKAHEAD_REQUEST, &lookahead), OPUS_OK)
        var packets: [[UInt8]] = []
        var pcm = [Float](repeating: 0, count: framesPerPacket * channels)
        var output = [UInt8](repeating: 0, count: 4000)
        for packet in 0..<count {
            for frame in 0..<framesPerPacket {
                let t = Double(packet * framesPerPacket + frame) / 48_000
                for channel in 0..<channels {
                    pcm[frame * channels + channel] = Float(0.4 * sin(2 * Double.pi * (440 + 110 * Double(channel)) * t))
                }
            }
            let length = opus_encode_float(encoder, pcm, Int32(framesPerPacket), &output, Int32(output.count))
            guard length > 0 else { throw XCTSkip("libopus failed to encode (error \(length))") }
            packets.append(Array(output[0..<Int(length)]))
        }
        return OpusPackets(packets: packets, lookahead: Int(lookahead), channels: channels, framesPerPacket: framesPerPacket)
    }
}

/// ffprobe and ffmpeg, as independent readers.
enum FFmpegTools {
    /// The first stream of `ffprobe -show_streams`, failing the test if ffprobe cannot read the file.
    static func probeStream(_ path: String, extraArguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let result = try ToolRunner.run("ffprobe", ["-v", "error"] + extraArguments + ["-show_streams", "-of", "json", path])
        XCTAssertTrue(result.succeeded, "ffprobe failed: \(result.errorText)", file: file, line: line)
        let streams = result.jsonObject?["streams"] as? [[String: Any]] ?? []
        XCTAssertEqual(streams.count, 1, "ffprobe output: \(result.outputText)", file: file, line: line)
        return streams.first ?? [:]
    }

    /// The sizes of the packets ffprobe finds in the file.
    static func packetSizes(_ path: String) throws -> [Int] {
        let result = try ToolRunner.run("ffprobe", ["-v", "error", "-show_packets", "-of", "json", path])
        XCTAssertTrue(result.succeeded, "ffprobe failed: \(result.errorText)")
        let packets = result.jsonObject?["packets"] as? [[String: Any]] ?? []
        return packets.compactMap { ($0["size"] as? String).flatMap { Int($0) } }
    }

    /// The audio decoded by ffmpeg as raw bytes of `rawFormat` (`s16le`, `s24le`, `s32le`, `f32le`).
    static func decode(_ path: String, rawFormat: String) throws -> ToolResult {
        try ToolRunner.run("ffmpeg", ["-v", "error", "-nostdin", "-i", path, "-f", rawFormat, "-"])
    }
}

/// Appends `bytes` to the end of a file, as a crash in the middle of a write would leave them.
func appendGarbage(_ bytes: [UInt8], to path: String) throws {
    let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: Data(bytes))
}

func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Asserts that `body` throws a `CAFError` that `matches` accepts.
func assertCAFError<T>(
    _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line,
    _ matches: (CAFError) -> Bool
) {
    do {
        _ = try body()
        XCTFail("expected a CAFError", file: file, line: line)
    } catch let error as CAFError {
        XCTAssertTrue(matches(error), "unexpected error: \(error)", file: file, line: line)
        XCTAssertFalse(error.description.isEmpty, file: file, line: line)
    } catch {
        XCTFail("expected a CAFError, got \(error)", file: file, line: line)
    }
}
