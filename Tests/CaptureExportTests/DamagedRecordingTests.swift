import CAF
import CaptureCore
@testable import CaptureExport
import Foundation
import TestSupport
import XCTest

/// Export on recordings that are damaged or not what capture-recv writes (issue 27, item 8): a
/// clear error naming the file and what is wrong, never a trap, never a wrong export, never more
/// memory than the file justifies.
final class DamagedRecordingTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A 0.1 s s16 stereo recording with `info` and `markers`.
    private func pcmRecording(_ name: String, info: [(key: String, value: String)] = [("title", "t")], markers: [CAFMarker] = []) throws -> String {
        let path = work.appendingPathComponent("\(name).caf").path
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), info: info)
        try writer.append((0..<(4_800 * 4)).map { UInt8(truncatingIfNeeded: $0 &* 31) }, frameCount: 4_800)
        for marker in markers { try writer.addMarker(framePosition: marker.framePosition, name: marker.name) }
        try writer.finalize()
        return path
    }

    private func message(_ body: () throws -> Any) -> String? {
        do {
            _ = try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    func testAFirstSampleTimeBeyond2262IsAnErrorNotATrap() throws {
        let path = try pcmRecording("future", info: [("first sample time", "9999-12-31T23:59:59.000Z")])
        XCTAssertEqual(message { try RecordingExporter.export(cafPath: path, as: .wav) },
                       "cannot export \(path): its first sample time 9999-12-31T23:59:59.000Z lies outside 1677 to 2262, the years an export's times can carry; the file's info chunk is damaged")
        let before = try pcmRecording("past", info: [("first sample time", "1066-10-14T09:00:00Z")])
        XCTAssertNotNil(message { try RecordingExporter.export(cafPath: before, as: .flac) })
        let edge = try pcmRecording("edge", info: [("first sample time", "2262-04-11T23:47:16.854Z")])
        XCTAssertNoThrow(try RecordingExporter.export(cafPath: edge, as: .wav), "the last millisecond that fits")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path).filter { $0.hasSuffix(".partial") }, [])
    }

    /// Big-endian linear PCM is a CAF the reader reads, but not one export converts: refused, where
    /// it was exported with every sample byte-swapped.
    func testPCMThatIsNotWhatTheReceiverWritesIsRefusedNotMisread() throws {
        let path = try pcmRecording("big-endian")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(bytes[32..<36]), [0, 0, 0, 2], "CAF flags: little-endian integer")
        bytes[35] = 0
        try bytes.write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(try CAFFile.read(path: path).format.formatFlags.contains(.isBigEndian), true)
        XCTAssertEqual(message { try RecordingExporter.export(cafPath: path, as: .wav) },
                       "cannot export \(path): it holds linear PCM of 16 bits, flags 0xe, 2 channels at 48000 Hz, which export does not convert; it exports what capture-recv records: s16, s24, s32 or f32 little-endian PCM at 8 to 192 kHz, or Opus, 1 to 8 channels")
    }

    /// An OpusHead that contradicts the description made an Ogg stream whose header says 2 channels
    /// for a mono recording; it is refused.
    func testAnOpusHeadThatContradictsTheDescriptionIsRefused() throws {
        let path = work.appendingPathComponent("opus.caf").path
        let head = Array("OpusHead".utf8) + [1, 2, 0x38, 1, 0x80, 0xBB, 0, 0, 0, 0, 0]
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], magicCookie: head, primingFrames: 312)
        try writer.append([0xF8, 0xFF, 0xFE], packetSizes: [3], frameCount: 960)
        try writer.finalize()
        XCTAssertEqual(message { try RecordingExporter.export(cafPath: path, as: .ogg) },
                       "cannot export \(path): its magic cookie is an OpusHead for 2 channels but the recording has 1; the file is damaged")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path).sorted(), ["opus.caf"])
    }

    /// Gap labels are cut to 255 bytes: a hundred markers sharing a 100 KB name made a 10 MB `LIST`
    /// chunk (and beyond 4 GiB, a trap in its 32-bit size).
    func testLongMarkerNamesAreCutInTheLabels() throws {
        let name = String(repeating: "é", count: 50_000)
        let path = try pcmRecording("labels", markers: (0..<100).map { CAFMarker(framePosition: Int64($0 * 40), name: name) })
        let wav = try RecordingExporter.export(cafPath: path, as: .wav)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: wav)[.size] as? Int)
        XCTAssertLessThan(size, 4_800 * 4 + 100 * (24 + 256 + 12 + 256) + 1_000, "the labels hold at most 255 bytes each")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: wav))
        let label = try XCTUnwrap(bytes.range(of: Data("labl".utf8)))
        let labelSize = Int(bytes[label.upperBound]) | Int(bytes[label.upperBound + 1]) << 8
        XCTAssertEqual(labelSize, 4 + 254 + 1, "cue id, 127 whole two-byte characters, NUL")
        XCTAssertEqual(String(decoding: bytes[(label.upperBound + 8)..<(label.upperBound + 8 + 254)], as: UTF8.self), String(repeating: "é", count: 127))
    }
}
