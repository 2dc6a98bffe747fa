import CAF
import CaptureCore
import Foundation
import XCTest

/// Recovery on what a crash (or damage) can leave (issue 27, item 8's audit): every recovered file
/// reads back, a journal's values are checked before they reach the file, and recovery in memory
/// is recovery on disk.
final class RecoveryBoundsTests: XCTestCase {
    private var scratch: ScratchDirectory!

    override func setUpWithError() throws {
        scratch = try ScratchDirectory()
    }

    override func tearDown() {
        scratch = nil
    }

    private func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    /// CRC-32 (zlib's), as the journal's records carry it.
    private func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    /// A journal header (magic, version 1, flags, priming, CRC).
    private func journalHeader(priming: Int32) -> [UInt8] {
        let head = Array("CAFJ".utf8) + bigEndian(UInt16(1)) + bigEndian(UInt16(0)) + bigEndian(priming)
        return head + bigEndian(crc32(head))
    }

    /// A receiver that crashed before an Opus stream's first packet (or before its priming was
    /// over) left a file whose frames are fewer than its priming: recovery finishes it with every
    /// frame priming and none valid, instead of refusing it as "an invalid CAF writer call".
    func testAnOpusFileCutOffBeforeItsPrimingEndsIsRecovered() throws {
        let path = scratch.file("early.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 120), info: [], primingFrames: 312)
        try writer.append([0xF8, 0xFF, 0xFE, 0x01], packetSizes: [2, 2], frameCount: 240)
        try writer.synchronize()
        writer.close()
        let report = try CAFRecovery.recover(path: path)
        XCTAssertEqual(report.packetCount, 2)
        XCTAssertEqual(report.frameCount, 240)
        let file = try CAFFile.read(path: path)
        XCTAssertEqual(file.packetTable?.primingFrames, 240, "all 240 frames are priming")
        XCTAssertEqual(file.packetTable?.validFrames, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: writer.journalPath))
    }

    /// A journal whose header (CRC intact) claims negative priming is corrupt: it made a recovered
    /// file whose packet table no reader accepts.
    func testAJournalWithNegativePrimingIsCorrupt() throws {
        let path = scratch.file("negative.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], primingFrames: 312)
        try writer.append([0xF8, 0xFF, 0xFE], packetSizes: [3], frameCount: 960)
        writer.close()
        var journal = try fileBytes(writer.journalPath)
        journal.replaceSubrange(0..<16, with: journalHeader(priming: -5))
        try writeFile(writer.journalPath, journal)
        assertCAFError(try CAFRecovery.recover(path: path)) {
            if case .journalCorrupt(_, "its priming frame count -5 is negative") = $0 { return true } else { return false }
        }
        XCTAssertFalse(try CAFFile.read(path: path).isFinalized, "left as it was")
    }

    /// A packet table before the audio of an unfinished file would be followed by the one recovery
    /// writes after it: two tables, a file no reader accepts. Refused, the file left as it was.
    func testAPacketTableBeforeTheAudioOfAnUnfinishedFileIsRefused() throws {
        let path = scratch.file("early-pakt.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [("title", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")])
        try writer.append([0xF8, 0xFF, 0xFE], packetSizes: [3], frameCount: 960)
        writer.close()
        var bytes = try fileBytes(path)
        // The info chunk (12 + 4 + 6 + 36 bytes) becomes a 24-byte pakt and a free chunk.
        let info = try XCTUnwrap(bytes.firstRange(of: Array("info".utf8)))
        let pakt = Array("pakt".utf8) + bigEndian(Int64(24)) + bigEndian(Int64(0)) + bigEndian(Int64(0)) + bigEndian(Int32(0)) + bigEndian(Int32(0))
        let free = Array("free".utf8) + bigEndian(Int64(58 - 36 - 12)) + [UInt8](repeating: 0, count: 58 - 36 - 12)
        bytes.replaceSubrange(info.lowerBound..<(info.lowerBound + 58), with: pakt + free)
        try writeFile(path, bytes)
        XCTAssertNoThrow(try CAFFile.read(path: path), "an unfinished file reads")
        assertCAFError(try CAFRecovery.recover(path: path)) {
            if case .malformedChunk(_, "pakt", "it comes before the audio data, where the CAF writer never puts it, so the file cannot be finished or resumed") = $0 { return true } else { return false }
        }
        XCTAssertEqual(try fileBytes(path), bytes, "nothing changed")
    }

    /// Recovery in memory writes the bytes recovery on disk writes, and reports the same.
    func testRecoveryInMemoryIsRecoveryOnDisk() throws {
        let path = scratch.file("crashed.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 2, framesPerPacket: 960), info: [("title", "t")], primingFrames: 312)
        try writer.append([UInt8](repeating: 0xAB, count: 300), packetSizes: [100, 150, 50], frameCount: 2_880)
        try writer.addMarker(framePosition: 1_000, name: "gap")
        try writer.synchronize()
        writer.close()
        try appendGarbage([1, 2, 3], to: path)
        var bytes = try fileBytes(path)
        let journal = try fileBytes(writer.journalPath)
        let inMemory = try CAFRecovery.recover(bytes: &bytes, journal: journal, name: path)
        let onDisk = try CAFRecovery.recover(path: path)
        XCTAssertEqual(inMemory, onDisk)
        XCTAssertEqual(onDisk.droppedDataBytes, 3)
        XCTAssertEqual(bytes, try fileBytes(path))
        let again = try CAFRecovery.recover(bytes: &bytes, journal: nil, name: path)
        XCTAssertTrue(again.wasAlreadyFinalized)
        XCTAssertEqual(try CAFFile.read(bytes: bytes, name: "recovered").markers, [CAFMarker(framePosition: 1_000, name: "gap")])
        assertCAFError(try CAFRecovery.recover(bytes: &bytes, journal: [1, 2, 3], name: "x.caf")) {
            if case .journalCorrupt("x.caf.pakt-journal", _) = $0 { return true } else { return false }
        }
    }
}
