import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// Files as a crash leaves them (data size -1): independent readers still open them with the right
/// length, and `CAFRecovery` finalizes them.
final class UnfinalizedFileTests: XCTestCase {
    private let frames = 4_000
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s24)

    /// Writes `frames` frames, synchronizes and closes without finalizing, then adds a partial frame.
    private func crashedPCM(at path: String, partialFrameBytes: Int) throws -> TestSignalBytes {
        let signal = TestSignal.integerPCM(bits: 24, channels: 2, frames: frames, seed: 7)
        let writer = try CAFWriter(path: path, format: format, info: [(key: "title", value: "crash")])
        try writer.append(signal.bytes, frameCount: frames)
        try writer.synchronize()
        writer.close()
        try appendGarbage(Array(repeating: 0x5A, count: partialFrameBytes), to: path)
        return TestSignalBytes(bytes: signal.bytes, samples: signal.samples)
    }

    struct TestSignalBytes {
        var bytes: [UInt8]
        var samples: [Int32]
    }

    func testOurReaderSeesAnUnfinalizedFileRunningToTheEnd() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("crashed.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 4)
        let file = try CAFFile.read(path: path)
        XCTAssertFalse(file.isFinalized)
        XCTAssertEqual(file.dataSize, Int64(signal.bytes.count + 4))
        XCTAssertEqual(file.totalFrames, Int64(frames), "a partial trailing frame is not a frame")
        XCTAssertEqual(Array(try file.readAudioData().prefix(signal.bytes.count)), signal.bytes)
    }

    func testFFmpegOpensAnUnfinalizedFileWithTheRightLength() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("crashed.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 0)
        let stream = try FFmpegTools.probeStream(path)
        XCTAssertEqual(stream["codec_name"] as? String, "pcm_s24le")
        let decoded = try FFmpegTools.decode(path, rawFormat: "s24le")
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        XCTAssertEqual([UInt8](decoded.standardOutput), signal.bytes, "every frame, sample-exact")
    }

    func testFFmpegDropsAPartialTrailingFrameOfAnUnfinalizedFile() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("partial.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 5)
        let decoded = try FFmpegTools.decode(path, rawFormat: "s24le")
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        XCTAssertEqual([UInt8](decoded.standardOutput), signal.bytes)
    }

    /// libsndfile 1.2.0 (Debian 12) does not accept a data chunk of size -1 at all: it logs
    /// "data : -1 *** Should be >= 0 ***" and fails with "file is malformed". So a crashed file becomes
    /// readable by libsndfile only after `CAFRecovery.recover`. Should a libsndfile version accept it,
    /// it must report the right length.
    func testLibsndfileReadsAnUnfinalizedFileOnlyCorrectlyOrNotAtAll() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("crashed.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 5)
        do {
            let audio = try SndFileReader.read(path: path)
            XCTAssertEqual(audio.frames, frames)
            XCTAssertEqual(audio.nativeIntegerSamples, signal.samples)
        } catch {
            XCTAssertTrue(error.description.contains("malformed"), error.description)
        }
        _ = try CAFRecovery.recover(path: path)
        let audio = try SndFileReader.read(path: path)
        XCTAssertEqual(audio.frames, frames)
        XCTAssertEqual(audio.nativeIntegerSamples, signal.samples)
    }

    func testRecoveryFinalizesAndDropsThePartialFrame() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("recover.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 5)
        let report = try CAFRecovery.recover(path: path)
        XCTAssertFalse(report.wasAlreadyFinalized)
        XCTAssertEqual(report.packetCount, Int64(frames))
        XCTAssertEqual(report.frameCount, Int64(frames))
        XCTAssertEqual(report.dataByteCount, Int64(signal.bytes.count))
        XCTAssertEqual(report.droppedDataBytes, 5)
        XCTAssertTrue(report.description.contains("dropped 5"), report.description)
        XCTAssertFalse(FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)))

        let file = try CAFFile.read(path: path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(try file.readAudioData(), signal.bytes)
        XCTAssertEqual(file.info.first?.value, "crash")
        XCTAssertEqual(try SndFileReader.read(path: path).nativeIntegerSamples, signal.samples)
        let stream = try FFmpegTools.probeStream(path)
        XCTAssertEqual(stream["nb_frames"] as? String, String(frames))
        let decoded = try FFmpegTools.decode(path, rawFormat: "s24le")
        XCTAssertEqual([UInt8](decoded.standardOutput), signal.bytes)

        let again = try CAFRecovery.recover(path: path)
        XCTAssertTrue(again.wasAlreadyFinalized, "recovery is idempotent")
        XCTAssertEqual(again.frameCount, Int64(frames))
        XCTAssertTrue(again.description.contains("nothing to do"))
        XCTAssertEqual(try fileBytes(path).count, Int(file.dataOffset) + signal.bytes.count, "the second run changes nothing")
    }

    func testRecoveryOfAProperlyFinalizedFileReportsNothingToDo() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("fine.caf")
        let writer = try CAFWriter(path: path, format: format, info: [])
        try writer.append([UInt8](repeating: 1, count: 60), frameCount: 10)
        try writer.finalize()
        let before = try fileBytes(path)
        let report = try CAFRecovery.recover(path: path)
        XCTAssertTrue(report.wasAlreadyFinalized)
        XCTAssertEqual(report.frameCount, 10)
        XCTAssertEqual(try fileBytes(path), before)
    }

    func testRecoveryWithoutAJournalStillFinalizesPCM() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("nojournal.caf")
        let signal = try crashedPCM(at: path, partialFrameBytes: 2)
        try FileManager.default.removeItem(atPath: CAFWriter.journalPath(for: path))
        let report = try CAFRecovery.recover(path: path)
        XCTAssertEqual(report.frameCount, Int64(frames))
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), signal.bytes)
    }
}

/// The journal's path, as `CAFWriter.journalPath` documents it.
