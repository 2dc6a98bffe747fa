import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// Malformed and hostile files give typed errors, never a crash or a huge allocation.
final class HostileFileTests: XCTestCase {
    private func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    private func chunk(_ type: String, size: Int64? = nil, _ body: [UInt8]) -> [UInt8] {
        Array(type.utf8) + bigEndian(size ?? Int64(body.count)) + body
    }

    private let fileHeader = Array("caff".utf8) + [0, 1, 0, 0]

    private func desc(format: String = "lpcm", rate: Double = 8_000, flags: UInt32 = 2, bytesPerPacket: UInt32 = 2,
                      framesPerPacket: UInt32 = 1, channels: UInt32 = 1, bits: UInt32 = 16) -> [UInt8] {
        chunk("desc", bigEndian(rate.bitPattern) + Array(format.utf8) + bigEndian(flags) + bigEndian(bytesPerPacket)
            + bigEndian(framesPerPacket) + bigEndian(channels) + bigEndian(bits))
    }

    private func opusDesc() -> [UInt8] {
        desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 960, channels: 1, bits: 0)
    }

    private func data(_ audio: [UInt8]) -> [UInt8] {
        chunk("data", bigEndian(UInt32(0)) + audio)
    }

    private func pakt(packets: Int64, entries: [UInt8]) -> [UInt8] {
        chunk("pakt", bigEndian(packets) + bigEndian(Int64(0)) + bigEndian(Int32(0)) + bigEndian(Int32(0)) + entries)
    }

    private var scratch: ScratchDirectory?

    override func setUpWithError() throws {
        scratch = try ScratchDirectory()
    }

    override func tearDown() {
        scratch = nil
    }

    private func read(_ bytes: [UInt8]) throws -> CAFFile {
        let path = try XCTUnwrap(scratch).file("hostile.caf")
        try writeFile(path, bytes)
        return try CAFFile.read(path: path)
    }

    private func expect(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line, _ matches: (CAFError) -> Bool) {
        assertCAFError(try read(bytes), file: file, line: line, matches)
    }

    func testNotACAFFile() {
        expect(Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVE".utf8)) { if case .notCAF = $0 { return true } else { return false } }
        expect([]) { if case .notCAF = $0 { return true } else { return false } }
        expect(Array("caff".utf8) + [0, 2, 0, 0] + desc()) {
            if case .unsupportedVersion(_, 2) = $0 { return true } else { return false }
        }
    }

    func testTruncatedHeadersAndChunks() {
        expect(Array(fileHeader.prefix(5))) { if case .notCAF = $0 { return true } else { return false } }
        expect(fileHeader + Array(desc().prefix(7))) { if case .truncatedChunk = $0 { return true } else { return false } }
        expect(fileHeader + Array(desc().prefix(30))) { if case .truncatedChunk(_, "desc", 8) = $0 { return true } else { return false } }
        expect(fileHeader + desc() + Array("data".utf8) + bigEndian(Int64(-1)) + [0, 0]) {
            if case .truncatedChunk(_, "data", _) = $0 { return true } else { return false }
        }
    }

    func testHugeAndNegativeChunkSizes() {
        expect(fileHeader + desc() + chunk("info", size: Int64.max, [0, 0, 0, 1])) {
            if case .truncatedChunk(_, "info", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + chunk("data", size: Int64.max - 3, [0, 0, 0, 0])) {
            if case .truncatedChunk(_, "data", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + chunk("free", size: -5, []) + data([0, 0])) {
            if case .malformedChunk(_, "free", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + chunk("data", size: 2, [0, 0])) {
            if case .malformedChunk(_, "data", _) = $0 { return true } else { return false }
        }
    }

    func testMissingAndMisplacedChunks() {
        expect(fileHeader) { if case .missingChunk(_, "desc") = $0 { return true } else { return false } }
        expect(fileHeader + data([0, 0]) + desc()) { if case .missingChunk(_, "desc") = $0 { return true } else { return false } }
        expect(fileHeader + desc()) { if case .missingChunk(_, "data") = $0 { return true } else { return false } }
        expect(fileHeader + opusDesc() + data([1, 2, 3])) { if case .missingChunk(_, "pakt") = $0 { return true } else { return false } }
        expect(fileHeader + desc() + data([0, 0]) + data([0, 0])) {
            if case .malformedChunk(_, "data", _) = $0 { return true } else { return false }
        }
    }

    func testUnusableDescriptions() {
        expect(fileHeader + desc(channels: 0) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(rate: .nan) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(rate: -8_000) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(bits: 12) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(bytesPerPacket: 1) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(framesPerPacket: 2) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + desc(flags: 0x40) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        // Found by fuzz-caf: a container this wide overflowed the bits check and stopped the process.
        expect(fileHeader + desc(bytesPerPacket: 0xFFFF_FFFF, channels: 1, bits: 16) + data([])) { if case .unsupportedDescription = $0 { return true } else { return false } }
        expect(fileHeader + chunk("desc", [0, 0, 0]) + data([])) { if case .malformedChunk(_, "desc", _) = $0 { return true } else { return false } }
    }

    /// Issue 27, item 8: descriptions whose fields contradict each other or claim absurd sizes are
    /// refused by the reader, before anything sizes a buffer or a loop by them.
    func testDescriptionsThatContradictThemselvesAreRefused() {
        func reason(_ bytes: [UInt8]) -> String? {
            do {
                _ = try read(bytes)
                return nil
            } catch let error as CAFError {
                guard case .unsupportedDescription(_, let reason) = error else { return "\(error)" }
                return reason
            } catch {
                return "\(error)"
            }
        }
        // A float-flagged integer: 16-bit samples cannot be floats (export indexed 4 bytes a sample).
        XCTAssertEqual(reason(fileHeader + desc(flags: 3) + data([0, 0])), "float samples are 32 or 64 bits, not 16")
        XCTAssertEqual(reason(fileHeader + desc(flags: 3, bytesPerPacket: 8, bits: 32) + data([])), "float samples fill their container: 8 bytes per packet hold 1 channels of 32 bits")
        // Four billion channels: the Opus decoder's buffer was sized by it (98 TB).
        XCTAssertEqual(reason(fileHeader + desc(bytesPerPacket: 0xFFFF_FFFF, channels: 0xFFFF_FFFF, bits: 8) + data([])), "4294967295 channels is more than the 1024 a recording can have")
        XCTAssertEqual(reason(fileHeader + desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 960, channels: 0xFFFF_FFFF, bits: 0) + data([])), "4294967295 channels is more than the 1024 a recording can have")
        XCTAssertEqual(reason(fileHeader + desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 960, channels: 256, bits: 0) + data([])), "Opus carries at most 255 channels, not 256")
        XCTAssertEqual(reason(fileHeader + desc(rate: 0.25) + data([])), "the sample rate 0.25 Hz is outside 1 to 1000000 Hz")
        XCTAssertEqual(reason(fileHeader + desc(rate: 1e300) + data([])), "the sample rate 1e+300 Hz is outside 1 to 1000000 Hz")
        XCTAssertEqual(reason(fileHeader + desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 1_000, channels: 1, bits: 0) + data([])), "Opus packets last 2.5 ms steps up to 120 ms (a multiple of 120 frames up to 5760 at 48000 Hz), not 1000 frames")
        XCTAssertEqual(reason(fileHeader + desc(format: "opus", rate: 44_100, flags: 0, bytesPerPacket: 0, framesPerPacket: 960, channels: 1, bits: 0) + data([])), "Opus runs at 8000, 12000, 16000, 24000 or 48000 Hz, not 44100.0")
        XCTAssertEqual(reason(fileHeader + desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 40, framesPerPacket: 960, channels: 1, bits: 0) + data([])), "Opus packets vary in size and have no bits per sample, so bytes per packet (40) and bits (0) must be 0")
        XCTAssertEqual(reason(fileHeader + desc(format: "aac ", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 0xFFFF_FFFF, channels: 2, bits: 0) + data([])), "4294967295 frames per packet is more than 1048576")
        XCTAssertEqual(reason(fileHeader + desc(format: "aac ", rate: 48_000, flags: 0, bytesPerPacket: 0xFFFF_FFFF, framesPerPacket: 1024, channels: 2, bits: 0) + data([])), "4294967295 bytes per packet is more than 16777216")
    }

    /// A packet table may not describe more frames than its packets hold, nor more packets than the
    /// data holds, nor frame counts that overflow.
    func testPacketTablesThatClaimMoreThanTheFileHoldsAreRefused() throws {
        func pakt(packets: Int64, valid: Int64, priming: Int32 = 0, remainder: Int32 = 0, entries: [UInt8]) -> [UInt8] {
            chunk("pakt", bigEndian(packets) + bigEndian(valid) + bigEndian(priming) + bigEndian(remainder) + entries)
        }
        func reason(_ bytes: [UInt8]) -> String? {
            do {
                _ = try read(bytes)
                return nil
            } catch let error as CAFError {
                guard case .malformedChunk(_, "pakt", let reason) = error else { return "\(error)" }
                return reason
            } catch {
                return "\(error)"
            }
        }
        // Two 960-frame packets hold 1920 frames, not 2^62 valid ones.
        XCTAssertEqual(reason(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, valid: 1 << 62, entries: [1, 2])),
                       "it claims 4611686018427387904 valid, 0 priming and 0 remainder frames but its 2 packets hold 1920")
        XCTAssertEqual(reason(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, valid: 1_000, priming: 900, remainder: 100, entries: [1, 2])),
                       "it claims 1000 valid, 900 priming and 100 remainder frames but its 2 packets hold 1920")
        XCTAssertEqual(reason(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, valid: Int64.max, priming: Int32.max, entries: [1, 2])),
                       "it claims 9223372036854775807 valid, 2147483647 priming and 0 remainder frames but its 2 packets hold 1920")
        // Constant-size packets: the table cannot list more than the data holds.
        let constant = desc(format: "ima4", rate: 48_000, flags: 0, bytesPerPacket: 34, framesPerPacket: 64, channels: 1, bits: 0)
        XCTAssertEqual(reason(fileHeader + constant + data([UInt8](repeating: 0, count: 68)) + pakt(packets: 3, valid: 0, entries: [])),
                       "it claims 3 packets but the data chunk holds 2 of 34 bytes")
        let file = try read(fileHeader + constant + data([UInt8](repeating: 0, count: 68)) + pakt(packets: 2, valid: 100, priming: 10, remainder: 18, entries: []))
        XCTAssertEqual(file.packetCount, 2)
        XCTAssertEqual(file.totalFrames, 128)
        // The writer's own files keep reading: valid + priming + remainder = every frame.
        XCTAssertNil(reason(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, valid: 1_920 - 312 - 8, priming: 312, remainder: 8, entries: [1, 2])))
    }

    /// Variable sizes and durations take two bytes an entry at least: a count near 2^63 overflowed
    /// the room check and stopped the process.
    func testAPacketCountThatOverflowsTheRoomCheckIsRefused() {
        let variable = desc(format: "opus", rate: 48_000, flags: 0, bytesPerPacket: 0, framesPerPacket: 0, channels: 1, bits: 0)
        expect(fileHeader + variable + data([1, 2, 3]) + pakt(packets: Int64.max, entries: [1, 2])) {
            if case .malformedChunk(_, "pakt", "it claims 9223372036854775807 packets but has room for at most 1") = $0 { return true } else { return false }
        }
    }

    func testChannelLayoutsThatRunPastTheirChunkAreRefused() {
        let layout = bigEndian(UInt32(0)) + bigEndian(UInt32(0)) + bigEndian(UInt32(3)) + [UInt8](repeating: 0, count: 40)
        expect(fileHeader + desc() + chunk("chan", layout) + data([])) {
            if case .malformedChunk(_, "chan", "it lists 3 channel descriptions (72 bytes) but has 52") = $0 { return true } else { return false }
        }
    }

    /// The same bytes read from memory and from a file give the same recording and audio.
    func testReadingFromMemoryMatchesReadingTheFile() throws {
        let bytes = fileHeader + desc(bytesPerPacket: 4, channels: 2)
            + chunk("info", bigEndian(UInt32(1)) + Array("title\u{0}x\u{0}".utf8)) + data([1, 2, 3, 4, 5, 6, 7, 8, 9])
        let fromFile = try read(bytes)
        let fromMemory = try CAFFile.read(bytes: bytes, name: "memory.caf")
        XCTAssertEqual(fromMemory.path, "memory.caf")
        XCTAssertEqual(fromMemory.format, fromFile.format)
        XCTAssertEqual(fromMemory.totalFrames, 2)
        XCTAssertEqual(fromMemory.totalFrames, fromFile.totalFrames)
        XCTAssertEqual(try fromMemory.readAudioData(), try fromFile.readAudioData())
        XCTAssertEqual(try fromMemory.readAudioData(), [1, 2, 3, 4, 5, 6, 7, 8, 9])
        XCTAssertEqual(try fromMemory.readPacket(1), [5, 6, 7, 8])
        XCTAssertEqual(fromMemory.info.map(\.value), ["x"])
        assertCAFError(try CAFFile.read(bytes: Array(bytes.prefix(30)), name: "cut.caf")) {
            if case .truncatedChunk("cut.caf", "desc", 8) = $0 { return true } else { return false }
        }
    }

    func testBadPacketTables() {
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, entries: [0xFF, 0xFF])) {
            if case .badVarint(_, 0) = $0 { return true } else { return false }
        }
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, entries: [0x01, 0x82])) {
            if case .badVarint(_, 1) = $0 { return true } else { return false }
        }
        let tooWide = [UInt8](repeating: 0xFF, count: 12) + [0x01]
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 1, entries: tooWide)) {
            if case .badVarint = $0 { return true } else { return false }
        }
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 1 << 40, entries: [1, 2])) {
            if case .malformedChunk(_, "pakt", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: -1, entries: [])) {
            if case .malformedChunk(_, "pakt", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + pakt(packets: 2, entries: [2, 2])) {
            if case .malformedChunk(_, "pakt", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + opusDesc() + data([1, 2, 3]) + chunk("pakt", [0, 0, 0])) {
            if case .malformedChunk(_, "pakt", _) = $0 { return true } else { return false }
        }
    }

    func testBadInfoMarkerAndStringChunks() {
        expect(fileHeader + desc() + chunk("info", bigEndian(UInt32.max) + [0, 0]) + data([])) {
            if case .malformedChunk(_, "info", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + chunk("info", bigEndian(UInt32(1)) + Array("key".utf8)) + data([])) {
            if case .malformedChunk(_, "info", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + chunk("info", bigEndian(UInt32(1)) + [0x61, 0, 0xFF, 0xFE, 0]) + data([])) {
            if case .malformedChunk(_, "info", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + data([]) + chunk("mark", bigEndian(UInt32(0)) + bigEndian(UInt32.max))) {
            if case .malformedChunk(_, "mark", _) = $0 { return true } else { return false }
        }
        let farString = bigEndian(UInt32(1)) + bigEndian(UInt32(1)) + bigEndian(Int64.max) + [0x41, 0]
        expect(fileHeader + desc() + data([]) + chunk("strg", farString)) {
            if case .malformedChunk(_, "strg", _) = $0 { return true } else { return false }
        }
        expect(fileHeader + desc() + data([]) + chunk("chan", [0, 0])) {
            if case .malformedChunk(_, "chan", _) = $0 { return true } else { return false }
        }
    }

    func testUnknownChunksAreSkipped() throws {
        let file = try read(fileHeader + desc() + chunk("uuid", [UInt8](repeating: 7, count: 24)) + chunk("free", [0, 0]) + data([1, 2, 3, 4]))
        XCTAssertEqual(try file.readAudioData(), [1, 2, 3, 4])
    }

    /// Every truncation and many random byte changes of a real file: each read either succeeds or
    /// throws a `CAFError`.
    func testTruncatedAndCorruptedVariantsOfARealFileNeverCrash() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("real.caf")
        let writer = try CAFWriter(
            path: path, format: .opus(channels: 2, framesPerPacket: 960), info: [(key: "title", value: "fuzz")],
            magicCookie: [1, 2, 3, 4], primingFrames: 312)
        try writer.append([UInt8](repeating: 0xAB, count: 300), packetSizes: [100, 150, 50], frameCount: 2_880)
        try writer.addMarker(framePosition: 10, name: "mark")
        try writer.finalize(remainderFrames: 20)
        let original = try fileBytes(path)
        let variant = scratch.file("variant.caf")
        var outcomes = (read: 0, rejected: 0)
        func attempt(_ bytes: [UInt8]) throws {
            try writeFile(variant, bytes)
            do {
                let file = try CAFFile.read(path: variant)
                _ = try? file.readAudioData()
                if let count = file.packetCount, count > 0 { _ = try? file.readPacket(count - 1) }
                outcomes.read += 1
            } catch {
                // Typed throws: the only thing that can arrive here is a CAFError.
                outcomes.rejected += 1
            }
        }
        for length in 0..<original.count { try attempt(Array(original.prefix(length))) }
        var generator = SplitMix64(seed: 2024)
        for _ in 0..<400 {
            var bytes = original
            for _ in 0..<(1 + Int(generator.next() % 4)) {
                bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            try attempt(bytes)
        }
        XCTAssertGreaterThan(outcomes.rejected, 0)
        XCTAssertGreaterThan(outcomes.read, 0)
    }
}
