import CAF
import CaptureCore
import Foundation
import XCTest

/// The writer never clobbers, never follows links, checks its input and explains its errors.
final class WriterSafetyTests: XCTestCase {
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    func testAnExistingFileIsNeverOverwritten() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("existing.caf")
        try writeFile(path, [1, 2, 3])
        assertCAFError(try CAFWriter(path: path, format: format, info: [])) { $0 == .fileExists(path: path) }
        XCTAssertEqual(try fileBytes(path), [1, 2, 3])
        XCTAssertFalse(FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)))
    }

    func testASymbolicLinkIsNeverFollowed() throws {
        let scratch = try ScratchDirectory()
        let target = scratch.file("target")
        let link = scratch.file("link.caf")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        assertCAFError(try CAFWriter(path: link, format: format, info: [])) {
            $0 == .fileExists(path: link) || $0 == .symbolicLink(path: link)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "nothing was created through the link")

        try writeFile(target, [9])
        assertCAFError(try CAFFile.read(path: link)) { $0 == .symbolicLink(path: link) }
        assertCAFError(try CAFRecovery.recover(path: link)) { $0 == .symbolicLink(path: link) }
        XCTAssertEqual(try fileBytes(target), [9])
    }

    func testTheFinalPacketTableComesFromTheJournalAndAShortJournalIsRefused() throws {
        let scratch = try ScratchDirectory()
        let opus = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        let path = scratch.file("long.caf")
        let writer = try CAFWriter(path: path, format: opus, info: [], primingFrames: 312)
        var sizes: [UInt32] = []
        for index in 0..<500 {
            let packet = [UInt32(3 + index % 7), UInt32(5 + index % 3)]
            sizes += packet
            try writer.append([UInt8](repeating: UInt8(index % 251), count: Int(packet[0] + packet[1])), packetSizes: packet, frameCount: 1_920)
        }
        // The writer keeps no packet table of its own: once the gathered sizes are in the journal,
        // cut the journal short and finalize must say so.
        try writer.flush()
        let journal = CAFWriter.journalPath(for: path)
        let whole = try fileBytes(journal)
        try writeFile(journal, Array(whole.prefix(whole.count - 60)))
        assertCAFError(try writer.finalize(remainderFrames: 100)) {
            if case .journalCorrupt(let journalPath, let reason) = $0 { return journalPath == journal && reason.contains("but the file holds 1000 packets") }
            return false
        }
        // With the journal whole again, the packet table is exactly what was appended.
        try writeFile(journal, whole)
        try writer.finalize(remainderFrames: 100)
        let table = try XCTUnwrap(try CAFFile.read(path: path).packetTable)
        XCTAssertEqual(table.packetSizes, sizes)
        XCTAssertEqual(table.validFrames, 1_000 * 960 - 312 - 100)
    }

    func testNewFilesHaveMode0644LessTheUmask() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("mode.caf")
        let writer = try CAFWriter(path: path, format: format, info: [])
        try writer.finalize()
        let mask = umask(0o022)
        umask(mask)
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(permissions, 0o644 & ~Int(mask))
    }

    func testMissingDirectoryAndUnwritableDirectoryGiveActionableErrors() throws {
        let scratch = try ScratchDirectory()
        let missing = scratch.file("no/such/dir/x.caf")
        assertCAFError(try CAFWriter(path: missing, format: format, info: [])) {
            $0 == .directoryMissing(directory: scratch.file("no/such/dir"))
        }
        guard getuid() != 0 else { throw XCTSkip("root may write anywhere") }
        let locked = scratch.file("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o555])
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: locked) }
        assertCAFError(try CAFWriter(path: "\(locked)/x.caf", format: format, info: [])) {
            $0 == .permissionDenied(path: "\(locked)/x.caf")
        }
    }

    func testErrorMessagesSayWhatToDo() {
        XCTAssertEqual(
            CAFError.diskFull(directory: "/srv/rec").description,
            "the disk is full: free space in /srv/rec (or raise the quota), then resume the recording")
        XCTAssertTrue(CAFError.permissionDenied(path: "/srv/rec/a.caf").description.contains("give this user write access to /srv/rec"))
        XCTAssertTrue(CAFError.fileExists(path: "/a.caf").description.contains("never overwrites"))
        XCTAssertTrue(CAFError.truncatedChunk(path: "/a.caf", chunk: "pakt", offset: 100).description.contains("run recovery"))
        XCTAssertTrue(CAFError.packetsUnavailable(path: "/a.caf", requested: 9, available: 7).description.contains("resume from packet 7"))
    }

    func testInvalidFormatsAndArgumentsAreRefused() throws {
        let scratch = try ScratchDirectory()
        var bad = format
        bad.sampleRate = 1_000
        assertCAFError(try CAFWriter(path: scratch.file("a.caf"), format: bad, info: [])) {
            $0 == .invalidFormat(.sampleRateOutOfRange(1_000))
        }
        assertCAFError(try CAFWriter(path: scratch.file("b.caf"), format: format, info: [], primingFrames: 10)) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        assertCAFError(try CAFWriter(path: scratch.file("c.caf"), format: format, info: [(key: "a\u{0}", value: "b")])) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.file("a.caf")), "a refused format creates no file")

        let writer = try CAFWriter(path: scratch.file("d.caf"), format: format, info: [])
        assertCAFError(try writer.append([1, 2, 3], frameCount: 1)) { if case .invalidArgument = $0 { return true } else { return false } }
        assertCAFError(try writer.append([1, 2, 3, 4], frameCount: 2)) { if case .invalidArgument = $0 { return true } else { return false } }
        assertCAFError(try writer.append([1, 2, 3, 4], packetSizes: [4], frameCount: 1)) { if case .invalidArgument = $0 { return true } else { return false } }
        assertCAFError(try writer.finalize(remainderFrames: 5)) { if case .invalidArgument = $0 { return true } else { return false } }
        try writer.finalize()
        assertCAFError(try writer.append([1, 2, 3, 4], frameCount: 1)) { $0 == .writerClosed(path: scratch.file("d.caf")) }
        assertCAFError(try writer.synchronize()) { $0 == .writerClosed(path: scratch.file("d.caf")) }
        assertCAFError(try writer.finalize()) { $0 == .writerClosed(path: scratch.file("d.caf")) }
    }

    func testAnOrphanJournalIsReplacedWhenANewFileIsCreated() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("new.caf")
        try writeFile(CAFWriter.journalPath(for: path), Array("stale".utf8))
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [])
        try writer.append([1, 2, 3], packetSizes: [3], frameCount: 960)
        writer.close()
        XCTAssertEqual(try CAFRecovery.recover(path: path).packetCount, 1)
    }
}
