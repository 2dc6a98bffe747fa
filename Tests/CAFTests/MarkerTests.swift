import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// Markers (capture gaps, overruns) are written as `mark` + `strg`, read back, survive a crash, and do
/// not disturb independent readers.
final class MarkerTests: XCTestCase {
    private let markers = [
        CAFMarker(framePosition: 0, name: "start"),
        CAFMarker(framePosition: 1_234, name: "gap: 480 frames lost"),
        CAFMarker(framePosition: 3_999, name: "Überlauf ✓"),
        CAFMarker(framePosition: 2_000, name: ""),
    ]

    func testPCMMarkersAreReadBackAndOtherReadersStillReadTheAudio() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("marked.caf")
        let signal = TestSignal.integerPCM(bits: 16, channels: 2, frames: 4_000, seed: 3)
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), info: [(key: "title", value: "m")])
        try writer.append(signal.bytes, frameCount: 4_000)
        for marker in markers { try writer.addMarker(framePosition: marker.framePosition, name: marker.name) }
        XCTAssertEqual(writer.markers, markers)
        try writer.finalize()

        let file = try CAFFile.read(path: path)
        XCTAssertEqual(file.markers, markers)
        XCTAssertEqual(try file.readAudioData(), signal.bytes)

        let stream = try FFmpegTools.probeStream(path)
        XCTAssertEqual(stream["nb_frames"] as? String, "4000")
        let decoded = try FFmpegTools.decode(path, rawFormat: "s16le")
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        XCTAssertEqual([UInt8](decoded.standardOutput), signal.bytes)
        let audio = try SndFileReader.read(path: path)
        XCTAssertEqual(audio.frames, 4_000)
        XCTAssertEqual(audio.nativeIntegerSamples, signal.samples)
    }

    func testMarkerChunksFollowTheSpecificationLayout() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("layout.caf")
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 8_000, channels: 1, sample: .s16), info: [])
        try writer.append([0, 0], frameCount: 1)
        try writer.addMarker(framePosition: 1, name: "ab")
        try writer.finalize()
        let bytes = try fileBytes(path)
        func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        let mark = Array("mark".utf8) + be(Int64(36)) + be(UInt32(0)) + be(UInt32(1))
            + be(UInt32(0)) + be(Double(1).bitPattern) + be(UInt32(1)) + [UInt8](repeating: 0, count: 8) + be(UInt32(0))
        let strg = Array("strg".utf8) + be(Int64(19)) + be(UInt32(1)) + be(UInt32(1)) + be(Int64(0)) + Array("ab\u{0}".utf8)
        XCTAssertEqual(Array(bytes.suffix(mark.count + strg.count)), mark + strg)
    }

    func testOpusMarkersSurviveACrashAndFFprobeStillReadsThePackets() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("opus.caf")
        let opus = try OpusPackets.make(count: 10, channels: 1)
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], primingFrames: opus.lookahead)
        try writer.append(opus.joined, packetSizes: opus.sizes, frameCount: 9_600)
        try writer.addMarker(framePosition: 4_800, name: "gap")
        try writer.synchronize()
        writer.close()
        _ = try CAFRecovery.recover(path: path)
        XCTAssertEqual(try CAFFile.read(path: path).markers, [CAFMarker(framePosition: 4_800, name: "gap")])
        XCTAssertEqual(try FFmpegTools.packetSizes(path), opus.packets.map(\.count))
    }

    func testBadMarkersAreRefused() throws {
        let scratch = try ScratchDirectory()
        let writer = try CAFWriter(path: scratch.file("bad.caf"), format: .linearPCM(sampleRate: 8_000, channels: 1, sample: .s16), info: [])
        assertCAFError(try writer.addMarker(framePosition: -1, name: "x")) { if case .invalidArgument = $0 { return true } else { return false } }
        assertCAFError(try writer.addMarker(framePosition: 1, name: "a\u{0}b")) { if case .invalidArgument = $0 { return true } else { return false } }
        XCTAssertEqual(writer.markers, [])
    }

    /// A marker written again (a resend after a crash, a replayed commit log round) is kept once,
    /// also across a resume from the journal; a different name at the same frame is another marker.
    func testAMarkerWrittenAgainIsKeptOnceAcrossAResume() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("again.caf")
        let signal = TestSignal.integerPCM(bits: 16, channels: 1, frames: 800, seed: 5)
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 8_000, channels: 1, sample: .s16), info: [])
        try writer.append(signal.bytes, frameCount: 800)
        XCTAssertTrue(try writer.addMarker(framePosition: 800, name: "marker: take 2"))
        XCTAssertFalse(try writer.addMarker(framePosition: 800, name: "marker: take 2"))
        XCTAssertTrue(try writer.addMarker(framePosition: 800, name: "marker"))
        try writer.synchronize()
        writer.close()
        let resumed = try CAFWriter.resume(path: path, keepingPackets: 800)
        XCTAssertFalse(try resumed.addMarker(framePosition: 800, name: "marker: take 2"), "the journal already holds it")
        try resumed.finalize()
        XCTAssertEqual(try CAFFile.read(path: path).markers, [
            CAFMarker(framePosition: 800, name: "marker: take 2"), CAFMarker(framePosition: 800, name: "marker"),
        ])
    }

    /// The names of the markers the person recording dropped, and their labels read back; a gap's
    /// marker has no label.
    func testUserMarkerNamesAndLabels() {
        let rows: [(label: String, name: String)] = [("", "marker"), ("goal", "marker: goal"), ("a: b", "marker: a: b"), ("Überlauf ✓", "marker: Überlauf ✓")]
        for row in rows {
            XCTAssertEqual(CAFMarker.userMarkerName(label: row.label), row.name)
            XCTAssertEqual(CAFMarker(framePosition: 0, name: row.name).userLabel, row.label)
        }
        XCTAssertNil(CAFMarker(framePosition: 0, name: CAFMarker.gapName(length: 480, reason: "overrun")).userLabel)
        XCTAssertNil(CAFMarker(framePosition: 0, name: "markers").userLabel)
        XCTAssertEqual(CAFMarker.gapName(length: 480, reason: "paused"), "gap: 480 frames not captured (paused)")
    }
}
