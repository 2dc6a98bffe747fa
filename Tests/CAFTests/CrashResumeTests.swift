import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// A receiver crash, then `resume(keepingPackets:)` or `CAFRecovery.recover`: the finished file holds
/// exactly the acknowledged audio followed by what came after.
final class CrashResumeTests: XCTestCase {
    func testPCMResumeKeepsTheAcknowledgedFramesAndContinues() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("pcm.caf")
        let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 2, sample: .s16)
        let signal = TestSignal.integerPCM(bits: 16, channels: 2, frames: 3_000, seed: 42)
        let bytesPerFrame = 4
        let writer = try CAFWriter(path: path, format: format, info: [(key: "title", value: "resumed")])
        try writer.append(Array(signal.bytes[0..<(2_000 * bytesPerFrame)]), frameCount: 2_000)
        try writer.synchronize()
        try writer.addMarker(framePosition: 1_000, name: "gap before the crash")
        try writer.addMarker(framePosition: 1_900, name: "past the acknowledged audio")
        try writer.synchronize()
        writer.close()
        try appendGarbage([0xEE, 0xEE, 0xEE], to: path)  // a torn write

        let resumed = try CAFWriter.resume(path: path, keepingPackets: 1_500)
        XCTAssertEqual(resumed.packetCount, 1_500)
        XCTAssertEqual(resumed.frameCount, 1_500)
        XCTAssertEqual(resumed.durablePacketCount, 1_500)
        XCTAssertEqual(resumed.dataByteCount, Int64(1_500 * bytesPerFrame))
        XCTAssertEqual(resumed.markers, [CAFMarker(framePosition: 1_000, name: "gap before the crash")])
        try resumed.append(Array(signal.bytes[(1_500 * bytesPerFrame)...]), frameCount: 1_500)
        try resumed.finalize()

        let file = try CAFFile.read(path: path)
        XCTAssertEqual(try file.readAudioData(), signal.bytes, "exactly the kept frames, then the new ones")
        XCTAssertEqual(file.markers, [CAFMarker(framePosition: 1_000, name: "gap before the crash")])
        XCTAssertEqual(file.info.first?.value, "resumed")
        XCTAssertEqual(try SndFileReader.read(path: path).nativeIntegerSamples, signal.samples)
    }

    func testPCMResumeWithoutACountKeepsEveryWholeFrame() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("pcm.caf")
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 8_000, channels: 1, sample: .s24), info: [])
        try writer.append([1, 2, 3, 4, 5, 6], frameCount: 2)
        writer.close()
        try appendGarbage([7, 8], to: path)
        let resumed = try CAFWriter.resume(path: path)
        XCTAssertEqual(resumed.frameCount, 2)
        try resumed.append([9, 10, 11], frameCount: 1)
        try resumed.finalize()
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), [1, 2, 3, 4, 5, 6, 9, 10, 11])
    }

    func testResumeIsIdempotent() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("twice.caf")
        let opus = try OpusPackets.make(count: 10, channels: 1)
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], primingFrames: opus.lookahead)
        try writer.append(opus.joined, packetSizes: opus.sizes, frameCount: 9_600)
        writer.close()
        let first = try CAFWriter.resume(path: path, keepingPackets: 6)
        first.close()
        let afterFirst = try fileBytes(path)
        let second = try CAFWriter.resume(path: path, keepingPackets: 6)
        XCTAssertEqual(second.packetCount, 6)
        XCTAssertEqual(try fileBytes(path), afterFirst)
        second.close()
    }

    func testOpusResumeCutsAPartialPacketAndContinuesAtTheAcknowledgedPacket() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("opus.caf")
        let opus = try OpusPackets.make(count: 30, channels: 2)
        let format = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        let writer = try CAFWriter(path: path, format: format, info: [], magicCookie: opus.opusHead, primingFrames: opus.lookahead)
        let firstTwenty = Array(opus.packets[0..<20])
        try writer.append(firstTwenty.flatMap { $0 }, packetSizes: firstTwenty.map { UInt32($0.count) }, frameCount: 20 * 960)
        try writer.synchronize()
        XCTAssertEqual(writer.durablePacketCount, 20)
        writer.close()
        try appendGarbage(Array(opus.packets[20].prefix(5)), to: path)  // half a packet

        assertCAFError(try CAFWriter.resume(path: path, keepingPackets: 21)) {
            if case .packetsUnavailable(_, 21, 20) = $0 { return true } else { return false }
        }
        let resumed = try CAFWriter.resume(path: path, keepingPackets: 15)
        XCTAssertEqual(resumed.packetCount, 15)
        // What a segmented stream reads back for its next file's pre-roll: the last kept packets.
        XCTAssertEqual(try resumed.lastPackets(5), Array(opus.packets[10..<15]))
        XCTAssertEqual(try resumed.lastPackets(50), Array(opus.packets[0..<15]))
        XCTAssertEqual(resumed.frameCount, 15 * 960)
        XCTAssertEqual(resumed.primingFrames, opus.lookahead)
        let rest = Array(opus.packets[15...])
        try resumed.append(rest.flatMap { $0 }, packetSizes: rest.map { UInt32($0.count) }, frameCount: rest.count * 960)
        try resumed.finalize(remainderFrames: 200)

        let file = try CAFFile.read(path: path)
        let table = try XCTUnwrap(file.packetTable)
        XCTAssertEqual(table.packetSizes, opus.sizes)
        XCTAssertEqual(table.primingFrames, Int32(opus.lookahead))
        XCTAssertEqual(table.remainderFrames, 200)
        XCTAssertEqual(table.validFrames, Int64(30 * 960 - opus.lookahead - 200))
        XCTAssertEqual(try file.readAudioData(), opus.joined)
        XCTAssertEqual(file.magicCookie, opus.opusHead)
        XCTAssertEqual(try FFmpegTools.packetSizes(path), opus.packets.map(\.count))
    }

    func testOpusRecoveryReplaysTheJournalIntoAPacketTable() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("opus.caf")
        let opus = try OpusPackets.make(count: 25, channels: 2)
        let writer = try CAFWriter(
            path: path, format: .opus(channels: 2, framesPerPacket: 960), info: [], primingFrames: opus.lookahead)
        for packet in opus.packets {
            try writer.append(packet, packetSizes: [UInt32(packet.count)], frameCount: 960)
        }
        try writer.addMarker(framePosition: 4_800, name: "overrun")
        try writer.synchronize()
        writer.close()
        try appendGarbage([0xFC, 0xFF, 0xFE], to: path)
        try appendGarbage([0x53, 0x00, 0x00], to: CAFWriter.journalPath(for: path))  // a torn journal record

        let unreadable = try ToolRunner.run("ffprobe", ["-v", "error", "-show_streams", path])
        XCTAssertFalse(unreadable.succeeded, "without its packet table an Opus CAF cannot be read")

        let report = try CAFRecovery.recover(path: path)
        XCTAssertEqual(report.packetCount, 25)
        XCTAssertEqual(report.frameCount, 25 * 960)
        XCTAssertEqual(report.droppedDataBytes, 3)
        XCTAssertEqual(report.markerCount, 1)
        let file = try CAFFile.read(path: path)
        let table = try XCTUnwrap(file.packetTable)
        XCTAssertEqual(table.packetSizes, opus.sizes)
        XCTAssertEqual(table.primingFrames, Int32(opus.lookahead))
        XCTAssertEqual(table.remainderFrames, 0, "the remainder is unknown after a crash")
        XCTAssertEqual(file.markers, [CAFMarker(framePosition: 4_800, name: "overrun")])
        XCTAssertEqual(try file.readAudioData(), opus.joined)
        XCTAssertEqual(try FFmpegTools.packetSizes(path), opus.packets.map(\.count))
        XCTAssertTrue(try CAFRecovery.recover(path: path).wasAlreadyFinalized)
    }

    func testRecoveryKeepsOnlyPacketsTheFileFullyHolds() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("short.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [])
        try writer.append([1, 2, 3, 4, 5, 6], packetSizes: [2, 4], frameCount: 1_920)
        writer.close()
        // The journal lists both packets, but the data lost its last byte (written, never synchronized).
        let length = try fileBytes(path).count
        XCTAssertEqual(truncate(path, off_t(length - 1)), 0)
        let report = try CAFRecovery.recover(path: path)
        XCTAssertEqual(report.packetCount, 1)
        XCTAssertEqual(report.droppedDataBytes, 3)
        XCTAssertEqual(try CAFFile.read(path: path).packetTable?.packetSizes, [2])
    }

    func testAnInterruptedFinalizeIsCompletedByRecovery() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("interrupted.caf")
        let opus = try OpusPackets.make(count: 12, channels: 1)
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], primingFrames: opus.lookahead)
        try writer.append(opus.joined, packetSizes: opus.sizes, frameCount: 12 * 960)
        try writer.addMarker(framePosition: 960, name: "m")
        try writer.synchronize()
        let journal = try fileBytes(writer.journalPath)
        try writer.finalize(remainderFrames: 0)
        let finished = try fileBytes(path)
        // The crash came after the data size was set, in the middle of writing the packet table.
        let dataEnd = Int(try CAFFile.read(path: path).dataOffset) + opus.joined.count
        try writeFile(path, Array(finished[0..<(dataEnd + 20)]))
        try writeFile(CAFWriter.journalPath(for: path), journal)
        assertCAFError(try CAFFile.read(path: path)) { if case .truncatedChunk = $0 { return true } else { return false } }

        let report = try CAFRecovery.recover(path: path)
        XCTAssertFalse(report.wasAlreadyFinalized)
        XCTAssertEqual(try fileBytes(path), finished, "recovery writes exactly what finalize would have")
    }

    func testAFinishedFileCanBeReopenedAndContinued() throws {
        let scratch = try ScratchDirectory()
        // PCM with a marker: finish, reopen, append, finish again = one file with all of it.
        let pcmPath = scratch.file("final.caf")
        let pcm = TestSignal.integerPCM(bits: 16, channels: 1, frames: 3_000, seed: 7)
        let writer = try CAFWriter(path: pcmPath, format: .linearPCM(sampleRate: 8_000, channels: 1, sample: .s16), info: [("title", "t")])
        try writer.append(Array(pcm.bytes[0..<2_000]), frameCount: 1_000)
        try writer.addMarker(framePosition: 500, name: "gap")
        try writer.finalize()
        let reopened = try CAFWriter.resume(path: pcmPath)
        XCTAssertEqual(reopened.frameCount, 1_000)
        XCTAssertFalse(try CAFFile.read(path: pcmPath).isFinalized, "reopened files are unfinished until finalized again")
        try reopened.append(Array(pcm.bytes[2_000...]), frameCount: 2_000)
        try reopened.finalize()
        let pcmFile = try CAFFile.read(path: pcmPath)
        XCTAssertTrue(pcmFile.isFinalized)
        XCTAssertEqual(try pcmFile.readAudioData(), pcm.bytes)
        XCTAssertEqual(pcmFile.markers, [CAFMarker(framePosition: 500, name: "gap")])
        XCTAssertEqual(try SndFileReader.read(path: pcmPath).frames, 3_000)

        // Opus: the packet table comes back from the finished file's pakt chunk.
        let opusPath = scratch.file("final-opus.caf")
        let opus = try OpusPackets.make(count: 6, channels: 2)
        let opusWriter = try CAFWriter(path: opusPath, format: .opus(channels: 2, framesPerPacket: 960), info: [], primingFrames: 312)
        for packet in opus.packets[0..<4] { try opusWriter.append(packet, packetSizes: [UInt32(packet.count)], frameCount: 960) }
        try opusWriter.finalize(remainderFrames: 100)
        let opusReopened = try CAFWriter.resume(path: opusPath, keepingPackets: 3)
        XCTAssertEqual(opusReopened.packetCount, 3)
        for packet in opus.packets[3..<6] { try opusReopened.append(packet, packetSizes: [UInt32(packet.count)], frameCount: 960) }
        try opusReopened.finalize(remainderFrames: 200)
        let table = try XCTUnwrap(try CAFFile.read(path: opusPath).packetTable)
        XCTAssertEqual(table.packetSizes, opus.packets.map { UInt32($0.count) })
        XCTAssertEqual(table.primingFrames, 312)
        XCTAssertEqual(table.remainderFrames, 200)
        XCTAssertEqual(table.validFrames, 6 * 960 - 312 - 200)
    }

    func testResumeRefusesVBRFilesWithoutJournal() throws {
        let scratch = try ScratchDirectory()

        let orphan = scratch.file("orphan.caf")
        let opusWriter = try CAFWriter(path: orphan, format: .opus(channels: 1, framesPerPacket: 960), info: [])
        try opusWriter.append([1, 2], packetSizes: [2], frameCount: 960)
        opusWriter.close()
        try FileManager.default.removeItem(atPath: CAFWriter.journalPath(for: orphan))
        assertCAFError(try CAFWriter.resume(path: orphan)) { $0 == .journalMissing(path: orphan) }
        assertCAFError(try CAFRecovery.recover(path: orphan)) { $0 == .journalMissing(path: orphan) }
        XCTAssertTrue(CAFError.journalMissing(path: orphan).description.contains("restore the journal"))
    }

    func testACorruptJournalHeaderIsReportedNotGuessedAt() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("corrupt.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [])
        try writer.append([1, 2], packetSizes: [2], frameCount: 960)
        writer.close()
        try writeFile(CAFWriter.journalPath(for: path), Array("not a journal at all".utf8))
        assertCAFError(try CAFRecovery.recover(path: path)) {
            if case .journalCorrupt = $0 { return true } else { return false }
        }
    }
}
