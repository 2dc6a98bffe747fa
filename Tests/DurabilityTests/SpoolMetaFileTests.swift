import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// `meta.json` keeps its form while `SpoolMeta` holds a `StreamFormat`: the format's fields stay
/// flat beside the others, so spools written by earlier versions read, and what this version writes
/// is what they wrote.
final class SpoolMetaFileTests: XCTestCase {
    private static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus/spool-meta")

    /// Every stored description (a version 1 spool, an Opus surround stream, a continued PCM
    /// stream) reads, and written again holds exactly the same keys and values.
    func testStoredDescriptionsReadAndWriteBackUnchanged() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).sorted()
        XCTAssertEqual(files, ["opus-surround", "pcm-continued", "version-1"])
        for name in files {
            let data = try Data(contentsOf: Self.corpus.appendingPathComponent(name))
            let meta = try JSONDecoder().decode(SpoolMeta.self, from: data)
            let written = try JSONEncoder().encode(meta)
            let original = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? NSDictionary, name)
            let again = try XCTUnwrap(JSONSerialization.jsonObject(with: written) as? NSDictionary, name)
            XCTAssertEqual(again, original, name)
            XCTAssertNil(again["format"], "\(name): the format is not nested")
        }
    }

    /// The format read is the stream's format, field for field.
    func testTheFormatReadIsTheStreamsFormat() throws {
        let data = try Data(contentsOf: Self.corpus.appendingPathComponent("opus-surround"))
        let meta = try JSONDecoder().decode(SpoolMeta.self, from: data)
        XCTAssertEqual(meta.format.sampleRate, 48_000)
        XCTAssertEqual(meta.format.channelsPerFrame, 6)
        XCTAssertEqual(meta.format.framesPerPacket, 960)
        XCTAssertEqual(meta.format.formatID.rawValue, 1_869_641_075)
        XCTAssertEqual(meta.streamDescription.format, meta.format)
        let pcm = StreamFormat.linearPCM(sampleRate: 44_100, channels: 2, sample: .s16)
        let made = SpoolMeta(
            streamID: UUID(), streamName: "field", destination: nil,
            description: StreamDescription(format: pcm, magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 1_800_000_000)))
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(made)) as? [String: Any])
        XCTAssertEqual(fields["sampleRate"] as? Double, 44_100)
        XCTAssertEqual(fields["channelsPerFrame"] as? Int, 2)
        XCTAssertEqual(fields["bitsPerChannel"] as? Int, 16)
        XCTAssertEqual(fields["bytesPerFrame"] as? Int, 4)
        XCTAssertEqual(try JSONDecoder().decode(SpoolMeta.self, from: JSONEncoder().encode(made)), made)
    }
}
