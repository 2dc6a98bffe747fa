import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// `CAFWriter.publishDataSize()`: the data chunk's size written while recording, so that a reader
/// that refuses a size of -1 (libsndfile 1.2) reads an unfinished file as far as it was published;
/// the journal stays, and recovery still finishes the file with every whole frame it holds.
final class PublishedDataSizeTests: XCTestCase {
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16)

    func testLibsndfileReadsAnUnfinishedFileUpToThePublishedSizeAndRecoveryFinishesIt() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("take.caf")
        let writer = try CAFWriter(path: path, format: format, info: [("title", "take")], synchronizing: false)
        let first = (0..<960).flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
        try writer.append(first, frameCount: 960)
        XCTAssertThrowsError(try SndFileReader.read(path: path), "libsndfile 1.2 refuses a data size of -1")
        try writer.publishDataSize()
        XCTAssertEqual(try SndFileReader.read(path: path).frames, 960)
        // More audio, not yet published: readers see what was published; the file holds it all.
        try writer.append(first, frameCount: 960)
        XCTAssertEqual(try SndFileReader.read(path: path).frames, 960)
        try writer.publishDataSize()
        let read = try SndFileReader.read(path: path)
        XCTAssertEqual(read.frames, 1_920)
        XCTAssertEqual(read.int32Samples.prefix(3).map { $0 >> 16 }, [0, 1, 2])
        // A crash now (the writer abandoned): unfinished, recovered with every frame.
        writer.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)))
        let report = try CAFRecovery.recover(path: path)
        XCTAssertFalse(report.wasAlreadyFinalized)
        XCTAssertEqual(report.frameCount, 1_920)
        let finished = try CAFFile.read(path: path)
        XCTAssertTrue(finished.isFinalized)
        XCTAssertEqual(try finished.readAudioData(), first + first)
    }
}
