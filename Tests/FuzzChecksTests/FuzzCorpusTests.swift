import CAF
import CaptureCodecs
import CaptureCore
import CaptureReceiver
import CaptureSender
import CaptureWire
import Foundation
import FuzzChecks
import XCTest

/// The fuzz targets' seed corpora (Fuzz/corpus/TARGET) and the inputs of past findings
/// (Fuzz/regressions/TARGET) replayed through the same checks the fuzzers run, in every `make test`.
/// `FUZZ_WRITE_SEEDS=1` rewrites the seed corpora from the protocol vectors and from files our own
/// writers make (`swift test --filter FuzzCorpusTests`).
final class FuzzCorpusTests: XCTestCase {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")
    static let vectors = fuzz.deletingLastPathComponent().appendingPathComponent("proto/vectors")
    static let targets: [(name: String, check: @Sendable (Data) -> Void)] = [
        ("frames", FrameChecks.check), ("hello", HelloChecks.check), ("caf", CAFChecks.check), ("spool", SpoolChecks.check),
        ("export", ExportChecks.check),
    ]

    func testSeedsAndPastFindingsHoldEveryCheck() throws {
        for target in Self.targets {
            let seeds = FuzzReplay.inputs([Self.fuzz.appendingPathComponent("corpus/\(target.name)").path])
            XCTAssertGreaterThanOrEqual(seeds.count, 3, "target \(target.name) has a seed corpus")
            let found = FuzzReplay.inputs([Self.fuzz.appendingPathComponent("regressions/\(target.name)").path])
            for file in seeds + found {
                target.check(try Data(contentsOf: URL(fileURLWithPath: file)))
            }
        }
    }

