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
        ("spool-meta", SpoolMetaChecks.check),
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

    /// The `spool-meta` seeds are descriptions our writer makes, which the reader accepts; its
    /// regressions are the `meta.json` values of issue 27 item 9 that crashed `spool deliver`.
    func testTheMetaSeedsReadAndItsRegressionsAreRefusedByField() throws {
        let folder = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
        for file in FuzzReplay.inputs([Self.fuzz.appendingPathComponent("corpus/spool-meta").path]) {
            XCTAssertNoThrow(try SpoolMetaReader.read(try Data(contentsOf: URL(fileURLWithPath: file)), path: file, folderName: folder), file)
        }
        for (name, field) in [("sample-rate-zero", "sampleRate 0 "), ("start-time-1e300", "startTime 1e+300 "), ("start-time-minus-1e300", "startTime -1e+300 ")] {
            let file = Self.fuzz.appendingPathComponent("regressions/spool-meta/\(name)").path
            XCTAssertThrowsError(try SpoolMetaReader.read(try Data(contentsOf: URL(fileURLWithPath: file)), path: file, folderName: folder)) { error in
                XCTAssertEqual((error as? SpoolError)?.summary?.hasPrefix("meta.json: \(field)"), true, "\(error)")
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
        // Spool and position log (SpoolChecks): the first byte picks where the spool's bytes end
        // and the position log's begin; the spool's bytes are a flags byte, the acked file, and
        // for two segments where they split and the second one's name, then the segments as our
        // writer made them: whole, with a flipped bit, cut in two, PCM and Opus.
        let cafPath = scratch.appendingPathComponent("positions.caf").path
        let positions = try StreamPositionLog.createForNewFile(cafPath: cafPath, initial: StreamPositionRecord(position: .start, packets: 0))
        for sequence in 1...5 { try positions.append(StreamPositionRecord(position: StreamPosition(lastSequence: UInt64(sequence), endSampleTime: Int64(sequence * 960)), packets: Int64(sequence * 960))) }
        let logBytes = Array(try Data(contentsOf: URL(fileURLWithPath: StreamPositionLog.path(for: cafPath))))
        func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        func spoolInput(_ spool: [UInt8], log: [UInt8]) -> [UInt8] {
            // SpoolChecks splits at 1 + first byte × count / 256: pad the spool's part with zero
            // bytes (nothing to its scan) until a first byte puts the split exactly after it.
            var part = spool
            while true {
                let count = 1 + part.count + log.count
                let first = min(255, (part.count * 256 + count - 1) / count)
                let split = 1 + first * count / 256
                if split == 1 + part.count { return [UInt8(first)] + part + log }
                part.append(0)
            }
        }
        func spooled(opus: Bool, count: Int, end: Bool, acknowledged: UInt64) throws -> [UInt8] {
            let root = scratch.appendingPathComponent("spool-\(opus)-\(count)-\(end)").path
            let id = UUID()
            let format = opus ? StreamFormat.opus(channels: 2, framesPerPacket: 960) : .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
            let spool = try StreamSpool.create(root: root, meta: SpoolMeta(
                streamID: id, streamName: "seed", destination: SpoolDestination(address: "127.0.0.1:7373"),
                description: StreamDescription(format: format, magicCookie: [], primingFrames: opus ? 312 : 0, startTime: Date(timeIntervalSince1970: 0)),
                resumeSecret: Array(repeating: 1, count: 32)))
            let log = PacketLog(producerIsRealTime: true, spool: spool)
            for index in 0..<count {
                let packets = opus
                    ? EncodedPackets(payload: (0..<30).map { UInt8(truncatingIfNeeded: $0 + index) }, packetCount: 2, packetSizes: [10, 20], firstSampleTime: Int64(index * 1_920), frameCount: 1_920)
                    : EncodedPackets(payload: (0..<64).map { UInt8(truncatingIfNeeded: $0 + index) }, packetCount: 16, packetSizes: [], firstSampleTime: Int64(index * 16), frameCount: 16)
                _ = log.append(packets)
            }
            if !opus { _ = log.appendGap(sampleTime: Int64(count * 16), length: 48, reason: "overrun") }
            if end { log.finish(endSampleTime: opus ? Int64(count * 1_920) : Int64(count * 16 + 48), remainderFrames: 0, reason: "duration") }
            if acknowledged > 0 { log.acknowledge(through: acknowledged) }
            log.flushSpool()
            let folder = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
            let segmentName = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasPrefix("seg-") })
            spool.release()
            return Array(try Data(contentsOf: URL(fileURLWithPath: (folder as NSString).appendingPathComponent(segmentName))))
        }
        /// Offsets of the records of a segment (its layout, docs/DURABILITY.md).
        func recordOffsets(_ segment: [UInt8]) -> [Int] {
            var offsets: [Int] = []
            var offset = 0
            while offset + 12 <= segment.count {
                offsets.append(offset)
                offset += 12 + Int(segment[offset..<(offset + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            }
            return offsets
        }
        let pcm = try spooled(opus: false, count: 6, end: true, acknowledged: 2)
        let opus = try spooled(opus: true, count: 6, end: true, acknowledged: 0)
        let killed = try spooled(opus: false, count: 5, end: false, acknowledged: 0)
        var flippedMiddle = pcm
        flippedMiddle[recordOffsets(pcm)[3] + 50] ^= 0x10
        var flippedFirst = opus
        flippedFirst[40] ^= 0x01
        var flippedLast = killed
        flippedLast[recordOffsets(killed)[4] + 45] ^= 0x80
        let acked16 = be(UInt64(2)) + be(Int64(32))
        let cut = recordOffsets(opus)[3]
        try write("spool", "pcm-whole-acked", spoolInput([2] + acked16 + pcm, log: logBytes))
        try write("spool", "pcm-flipped-middle", spoolInput([2] + acked16 + flippedMiddle, log: logBytes))
        try write("spool", "pcm-killed-flipped-last", spoolInput([0] + flippedLast, log: logBytes))
        try write("spool", "opus-flipped-first", spoolInput([4] + flippedFirst, log: logBytes))
        try write("spool", "opus-two-segments-acked8", spoolInput([4 | 8 | 1] + be(UInt64(2)) + be(UInt16(cut)) + be(UInt64(4)) + opus, log: Array(logBytes.prefix(40))))
        try write("spool", "mostly-log", spoolInput([0] + Array(pcm.prefix(60)), log: logBytes))
        // meta.json (SpoolMetaChecks): descriptions our writer makes, of the stream folder the
        // check reads them from: PCM with every optional field, Opus with its OpusHead, version 1.
        let folderID = try XCTUnwrap(UUID(uuidString: "6ba7b810-9dad-41d1-80b4-00c04fd430c8"))
        var full = SpoolMeta(
            streamID: folderID, streamName: "field kit", destination: SpoolDestination(address: "rec.example:7373", tls: .pinned(String(repeating: "ab", count: 32))),
            description: StreamDescription(format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s24), magicCookie: [], primingFrames: 0,
                                           startTime: Date(timeIntervalSince1970: 1_800_000_000), clock: .synchronized, channelLayout: ChannelLayout(tag: ChannelLayout.bitmapTag, bitmap: 3)),
            resumeSecret: Array(repeating: 7, count: 32))
        full.continuation = StreamContinuation(streamID: UUID(), continues: folderID, firstSequence: 501, firstSampleTime: 96_000)
        let opusEncoder = try OpusEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: 6, sample: .s16))
        let surround = SpoolMeta(
            streamID: folderID, streamName: "surround", destination: SpoolDestination(address: "127.0.0.1:7373"),
            description: StreamDescription(format: opusEncoder.outputFormat, magicCookie: opusEncoder.magicCookie, primingFrames: opusEncoder.primingFrames,
                                           startTime: Date(timeIntervalSince1970: 1_800_000_000)),
            resumeSecret: Array(repeating: 9, count: 16))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try write("spool-meta", "pcm-continued", Array(try encoder.encode(full)))
        try write("spool-meta", "opus-surround", Array(try encoder.encode(surround)))
        var older = try XCTUnwrap(try JSONSerialization.jsonObject(with: try encoder.encode(surround)) as? [String: Any])
        older["version"] = 1
        older["destination"] = nil
        older["resumeSecret"] = nil
        try write("spool-meta", "version-1", Array(try JSONSerialization.data(withJSONObject: older, options: [.sortedKeys])))
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
