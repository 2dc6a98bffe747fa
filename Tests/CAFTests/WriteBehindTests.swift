import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// A writer can gather audio and write it in larger pieces, and can write without keeping a
/// descriptor: what a receiver of thousands of streams needs. Nothing appended is ever reordered
/// or lost by either, and `flush` and `synchronize` write everything gathered.
final class WriteBehindTests: XCTestCase {
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16)

    func testGatheredAudioIsWrittenToAPageOnceWriteBehindIsPassedAndWhollyWhenFlushed() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("gathered.caf")
        let writer = try CAFWriter(path: path, format: format, info: [], writeBehind: 5_000)
        let header = try fileBytes(path).count
        let pieces = (0..<5).map { piece in [UInt8]((0..<2_000).map { UInt8(truncatingIfNeeded: $0 &+ piece * 31) }) }
        try writer.append(pieces[0], frameCount: 1_000)
        try writer.append(pieces[1], frameCount: 1_000)
        XCTAssertEqual(try fileBytes(path).count, header, "4,000 bytes are gathered, not written")
        XCTAssertTrue(writer.hasGatheredData)
        XCTAssertEqual(writer.dataByteCount, 4_000, "but counted as appended")
        try writer.append(pieces[2], frameCount: 1_000)
        let firstWrite = try fileBytes(path).count
        XCTAssertEqual(firstWrite, (header + 6_000) / 4_096 * 4_096, "past 5,000 bytes what is gathered is written up to the file's last whole page")
        XCTAssertGreaterThan(firstWrite, header)
        XCTAssertTrue(writer.hasGatheredData, "the rest of the page stays gathered")
        XCTAssertEqual(writer.dataByteCount, 6_000)
        try writer.append(pieces[3], frameCount: 1_000)
        try writer.addMarker(framePosition: 3_500, name: "gap")
        try writer.appendSilence(frameCount: 10)
        XCTAssertEqual(try fileBytes(path).count, header + 8_020, "silence writes what was gathered before it, then extends the file")
        try writer.append(pieces[4], frameCount: 1_000)
        try writer.flush()
        XCTAssertEqual(try fileBytes(path).count, header + 10_020)
        XCTAssertFalse(writer.hasGatheredData)
        try writer.finalize()
        let file = try CAFFile.read(path: path)
        XCTAssertEqual(try file.readAudioData(), pieces[0] + pieces[1] + pieces[2] + pieces[3] + [UInt8](repeating: 0, count: 20) + pieces[4])
        XCTAssertEqual(file.markers, [CAFMarker(framePosition: 3_500, name: "gap")])
    }

    /// A stream of small appends is written in pieces that each end on a page of the file, so no
    /// page is written half full and then again; what is read back is every byte in order.
    func testEveryWriteBeforeAFlushEndsOnAPage() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("pages.caf")
        let writer = try CAFWriter(path: path, format: format, info: [], writeBehind: 8_192)
        var appended: [UInt8] = []
        var sizes: Set<Int> = []
        for piece in 0..<300 {
            let bytes = [UInt8]((0..<(322 + piece % 7 * 2)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ piece) })
            try writer.append(bytes, frameCount: bytes.count / 2)
            appended += bytes
            sizes.insert(try fileBytes(path).count)
        }
        let header = sizes.min() ?? 0
        XCTAssertGreaterThan(sizes.count, 5, "it wrote as it went")
        for size in sizes where size != header {
            XCTAssertEqual(size % 4_096, 0, "a write ended inside a page, at \(size)")
        }
        try writer.finalize()
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), appended)
    }

    /// An append whose write fails (a full disk) counts for nothing, whether its audio or what was
    /// gathered with it failed: once there is room again the same append goes in, and the file
    /// holds every byte appended, once, in order.
    func testAnAppendThatFindsTheDiskFullCountsForNothingAndCanBeRepeated() throws {
        let scratch = try ScratchDirectory()
        let small = scratch.file("small")
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", small])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", [small]) }
        let filler = small + "/filler"
        let writer = try CAFWriter(path: small + "/full.caf", format: format, info: [], writeBehind: 8_192)
        XCTAssertTrue(FileManager.default.createFile(atPath: filler, contents: Data(count: 36 << 10)))
        var appended: [UInt8] = []
        var refused: [UInt8]?
        for piece in 0..<200 {
            let bytes = [UInt8]((0..<1_282).map { UInt8(truncatingIfNeeded: $0 &+ piece &* 5) })
            let before = writer.dataByteCount
            do {
                try writer.append(bytes, frameCount: 641)
                appended += bytes
            } catch {
                XCTAssertEqual(writer.dataByteCount, before, "a refused append is not counted")
                refused = bytes
                break
            }
        }
        let again = try XCTUnwrap(refused, "the disk filled up")
        try FileManager.default.removeItem(atPath: filler)
        try writer.append(again, frameCount: 641)
        appended += again
        try writer.finalize()
        XCTAssertEqual(try CAFFile.read(path: small + "/full.caf").readAudioData(), appended)
    }

    /// An append whose audio reached the file but whose packet sizes could not be written to the
    /// journal counts for nothing either: the gathered audio it wrote stays, its own is written
    /// again when it is repeated, and the file holds every packet once, in order.
    func testAnAppendWhoseJournalWriteFailsAfterItsAudioWasWrittenCountsForNothing() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("journal.caf")
        let opus = StreamFormat.opus(channels: 1, framesPerPacket: 960)
        let writer = try CAFWriter(path: path, format: opus, info: [], writeBehind: 8_192)
        let header = try fileBytes(path).count
        // 600 packets of 10 bytes: the second append passes the write-behind (its audio is written
        // to a page) and gathers 1,200 packet sizes (past the journal's 4 KiB, so they are written).
        let pieces = (0..<3).map { piece in [UInt8]((0..<6_000).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ piece &* 101) }) }
        let sizes = [UInt32](repeating: 10, count: 600)
        try writer.append(pieces[0], packetSizes: sizes, frameCount: 600 * 960)
        let aside = scratch.file("journal-aside")
        try FileManager.default.moveItem(atPath: writer.journalPath, toPath: aside)
        XCTAssertThrowsError(try writer.append(pieces[1], packetSizes: sizes, frameCount: 600 * 960))
        XCTAssertGreaterThan(try fileBytes(path).count, header, "its audio did reach the file")
        XCTAssertEqual(writer.dataByteCount, 6_000, "but the refused append is not counted")
        XCTAssertEqual(writer.packetCount, 600)
        try FileManager.default.moveItem(atPath: aside, toPath: writer.journalPath)
        try writer.append(pieces[1], packetSizes: sizes, frameCount: 600 * 960)
        try writer.append(pieces[2], packetSizes: sizes, frameCount: 600 * 960)
        try writer.finalize()
        let file = try CAFFile.read(path: path)
        XCTAssertEqual(try file.readAudioData(), Array(pieces.joined()))
        XCTAssertEqual(file.packetTable?.packetSizes, [UInt32](repeating: 10, count: 1_800))
    }

    /// Starting the writeback of what was written (`writebackAfter`, a hint to the kernel) changes
    /// nothing in the file, with the descriptor held or opened for each write, across a resume.
    func testStartingWritebackChangesNothingInTheFile() throws {
        let scratch = try ScratchDirectory()
        let pieces = (0..<40).map { piece in [UInt8]((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ piece) }) }
        var written: [[UInt8]] = []
        for (name, holding, after) in [("plain", true, 0), ("held", true, 8_192), ("loose", false, 4_096), ("every write", false, 1)] {
            let path = scratch.file("\(name).caf")
            let writer = try CAFWriter(path: path, format: format, info: [], writeBehind: 5_000, holdingDescriptor: holding)
            writer.writebackAfter = after
            for piece in pieces.prefix(25) { try writer.append(piece, frameCount: 1_500) }
            try writer.synchronize()
            writer.close()
            let resumed = try CAFWriter.resume(path: path, writeBehind: 5_000, holdingDescriptor: holding)
            resumed.writebackAfter = after
            for piece in pieces.dropFirst(25) { try resumed.append(piece, frameCount: 1_500) }
            try resumed.finalize()
            written.append(try fileBytes(path))
            XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), Array(pieces.joined()), name)
        }
        XCTAssertEqual(Set(written).count, 1, "the four files are byte for byte the same")
    }

    func testWhatIsGatheredIsLostInACrashLikeAnyUnsyncedWriteAndTheRestResumes() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("crash.caf")
        let opus = StreamFormat.opus(channels: 1, framesPerPacket: 960)
        var writer: CAFWriter? = try CAFWriter(path: path, format: opus, info: [], writeBehind: 64)
        try writer?.append([UInt8](repeating: 1, count: 40), packetSizes: [20, 20], frameCount: 1_920)
        try writer?.synchronize()
        try writer?.append([UInt8](repeating: 2, count: 30), packetSizes: [30], frameCount: 960)
        writer = nil  // the process dies with 30 bytes and one packet size gathered
        let resumed = try CAFWriter.resume(path: path)
        XCTAssertEqual(resumed.packetCount, 2)
        XCTAssertEqual(resumed.dataByteCount, 40)
        try resumed.finalize()
        XCTAssertEqual(try CAFFile.read(path: path).packetTable?.packetSizes, [20, 20])
    }

    func testAWriterWithoutItsDescriptorOpensTheFileOnlyToWriteIt() throws {
        let scratch = try ScratchDirectory()
        let held = try CAFWriter(path: scratch.file("held.caf"), format: format, info: [])
        let loose = try CAFWriter(path: scratch.file("loose.caf"), format: format, info: [], holdingDescriptor: false)
        for _ in 0..<3 {
            try held.append([UInt8](repeating: 7, count: 64), frameCount: 32)
            try loose.append([UInt8](repeating: 7, count: 64), frameCount: 32)
        }
        try loose.synchronize()
        let open = Self.openFiles()
        XCTAssertTrue(open.contains(held.path), "\(open)")
        XCTAssertFalse(open.contains(loose.path), "\(open)")
        XCTAssertFalse(open.contains(held.journalPath) || open.contains(loose.journalPath), "journals are opened only to write: \(open)")
        XCTAssertEqual(try CAFFile.read(path: loose.path).dataSize, 192)

        held.releaseDescriptor()
        XCTAssertFalse(Self.openFiles().contains(held.path), "released")
        try held.append([UInt8](repeating: 8, count: 64), frameCount: 32)
        XCTAssertFalse(Self.openFiles().contains(held.path), "written without keeping it")
        held.holdDescriptor()
        try held.append([UInt8](repeating: 9, count: 64), frameCount: 32)
        XCTAssertTrue(Self.openFiles().contains(held.path), "held again from the next write")
        try held.finalize()
        try loose.finalize()
        XCTAssertFalse(Self.openFiles().contains(held.path))
        XCTAssertEqual(try CAFFile.read(path: held.path).readAudioData(),
                       [UInt8](repeating: 7, count: 192) + [UInt8](repeating: 8, count: 64) + [UInt8](repeating: 9, count: 64))
    }

    /// With `releasesWrittenBackPages`, the audio handed to writeback the time before leaves the
    /// page cache when writeback is next started (once it is clean), and the file is unchanged;
    /// without it, the pages stay cached.
    func testAudioHandedToWritebackLeavesThePageCacheOnlyWhenAskedTo() throws {
        let scratch = try ScratchDirectory()
        if try ToolRunner.run("stat", ["-f", "-c", "%T", scratch.path]).outputText.contains("tmpfs") {
            throw XCTSkip("the scratch folder is on tmpfs, whose pages are the file itself and are never released")
        }
        let pieces = (0..<40).map { piece in [UInt8]((0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ piece) }) }
        var cached: [Bool: [Bool]] = [:]
        for releasing in [false, true] {
            let path = scratch.file("release-\(releasing).caf")
            let writer = try CAFWriter(path: path, format: format, info: [], writeBehind: 8_192)
            writer.writebackAfter = 32_768
            writer.releasesWrittenBackPages = releasing
            // 40,000 bytes: writeback is started for the first 32 KiB, then everything is made
            // durable, so those pages are clean; the next 40,000 start writeback again.
            for piece in pieces.prefix(20) { try writer.append(piece, frameCount: 1_000) }
            try writer.synchronize()
            for piece in pieces.dropFirst(20) { try writer.append(piece, frameCount: 1_000) }
            cached[releasing] = try Self.cachedPages(path, count: 8)
            try writer.finalize()
            XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), Array(pieces.joined()))
        }
        XCTAssertEqual(cached[false], [Bool](repeating: true, count: 8), "kept: the first 32 KiB are still cached")
        XCTAssertEqual(cached[true], [Bool](repeating: false, count: 8), "released: none of the first 32 KiB is cached")
    }

    /// Whether each of the first `count` pages of the file is in the page cache (`mincore`).
    private static func cachedPages(_ path: String, count: Int) throws -> [Bool] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw CocoaError(.fileReadNoPermission) }
        defer { close(descriptor) }
        let length = count * 4_096
        guard let mapped = mmap(nil, length, PROT_READ, MAP_SHARED, descriptor, 0), mapped != MAP_FAILED else {
            throw CocoaError(.fileReadUnknown)
        }
        defer { munmap(mapped, length) }
        var vector = [UInt8](repeating: 0, count: count)
        guard mincore(mapped, length, &vector) == 0 else { throw CocoaError(.fileReadUnknown) }
        return vector.map { $0 & 1 == 1 }
    }

    /// The paths this process has open.
    private static func openFiles() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") })
    }
}
