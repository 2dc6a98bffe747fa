import CAF
import CSndFile
import Foundation
import TestSupport
import XCTest

/// A channel layout survives the stream (issue 17, item 6): a 5.1 WAV (WAVE_FORMAT_EXTENSIBLE
/// channel mask 0x3F) sent by capture-send is recorded with a CAF `chan` chunk that says 5.1, as
/// ffprobe reads it; a WAV without a mask gets today's default layout.
final class ChannelLayoutTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("layout-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A one-second 6-channel s16 WAV: WAVE_FORMAT_EXTENSIBLE with `map` as its channel mask, or a
    /// plain WAV without any mask.
    private func sixChannelWAV(map: [Int32]?) throws -> String {
        let path = work.appendingPathComponent("six-\(map == nil ? "plain" : "mapped").wav").path
        var info = SF_INFO(frames: 0, samplerate: 48_000, channels: 6, format: Int32(map == nil ? SF_FORMAT_WAV : SF_FORMAT_WAVEX) | Int32(SF_FORMAT_PCM_16), sections: 0, seekable: 0)
        let handle = try XCTUnwrap(sf_open(path, Int32(SFM_WRITE), &info), String(cString: sf_strerror(nil)))
        if var map {
            XCTAssertEqual(map.withUnsafeMutableBytes { sf_command(handle, Int32(SFC_SET_CHANNEL_MAP_INFO), $0.baseAddress, Int32($0.count)) }, Int32(SF_TRUE))
        }
        var samples = (0..<48_000 * 6).map { Int16(truncatingIfNeeded: $0 &* 31) }
        XCTAssertEqual(sf_write_short(handle, &samples, sf_count_t(samples.count)), sf_count_t(samples.count))
        sf_close(handle)
        Unprivileged.handOver(path)
        return path
    }

    private func record(_ source: String) throws -> (caf: CAFFile, ffprobe: [String: Any], samples: [Int32]) {
        let receiver = try ReceiverUnderTest()
        let (status, stderr) = try runSender([receiver.address, "--source", "file", "--file", source, "--no-pace", "--stream-name", "surround"])
        XCTAssertEqual(status, 0, stderr)
        let file = try XCTUnwrap(receiver.files().first).path
        defer { XCTAssertEqual(receiver.stop(), 0) }
        return (try CAFFile.read(path: file), try ffprobeStream(file), try SndFileReader.read(path: file).int32Samples)
    }

    func testAFiveOneWAVIsRecordedAsFiveOne() throws {
        let source = try sixChannelWAV(map: [
            Int32(SF_CHANNEL_MAP_LEFT), Int32(SF_CHANNEL_MAP_RIGHT), Int32(SF_CHANNEL_MAP_CENTER),
            Int32(SF_CHANNEL_MAP_LFE), Int32(SF_CHANNEL_MAP_REAR_LEFT), Int32(SF_CHANNEL_MAP_REAR_RIGHT),
        ])
        let recorded = try record(source)
        XCTAssertEqual(recorded.caf.channelLayoutTag, 0x10000, "kAudioChannelLayoutTag_UseChannelBitmap")
        XCTAssertEqual(recorded.caf.channelBitmap, 0x3F)
        XCTAssertEqual(recorded.ffprobe["channel_layout"] as? String, "5.1", "\(recorded.ffprobe)")
        XCTAssertEqual(recorded.samples, try SndFileReader.read(path: source).int32Samples, "the audio, bit-exact")
    }

    func testASideSurroundLayoutKeepsItsSideChannels() throws {
        let source = try sixChannelWAV(map: [
            Int32(SF_CHANNEL_MAP_LEFT), Int32(SF_CHANNEL_MAP_RIGHT), Int32(SF_CHANNEL_MAP_CENTER),
            Int32(SF_CHANNEL_MAP_LFE), Int32(SF_CHANNEL_MAP_SIDE_LEFT), Int32(SF_CHANNEL_MAP_SIDE_RIGHT),
        ])
        let recorded = try record(source)
        XCTAssertEqual(recorded.caf.channelBitmap, 0x60F)
        XCTAssertEqual(recorded.ffprobe["channel_layout"] as? String, "5.1(side)", "\(recorded.ffprobe)")
    }

    func testAWAVWithoutAChannelMaskKeepsTheDefaultLayout() throws {
        let recorded = try record(try sixChannelWAV(map: nil))
        XCTAssertEqual(recorded.caf.channelLayoutTag, CAFChannelLayoutTag.default(channels: 6))
        XCTAssertEqual(recorded.caf.channelBitmap, 0)
    }
}
