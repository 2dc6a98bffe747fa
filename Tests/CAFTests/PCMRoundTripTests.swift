import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// Linear PCM files written by `CAFWriter`, read back sample-exact by our reader, libsndfile and ffmpeg.
final class PCMRoundTripTests: XCTestCase {
    struct Case {
        var sample: PCMSampleFormat
        var rate: Double
        var channels: Int
        var frames: Int
        var ffmpegCodec: String
        var rawFormat: String
        var sndfileSubtype: Int32
    }

    static let cases: [Case] = [
        Case(sample: .s16, rate: 8_000, channels: 2, frames: 4_001, ffmpegCodec: "pcm_s16le", rawFormat: "s16le", sndfileSubtype: Int32(SF_FORMAT_PCM_16)),
        Case(sample: .s24, rate: 44_100, channels: 3, frames: 5_003, ffmpegCodec: "pcm_s24le", rawFormat: "s24le", sndfileSubtype: Int32(SF_FORMAT_PCM_24)),
        Case(sample: .s32, rate: 48_000, channels: 2, frames: 3_001, ffmpegCodec: "pcm_s32le", rawFormat: "s32le", sndfileSubtype: Int32(SF_FORMAT_PCM_32)),
        Case(sample: .f32, rate: 96_000, channels: 1, frames: 9_601, ffmpegCodec: "pcm_f32le", rawFormat: "f32le", sndfileSubtype: Int32(SF_FORMAT_FLOAT)),
    ]

    /// Writes `bytes` in uneven appends, so that writes straddle no particular boundary.
    private func writePCM(_ test: Case, bytes: [UInt8], to path: String, info: [(key: String, value: String)] = []) throws -> StreamFormat {
        let format = StreamFormat.linearPCM(sampleRate: test.rate, channels: test.channels, sample: test.sample)
        let writer = try CAFWriter(path: path, format: format, info: info)
        let bytesPerFrame = Int(format.bytesPerFrame)
        var frame = 0
        var chunk = 1
        while frame < test.frames {
            let count = min(chunk, test.frames - frame)
            try writer.append(Array(bytes[(frame * bytesPerFrame)..<((frame + count) * bytesPerFrame)]), frameCount: count)
            frame += count
            chunk = chunk * 3 + 7
        }
        XCTAssertEqual(writer.frameCount, Int64(test.frames))
        XCTAssertEqual(writer.packetCount, Int64(test.frames))
        XCTAssertEqual(writer.dataByteCount, Int64(bytes.count))
        try writer.synchronize()
        XCTAssertEqual(writer.durablePacketCount, Int64(test.frames))
        try writer.finalize()
        XCTAssertFalse(FileManager.default.fileExists(atPath: writer.journalPath), "finalize removes the journal")
        return format
    }

    private func signal(_ test: Case, seed: UInt64) -> (bytes: [UInt8], ints: [Int32], floats: [Float]) {
        if test.sample == .f32 {
            let signal = TestSignal.floatPCM(channels: test.channels, frames: test.frames, seed: seed)
            return (signal.bytes, [], signal.samples)
        }
        let signal = TestSignal.integerPCM(bits: test.sample.bitsPerChannel, channels: test.channels, frames: test.frames, seed: seed)
        return (signal.bytes, signal.samples, [])
    }