    func testWriteSeedsWhenAsked() throws {
        guard ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] == "1" else {
            throw XCTSkip("set FUZZ_WRITE_SEEDS=1 to rewrite Fuzz/corpus")
        }
        let corpus = Self.fuzz.appendingPathComponent("corpus")
        try? FileManager.default.removeItem(at: corpus)
        for target in Self.targets { try FileManager.default.createDirectory(at: corpus.appendingPathComponent(target.name), withIntermediateDirectories: true) }
        func write(_ target: String, _ name: String, _ bytes: [UInt8]) throws {
            try Data(bytes).write(to: corpus.appendingPathComponent("\(target)/\(name)"))
        }
        // Frames: the preamble followed by every valid vector frame in the protocol's order, and each vector alone.
        let vectorFiles = try FileManager.default.contentsOfDirectory(atPath: Self.vectors.path).filter { $0.hasSuffix(".hex") }.sorted()
        var stream = try Self.hexBytes("preamble.hex")
        for file in vectorFiles where file.hasPrefix("frame-") && !file.contains("accepted") && !file.contains("ack") && !file.contains("error") {
            stream += try Self.hexBytes(file)
        }
        try write("frames", "conversation", stream)
        for file in vectorFiles {
            let bytes = try Self.hexBytes(file)
            try write("frames", file.replacingOccurrences(of: ".hex", with: ""), file.hasPrefix("frame-") || file.hasPrefix("invalid-frame") ? WirePreamble.bytes() + bytes : bytes)
            if file.hasPrefix("frame-01-hello") || file == "invalid-hello-bad-format.hex" {
                try write("hello", file.replacingOccurrences(of: ".hex", with: ""), Array(bytes.dropFirst(5)))
            }
        }
        var continuing = Capture_V1_Hello()
        continuing.protocolVersion = 1
        continuing.streamID = Data(repeating: 3, count: 16)
        continuing.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        continuing.resumeSecret = Data(repeating: 7, count: 32)
        continuing.resumeFromSequence = 501
        continuing.startSampleTime = 96_000
        continuing.continues = .with { $0.streamID = Data(repeating: 4, count: 16); $0.firstSequence = 501 }
        try write("hello", "continuation", Array(try continuing.serializedBytes() as Data))
        // CAF: finished PCM and Opus files, and unfinished ones with their journals, from our writer.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-seeds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        for (name, format, finished) in [
            ("pcm-finished", StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), true),
            ("pcm-unfinished", StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s24), false),
            ("opus-finished", StreamFormat.opus(channels: 2, framesPerPacket: 960), true),
            ("opus-unfinished", StreamFormat.opus(channels: 1, framesPerPacket: 960), false),
        ] {
            let path = scratch.appendingPathComponent(name + ".caf").path
            let writer = try CAFWriter(path: path, format: format, info: [("title", name)], primingFrames: format.isVariableBitRate ? 312 : 0)
            try writer.addMarker(framePosition: 10, name: "gap: 10 frames not captured (overrun)")
            for packet in 0..<4 {
                if format.isVariableBitRate {
                    let sizes: [UInt32] = [UInt32(20 + packet), 31]
                    try writer.append((0..<Int(sizes.reduce(0, +))).map { UInt8(truncatingIfNeeded: $0 * 7 + packet) }, packetSizes: sizes, frameCount: 1_920)
                } else {
                    let frames = 16
                    try writer.append((0..<(frames * Int(format.bytesPerFrame))).map { UInt8(truncatingIfNeeded: $0 * 13 + packet) }, frameCount: frames)
                }
            }
            try writer.synchronize()
            if finished { try writer.finalize() } else { writer.close() }
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            if let journal = FileManager.default.contents(atPath: path + ".pakt-journal") {
                bytes += Array("\nJRNL\n".utf8) + Array(journal)
            }
            try write("caf", name, bytes)
        }
        // Export: finished recordings as the receiver writes them (its info entries, gap markers, a
        // channel mask), PCM of each sample format and real Opus packets, mono and 6-channel.
        try writeExportSeeds(into: scratch) { name, bytes in try write("export", name, bytes) }
        // Spool and position log: a spool segment our writer made (first byte of the input picks
        // where the segment ends and the position log begins), with a position log after it.
        let root = scratch.appendingPathComponent("spool").path
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: SpoolMeta(
            streamID: id, streamName: "seed", destination: SpoolDestination(address: "127.0.0.1:7373"),
            description: StreamDescription(format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 0)),
            resumeSecret: Array(repeating: 1, count: 32)))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        for index in 0..<6 {
            _ = log.append(EncodedPackets(payload: (0..<64).map { UInt8(truncatingIfNeeded: $0 + index) }, packetCount: 16, packetSizes: [], firstSampleTime: Int64(index * 16), frameCount: 16))
        }
        _ = log.appendGap(sampleTime: 96, length: 48, reason: "overrun")
        log.finish(StreamEnd(endSampleTime: 144, remainderFrames: 0, reason: "duration"))
        log.flushSpool()
        let folder = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let segmentName = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasPrefix("seg-") })
        let segment = Array(try Data(contentsOf: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(segmentName))))
        spool.release()
        let cafPath = scratch.appendingPathComponent("positions.caf").path
        let positions = try StreamPositionLog.createForNewFile(cafPath: cafPath, initial: StreamPositionRecord(sequence: 0, sampleTime: 0, packets: 0))
        for sequence in 1...5 { try positions.append(StreamPositionRecord(sequence: UInt64(sequence), sampleTime: Int64(sequence * 960), packets: Int64(sequence * 960))) }
        let logBytes = Array(try Data(contentsOf: URL(fileURLWithPath: StreamPositionLog.path(for: cafPath))))
        for (name, share) in [("segment-and-log", 0.5), ("mostly-segment", 0.9), ("mostly-log", 0.1)] {
            // SpoolChecks splits at first byte × count / 256: choose the first byte so the split falls between the two.
            let total = segment.count + logBytes.count + 1
            var input = [UInt8(min(255, Int((Double(segment.count + 1) / Double(total) * 256).rounded(.up))))] + segment + logBytes
            if share != 0.5 { input[0] = UInt8(share * 255) }
            try write("spool", name, input)
        }
    }

    private func writeExportSeeds(into scratch: URL, _ write: (String, [UInt8]) throws -> Void) throws {
        let info: [(key: String, value: String)] = [
            ("title", "field-a"), ("stream id", "6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b"), ("source host", "unit-7"),
            ("clock synchronized", "yes"), ("first sample time", "2026-11-24T10:00:01.500Z"), ("first valid sample", "72000"),
        ]
        for (name, sample, channels, bitmap, finished) in [
            ("pcm-s16-stereo", PCMSampleFormat.s16, 2, UInt32(0), true), ("pcm-s24-surround", .s24, 6, UInt32(0x3F), true),
            ("pcm-s32-mono", .s32, 1, UInt32(0), true), ("pcm-f32-unfinished", .f32, 2, UInt32(0), false),
        ] {
            let path = scratch.appendingPathComponent("\(name).caf").path
            let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: channels, sample: sample)
            let writer = try CAFWriter(path: path, format: format, channelLayoutTag: bitmap == 0 ? nil : 0x10000, channelBitmap: bitmap, info: info)
            let frames = 24
            try writer.append((0..<(frames * Int(format.bytesPerFrame))).map { UInt8(truncatingIfNeeded: $0 &* 37) }, frameCount: frames)
            try writer.addMarker(framePosition: 4, name: "gap: 480 frames not captured (overrun)")
            try writer.addMarker(framePosition: 20, name: "gap: 960 frames not captured (device-lost)")
            if finished { try writer.finalize() } else { try writer.synchronize(); writer.close() }
            try write(name, Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        for channels in [1, 6] {
            let encoder = try OpusEncoder(
                inputFormat: .linearPCM(sampleRate: 48_000, channels: channels, sample: .f32),
                settings: OpusEncoderSettings(bitrate: 6_000 * channels, frameDuration: .ms20))
            let frames = 2_880
            let samples = (0..<(frames * channels)).map { Float(sin(Double($0 / channels) * 0.06 + Double($0 % channels))) * 0.5 }
            var payload: [UInt8] = []
            var sizes: [UInt32] = []
            try samples.withUnsafeBytes { raw in
                if let packets = try encoder.encode(CapturedBuffer(bytes: raw, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: frames)) {
                    payload += packets.payload
                    sizes += packets.packetSizes
                }
            }
            let tail = try encoder.finish()
            if let packets = tail.packets {
                payload += packets.payload
                sizes += packets.packetSizes
            }
            let name = "opus-\(channels)ch"
            let path = scratch.appendingPathComponent("\(name).caf").path
            let writer = try CAFWriter(
                path: path, format: .opus(channels: channels, framesPerPacket: 960), info: info,
                magicCookie: channels > 2 ? encoder.magicCookie : [], primingFrames: encoder.primingFrames)
            try writer.append(payload, packetSizes: sizes, frameCount: sizes.count * 960)
            try writer.addMarker(framePosition: 312 + 960, name: "gap: 960 frames not captured (overrun)")
            try writer.finalize(remainderFrames: tail.remainderFrames)
            try write(name, Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        }
    }

    /// The bytes of a protocol vector file (hex digits; `#` comments).
    static func hexBytes(_ file: String) throws -> [UInt8] {
        let text = try String(contentsOf: vectors.appendingPathComponent(file), encoding: .utf8)
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.flatMap { $0.split(separator: " ") }.compactMap { UInt8($0, radix: 16) }
    }
}
