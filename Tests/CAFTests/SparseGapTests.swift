import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A gap in linear PCM is silence the writer does not write: the file is extended over it, so it
/// reads as zeros to every reader but takes no disk blocks (issue 19, item 7: a claimed gap must
/// never cost more disk than the audio).
final class SparseGapTests: XCTestCase {
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    private func allocatedBytes(_ path: String) throws -> Int64 {
        var status = stat()
        guard stat(path, &status) == 0 else { throw POSIXError(.ENOENT) }
        return Int64(status.st_blocks) * 512
    }

    func testAnHourOfGapTakesNoDiskAndEveryReaderSeesItsLength() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("hour.caf")
        let before = TestSignal.integerPCM(bits: 16, channels: 2, frames: 4_000, seed: 1)
        let after = TestSignal.integerPCM(bits: 16, channels: 2, frames: 4_000, seed: 2)
        let hour: Int64 = 3_600 * 48_000
        let writer = try CAFWriter(path: path, format: format, info: [])
        try writer.append(before.bytes, frameCount: 4_000)
        try writer.addMarker(framePosition: 4_000, name: "gap: \(hour) frames not captured (device-lost)")
        try writer.appendSilence(frameCount: hour)
        try writer.append(after.bytes, frameCount: 4_000)
        try writer.synchronize()
        try writer.finalize()

        let size = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64)
        XCTAssertGreaterThan(size, hour * 4, "the file spans the hour")
        XCTAssertLessThan(try allocatedBytes(path), 4 << 20, "an hour of silence (\(hour * 4) bytes) takes no disk blocks")
        XCTAssertEqual(try FFmpegTools.probeStream(path)["nb_frames"] as? String, "\(hour + 8_000)")
        let file = try CAFFile.read(path: path)
        XCTAssertEqual(file.dataSize, (hour + 8_000) * 4)
        XCTAssertEqual(file.markers.map(\.framePosition), [4_000])
    }

    func testTheSilenceReadsAsZerosEvenAfterAFailedWriteLeftBytesPastTheAudio() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("minute.caf")
        let before = TestSignal.integerPCM(bits: 16, channels: 2, frames: 4_800, seed: 3)
        let after = TestSignal.integerPCM(bits: 16, channels: 2, frames: 4_800, seed: 4)
        let minute = 60 * 48_000
        let writer = try CAFWriter(path: path, format: format, info: [])
        try writer.append(before.bytes, frameCount: 4_800)
        try writer.synchronize()
        // What a write cut short by a full disk leaves: bytes past the audio the writer never counted.
        try appendGarbage([UInt8](repeating: 0x5A, count: 10_000), to: path)
        try writer.appendSilence(frameCount: Int64(minute))
        try writer.append(after.bytes, frameCount: 4_800)
        try writer.finalize()

        let audio = try SndFileReader.read(path: path)
        XCTAssertEqual(audio.frames, 4_800 + minute + 4_800)
        let samples = audio.int32Samples.map { $0 >> 16 }
        XCTAssertEqual(Array(samples[0..<9_600]), before.samples)
        XCTAssertTrue(samples[9_600..<(9_600 + 2 * minute)].allSatisfy { $0 == 0 }, "the gap is silence")
        XCTAssertEqual(Array(samples[(9_600 + 2 * minute)...]), after.samples)
        let sox = try ToolRunner.run("sox", [path, "-n", "stat"])
        XCTAssertTrue(sox.succeeded, sox.errorText)
        let samplesRead = sox.errorText.split(separator: "\n").first { $0.hasPrefix("Samples read:") }?.split(separator: " ").last
        XCTAssertEqual(samplesRead.map(String.init), "\(2 * minute + 2 * 9_600)", sox.errorText)
    }

    func testSilenceIsForLinearPCMOnlyAndCannotPassTheLargestFile() throws {
        let scratch = try ScratchDirectory()
        let pcm = try CAFWriter(path: scratch.file("huge.caf"), format: format, info: [])
        XCTAssertThrowsError(try pcm.appendSilence(frameCount: Int64.max / 2))
        XCTAssertThrowsError(try pcm.appendSilence(frameCount: 1 << 50), "beyond the file system's largest file")
        XCTAssertEqual(pcm.frameCount, 0, "a refused gap appends nothing")
        try pcm.append(TestSignal.integerPCM(bits: 16, channels: 2, frames: 10, seed: 5).bytes, frameCount: 10)
        try pcm.finalize()
        XCTAssertEqual(try SndFileReader.read(path: scratch.file("huge.caf")).frames, 10)

        let opus = try CAFWriter(path: scratch.file("opus.caf"), format: .opus(channels: 2, framesPerPacket: 960), info: [], primingFrames: 312)
        XCTAssertThrowsError(try opus.appendSilence(frameCount: 960)) { error in
            XCTAssertTrue("\(error)".contains("only be appended to linear PCM"), "\(error)")
        }
    }
}
