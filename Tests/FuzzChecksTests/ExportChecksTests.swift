import CAF
import CaptureExport
import Foundation
import FuzzChecks
import XCTest

/// The `export` fuzz target's seeds reach every conversion: each is a recording export takes, and
/// its dry run delivers exactly the recording's valid frames, cue points and Ogg packets.
final class ExportChecksTests: XCTestCase {
    private func seed(_ name: String) throws -> CAFFile {
        let url = FuzzCorpusTests.fuzz.appendingPathComponent("corpus/export/\(name)")
        return try CAFFile.read(bytes: Array(try Data(contentsOf: url)), name: name)
    }

    func testEachPCMSeedExportsItsFramesAndCuePoints() throws {
        for (name, channels) in [("pcm-s16-stereo", 2), ("pcm-s24-surround", 6), ("pcm-s32-mono", 1), ("pcm-f32-unfinished", 2)] {
            let file = try seed(name)
            let wav = try RecordingExporter.dryRun(file, as: .wav)
            XCTAssertEqual(wav.validFrames, 24, name)
            XCTAssertEqual(wav.frames, 24, name)
            XCTAssertEqual(wav.samples, Int64(24 * channels), name)
            // An unfinished file's markers are still in its journal, not in the file.
            let finished = file.isFinalized
            XCTAssertEqual(wav.cuePositions, finished ? [4, 20] : [], name)
            XCTAssertEqual(wav.labelChunk.count, finished ? 12 + 2 * 12 + 40 + 44 : 0, "\(name): two labels, NUL-terminated, even")
            let flac = try RecordingExporter.dryRun(file, as: .flac)
            XCTAssertEqual(flac.frames, 24, name)
            XCTAssertEqual(flac.labelChunk, [], "FLAC has no labels")
            XCTAssertThrowsError(try RecordingExporter.dryRun(file, as: .ogg), name)
        }
    }

    func testEachOpusSeedExportsItsValidFramesAndPackets() throws {
        for (name, channels) in [("opus-1ch", 1), ("opus-6ch", 6)] {
            let file = try seed(name)
            let table = try XCTUnwrap(file.packetTable)
            let ogg = try RecordingExporter.dryRun(file, as: .ogg)
            XCTAssertEqual(ogg.packets, file.packetCount, name)
            XCTAssertEqual(ogg.granulePositions.last, Int64(table.primingFrames) + table.validFrames, name)
            XCTAssertEqual(ogg.granulePositions.first, 960, name)
            let wav = try RecordingExporter.dryRun(file, as: .wav)
            XCTAssertEqual(wav.validFrames, 2_880, "\(name): the 60 ms encoded")
            XCTAssertEqual(wav.frames, 2_880, name)
            XCTAssertEqual(wav.samples, Int64(2_880 * channels), name)
            XCTAssertEqual(wav.cuePositions, [960], "\(name): the marker moved by the priming")
            ExportChecks.check(try Data(contentsOf: FuzzCorpusTests.fuzz.appendingPathComponent("corpus/export/\(name)")))
        }
    }

    /// The damaged recordings of issue 27, item 8 (Fuzz/regressions/export, patched from the seeds):
    /// each is refused, by the reader or by export's plan, where export used to trap or claim
    /// frames the file does not hold.
    func testTheDamagedRecordingsOfItem8AreRefused() throws {
        let folder = FuzzCorpusTests.fuzz.appendingPathComponent("regressions/export")
        func refusal(_ name: String) throws -> String {
            let bytes = Array(try Data(contentsOf: folder.appendingPathComponent(name)))
            do {
                let file = try CAFFile.read(bytes: bytes, name: name)
                _ = try RecordingExporter.dryRun(file, as: .wav)
                return "exported"
            } catch let error as CAFError {
                return error.description
            } catch {
                return "\(error)"
            }
        }
        XCTAssertEqual(try refusal("desc-float-flagged-s16"), "desc-float-flagged-s16 has an audio description ('desc') that cannot be read: float samples are 32 or 64 bits, not 16")
        XCTAssertEqual(try refusal("desc-opus-4294967295-channels"), "desc-opus-4294967295-channels has an audio description ('desc') that cannot be read: 4294967295 channels is more than the 1024 a recording can have")
        XCTAssertEqual(try refusal("info-first-sample-time-9999"), "cannot export info-first-sample-time-9999: its first sample time 9999-11-24T10:00:01.500Z lies outside 1677 to 2262, the years an export's times can carry; the file's info chunk is damaged")
        XCTAssertEqual(try refusal("pakt-valid-frames-beyond-packets"), "pakt-valid-frames-beyond-packets has a malformed 'pakt' chunk: it claims 4611686018427387904 valid, 312 priming and 648 remainder frames but its 4 packets hold 3840; the file is damaged")
    }
}