    func testOurReaderReadsEveryFormatBackExactly() throws {
        let scratch = try ScratchDirectory()
        for (index, test) in Self.cases.enumerated() {
            let path = scratch.file("\(test.sample).caf")
            let signal = signal(test, seed: UInt64(index))
            let info = [(key: "title", value: "Take \(index) — Ünïcode"), (key: "recorded date", value: "2024-05-01T10:00:00Z")]
            let format = try writePCM(test, bytes: signal.bytes, to: path, info: info)
            let file = try CAFFile.read(path: path)
            XCTAssertEqual(file.format, format, "\(test.sample)")
            XCTAssertTrue(file.isFinalized)
            XCTAssertEqual(file.dataSize, Int64(signal.bytes.count))
            XCTAssertEqual(file.totalFrames, Int64(test.frames))
            XCTAssertEqual(file.packetCount, Int64(test.frames))
            XCTAssertNil(file.packetTable, "linear PCM needs no packet table")
            XCTAssertEqual(try file.readAudioData(), signal.bytes, "\(test.sample)")
            XCTAssertEqual(file.info.map(\.key), info.map(\.key))
            XCTAssertEqual(file.info.map(\.value), info.map(\.value))
            XCTAssertEqual(file.channelLayoutTag, CAFChannelLayoutTag.default(channels: test.channels))
            XCTAssertEqual(try file.readPacket(1), Array(signal.bytes[Int(format.bytesPerFrame)..<Int(2 * format.bytesPerFrame)]))
        }
    }

    func testLibsndfileReadsEveryFormatSampleExact() throws {
        let scratch = try ScratchDirectory()
        for (index, test) in Self.cases.enumerated() {
            let path = scratch.file("\(test.sample).caf")
            let signal = signal(test, seed: UInt64(100 + index))
            _ = try writePCM(test, bytes: signal.bytes, to: path)
            let audio = try SndFileReader.read(path: path)
            XCTAssertEqual(audio.majorFormat, Int32(SF_FORMAT_CAF))
            XCTAssertEqual(audio.subtype, test.sndfileSubtype, "\(test.sample)")
            XCTAssertEqual(audio.frames, test.frames)
            XCTAssertEqual(audio.sampleRate, Int(test.rate))
            XCTAssertEqual(audio.channels, test.channels)
            if test.sample == .f32 {
                XCTAssertEqual(audio.floatSamples.map(\.bitPattern), signal.floats.map(\.bitPattern))
            } else {
                XCTAssertEqual(audio.nativeIntegerSamples, signal.ints, "\(test.sample)")
            }
        }
    }

    func testFFprobeAndFFmpegReadEveryFormatSampleExact() throws {
        let scratch = try ScratchDirectory()
        for (index, test) in Self.cases.enumerated() {
            let path = scratch.file("\(test.sample).caf")
            let signal = signal(test, seed: UInt64(200 + index))
            _ = try writePCM(test, bytes: signal.bytes, to: path, info: [(key: "title", value: "probe me")])
            let stream = try FFmpegTools.probeStream(path)
            XCTAssertEqual(stream["codec_name"] as? String, test.ffmpegCodec)
            XCTAssertEqual(stream["sample_rate"] as? String, String(Int(test.rate)))
            XCTAssertEqual(stream["channels"] as? Int, test.channels)
            XCTAssertEqual(stream["nb_frames"] as? String, String(test.frames))
            XCTAssertEqual(stream["duration_ts"] as? Int, test.frames)
            let decoded = try FFmpegTools.decode(path, rawFormat: test.rawFormat)
            XCTAssertTrue(decoded.succeeded, decoded.errorText)
            XCTAssertEqual([UInt8](decoded.standardOutput), signal.bytes, "ffmpeg decodes \(test.sample) sample-exact")
        }
    }

    func testFFprobeShowsInfoEntriesAsTags() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("tags.caf")
        let writer = try CAFWriter(
            path: path, format: .linearPCM(sampleRate: 48_000, channels: 1, sample: .s16),
            info: [(key: "title", value: "Morning take"), (key: "source", value: "hw:1,0")])
        try writer.append([UInt8](repeating: 0, count: 96), frameCount: 48)
        try writer.finalize()
        let result = try ToolRunner.run("ffprobe", ["-v", "error", "-show_format", "-of", "json", path])
        let tags = (result.jsonObject?["format"] as? [String: Any])?["tags"] as? [String: String]
        XCTAssertEqual(tags?["title"], "Morning take")
        XCTAssertEqual(tags?["source"], "hw:1,0")
    }
}
