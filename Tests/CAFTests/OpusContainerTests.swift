import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// Real libopus packets in CAF: packet-exact in our reader and in ffprobe, decodable by ffmpeg.
///
/// What ffmpeg 5.1 expects in `kuki` for Opus: nothing in particular. Its CAF demuxer skips the `kuki`
/// chunk of an Opus stream without reading it ("the data layout for Opus is currently unknown") and
/// refuses more than 2 channels; its decoder then runs without extradata, which works for mono and stereo
/// (channel mapping family 0). So an OpusHead cookie and no cookie at all decode the same; the tests
/// below check both. ffmpeg 5.1 also ignores `pakt` priming and remainder frames (it decodes every frame
/// of every packet), which is why the decoded length is packets × 960 here.
final class OpusContainerTests: XCTestCase {
    private func writeOpus(
        _ opus: OpusPackets, to path: String, cookie: [UInt8], remainder: Int, appendsOf groupSize: Int = 7
    ) throws -> CAFWriter {
        let format = StreamFormat.opus(channels: opus.channels, framesPerPacket: opus.framesPerPacket)
        let writer = try CAFWriter(
            path: path, format: format, info: [(key: "encoding application", value: "capture-send tests")],
            magicCookie: cookie, primingFrames: opus.lookahead)
        var index = 0
        while index < opus.packets.count {
            let group = Array(opus.packets[index..<min(index + groupSize, opus.packets.count)])
            try writer.append(
                group.flatMap { $0 }, packetSizes: group.map { UInt32($0.count) },
                frameCount: group.count * opus.framesPerPacket)
            index += group.count
        }
        try writer.finalize(remainderFrames: remainder)
        return writer
    }

    func testOurReaderReturnsTheExactPacketTableAndPackets() throws {
        let scratch = try ScratchDirectory()
        let opus = try OpusPackets.make(count: 50, channels: 2)
        let path = scratch.file("stereo.caf")
        _ = try writeOpus(opus, to: path, cookie: opus.opusHead, remainder: 500)
        let file = try CAFFile.read(path: path)
        XCTAssertEqual(file.format, .opus(channels: 2, framesPerPacket: 960))
        XCTAssertEqual(file.magicCookie, opus.opusHead)
        let table = try XCTUnwrap(file.packetTable)
        XCTAssertEqual(table.numberPackets, 50)
        XCTAssertEqual(table.primingFrames, Int32(opus.lookahead))
        XCTAssertEqual(table.remainderFrames, 500)
        XCTAssertEqual(table.validFrames, Int64(50 * 960 - opus.lookahead - 500))
        XCTAssertEqual(table.packetSizes, opus.sizes)
        XCTAssertEqual(table.packetFrameCounts, [], "Opus has a constant 960 frames a packet")
        XCTAssertEqual(file.dataSize, Int64(opus.joined.count))
        XCTAssertEqual(file.totalFrames, 50 * 960)
        for index in [0, 1, 25, 49] {
            XCTAssertEqual(try file.readPacket(Int64(index)), opus.packets[index])
        }
        assertCAFError(try file.readPacket(50)) { if case .packetOutOfRange = $0 { return true } else { return false } }
    }

    func testFFprobeSeesOpusWithEveryPacketAndFFmpegDecodesIt() throws {
        let scratch = try ScratchDirectory()
        for (channels, withCookie) in [(2, true), (2, false), (1, true), (1, false)] {
            let opus = try OpusPackets.make(count: 40, channels: channels)
            let path = scratch.file("opus-\(channels)-\(withCookie).caf")
            _ = try writeOpus(opus, to: path, cookie: withCookie ? opus.opusHead : [], remainder: 123)
            let stream = try FFmpegTools.probeStream(path, extraArguments: ["-count_packets"])
            XCTAssertEqual(stream["codec_name"] as? String, "opus")
            XCTAssertEqual(stream["channels"] as? Int, channels)
            XCTAssertEqual(stream["sample_rate"] as? String, "48000")
            XCTAssertEqual(stream["nb_read_packets"] as? String, "40")
            XCTAssertEqual(try FFmpegTools.packetSizes(path), opus.packets.map(\.count), "packet-exact in ffprobe")
            let decoded = try FFmpegTools.decode(path, rawFormat: "s16le")
            XCTAssertTrue(decoded.succeeded, decoded.errorText)
            XCTAssertEqual(decoded.errorText, "", "ffmpeg reports no decoding error")
            XCTAssertEqual(decoded.standardOutput.count, 40 * 960 * channels * 2, "every frame of every packet decodes")
        }
    }

    func testVariableBitRateAppendsAreChecked() throws {
        let scratch = try ScratchDirectory()
        let writer = try CAFWriter(path: scratch.file("checked.caf"), format: .opus(channels: 1, framesPerPacket: 960), info: [])
        assertCAFError(try writer.append([1, 2, 3], packetSizes: [2], frameCount: 960)) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        assertCAFError(try writer.append([1, 2, 3], packetSizes: [3], frameCount: 480)) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        assertCAFError(try writer.append([1, 2, 3], packetSizes: [3, 0], frameCount: 1920)) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        XCTAssertEqual(writer.packetCount, 0, "a rejected append counts nothing")
        try writer.append([1, 2, 3], packetSizes: [1, 2], frameCount: 1920)
        assertCAFError(try writer.finalize(remainderFrames: 2000)) {
            if case .invalidArgument = $0 { return true } else { return false }
        }
        try writer.finalize(remainderFrames: 100)
        XCTAssertEqual(try CAFFile.read(path: writer.path).packetTable?.validFrames, 1820)
    }
}
