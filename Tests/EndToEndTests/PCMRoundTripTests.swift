import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// capture-send → capture-recv over loopback, with the real executables: the stored samples equal
/// the source's, checked with libsndfile, ffprobe/ffmpeg and our own reader.
final class PCMRoundTripTests: XCTestCase {
    struct Shape {
        var sample: PCMSampleFormat
        var rate: Int
        var channels: Int
        var seconds: Double
        var ffprobeCodec: String
    }

    private var workDirectory: URL!

    override func setUpWithError() throws {
        workDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(workDirectory)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// A WAV of pseudo-random full-range samples in `shape`, and the samples as libsndfile reads them.
    private func makeSourceFile(_ shape: Shape, seed: UInt64) throws -> (path: String, ints: [Int32], floats: [Float]) {
        let path = workDirectory.appendingPathComponent("source-\(seed).wav").path
        let count = Int(Double(shape.rate) * shape.seconds) * shape.channels
        var generator = SampleGenerator(seed: seed)
        switch shape.sample {
        case .f32:
            let floats = (0..<count).map { _ in Float(Int32(bitPattern: generator.next())) / Float(Int32.max) }
            try writeWAV(path: path, subtype: Int32(SF_FORMAT_FLOAT), rate: shape.rate, channels: shape.channels, floats: floats)
            return (path, [], floats)
        case .s16, .s24, .s32:
            let shift = 32 - shape.sample.bitsPerChannel
            let ints = (0..<count).map { _ in (Int32(bitPattern: generator.next()) >> shift) << shift }
            let subtype: Int32
            switch shape.sample {
            case .s16: subtype = Int32(SF_FORMAT_PCM_16)
            case .s24: subtype = Int32(SF_FORMAT_PCM_24)
            default: subtype = Int32(SF_FORMAT_PCM_32)
            }
            try writeWAV(path: path, subtype: subtype, rate: shape.rate, channels: shape.channels, ints: ints)
            return (path, ints, [])
        }
    }

    /// Checks one received file against its source with three independent readers.
    private func assertFile(_ file: URL, equals source: (path: String, ints: [Int32], floats: [Float]), shape: Shape, line: UInt = #line) throws {
        let frames = (shape.sample == .f32 ? source.floats.count : source.ints.count) / shape.channels

        // libsndfile: sample for sample.
        let audio = try SndFileReader.read(path: file.path)
        XCTAssertEqual(audio.sampleRate, shape.rate, line: line)
        XCTAssertEqual(audio.channels, shape.channels, line: line)
        XCTAssertEqual(audio.frames, frames, line: line)
        if shape.sample == .f32 {
            XCTAssertEqual(audio.floatSamples, source.floats, "libsndfile reads back the exact floats", line: line)
        } else {
            XCTAssertEqual(audio.int32Samples, source.ints, "libsndfile reads back the exact samples", line: line)
        }

        // ffprobe: the format, and the length.
        let stream = try ffprobeStream(file.path)
        XCTAssertEqual(stream["codec_name"] as? String, shape.ffprobeCodec, line: line)
        XCTAssertEqual(stream["sample_rate"] as? String, "\(shape.rate)", line: line)
        XCTAssertEqual(stream["channels"] as? Int, shape.channels, line: line)
        let duration = Double(stream["duration"] as? String ?? "") ?? -1
        XCTAssertEqual(duration, shape.seconds, accuracy: 0.001, line: line)

        // ffmpeg decodes to the same bytes as the source's raw samples.
        let rawFormat = shape.ffprobeCodec.replacingOccurrences(of: "pcm_", with: "")
        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", rawFormat, "-"])
        XCTAssertTrue(decoded.succeeded, decoded.errorText, line: line)
        XCTAssertEqual(Array(decoded.standardOutput), Self.rawBytes(source, sample: shape.sample), "ffmpeg decodes the exact bytes", line: line)

        // Our reader: a finished file with the stream's metadata.
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized, line: line)
        XCTAssertEqual(caf.format, .linearPCM(sampleRate: Double(shape.rate), channels: shape.channels, sample: shape.sample), line: line)
        XCTAssertEqual(caf.totalFrames, Int64(frames), line: line)
        let info = Dictionary(caf.info.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        XCTAssertNotNil(info["recorded date"], line: line)
        XCTAssertTrue(info["encoding application"]?.contains("capture-send") ?? false, line: line)
        XCTAssertNotNil(info["source"], line: line)
    }

    private static func rawBytes(_ source: (path: String, ints: [Int32], floats: [Float]), sample: PCMSampleFormat) -> [UInt8] {
        var bytes: [UInt8] = []
        switch sample {
        case .f32:
            for value in source.floats { withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes += $0 } }
        case .s16:
            for value in source.ints { withUnsafeBytes(of: Int16(value >> 16).littleEndian) { bytes += $0 } }
        case .s24:
            for value in source.ints {
                let shifted = UInt32(bitPattern: value) >> 8
                bytes += [UInt8(shifted & 0xFF), UInt8((shifted >> 8) & 0xFF), UInt8((shifted >> 16) & 0xFF)]
            }
        case .s32:
            for value in source.ints { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        }
        return bytes
    }

    func testFilesOfSeveralShapesArriveBitExact() throws {
        let shapes = [
            Shape(sample: .s24, rate: 44_100, channels: 3, seconds: 1.5, ffprobeCodec: "pcm_s24le"),
            Shape(sample: .f32, rate: 96_000, channels: 1, seconds: 1.25, ffprobeCodec: "pcm_f32le"),
            Shape(sample: .s16, rate: 8_000, channels: 2, seconds: 2.0, ffprobeCodec: "pcm_s16le"),
            Shape(sample: .s32, rate: 192_000, channels: 8, seconds: 0.5, ffprobeCodec: "pcm_s32le"),
        ]
        let receiver = try ReceiverUnderTest()
        for (index, shape) in shapes.enumerated() {
            let source = try makeSourceFile(shape, seed: UInt64(index + 1))
            let name = "shape-\(index)"
            let result = try runSender([
                receiver.address, "--source", "file", "--file", source.path, "--no-pace",
                "--stream-name", name, "--buffer-seconds", "0.1",
            ])
            XCTAssertEqual(result.status, 0, result.stderr)
            let file = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix(name + "_") }, "no file for \(name)")
            try assertFile(file, equals: source, shape: shape)
        }
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testToneIsStoredSampleExact() throws {
        let receiver = try ReceiverUnderTest()
        let result = try runSender([
            receiver.address, "--source", "tone", "--rate", "16000", "--channels", "2", "--format", "s16",
            "--tone-frequency", "1000", "--tone-level=-6", "--duration", "1.01", "--no-pace", "--stream-name", "tone",
        ])
        XCTAssertEqual(result.status, 0, result.stderr)
        let file = try XCTUnwrap(receiver.files().first)
        let audio = try SndFileReader.read(path: file.path)
        XCTAssertEqual(audio.frames, 16_160)
        let tone = try ToneSource(settings: .init(frequency: 1_000, levelDBFS: -6, sampleRate: 16_000, channels: 2, sample: .s16, duration: .seconds(1.01), paced: false))
        var expected = [UInt8](repeating: 0, count: 16_160 * 4)
        expected.withUnsafeMutableBytes { _ = try? tone.read(into: $0, frameCapacity: 16_160) }
        let expectedSamples = stride(from: 0, to: expected.count, by: 2).map { Int32(Int16(bitPattern: UInt16(expected[$0]) | UInt16(expected[$0 + 1]) << 8)) << 16 }
        XCTAssertEqual(audio.int32Samples, expectedSamples)
        // -6 dBFS peak: 0.501 of full scale.
        XCTAssertEqual(Double(audio.int32Samples.map { abs(Int64($0)) }.max() ?? 0) / 2_147_483_648, 0.5012, accuracy: 0.0005)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testConcurrentStreamsEachArriveExact() throws {
        let receiver = try ReceiverUnderTest()
        let shape = Shape(sample: .s24, rate: 48_000, channels: 2, seconds: 3, ffprobeCodec: "pcm_s24le")
        let sources = try (0..<4).map { try makeSourceFile(shape, seed: UInt64(100 + $0)) }
        let senders = try sources.enumerated().map { index, source in
            try ChildProcess(Products.send, [
                receiver.address, "--source", "file", "--file", source.path, "--no-pace",
                "--stream-name", "concurrent-\(index)", "--buffer-seconds", "0.05",
            ])
        }
        for sender in senders {
            XCTAssertEqual(sender.wait(seconds: 120), 0, sender.standardError)
        }
        XCTAssertEqual(receiver.files().count, 4)
        for (index, source) in sources.enumerated() {
            let file = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("concurrent-\(index)_") })
            try assertFile(file, equals: source, shape: shape)
        }
        XCTAssertEqual(receiver.stop(), 0)
    }
}
