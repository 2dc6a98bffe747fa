import CAF
import CaptureCore
import Foundation
import XCTest

/// The exact bytes the writer lays down, checked against the CAF specification by hand.
final class FileLayoutTests: XCTestCase {
    private func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    private func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        Array(type.utf8) + bigEndian(Int64(body.count)) + body
    }

    func testHeaderChunksAreLaidOutAsTheSpecificationSays() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("layout.caf")
        let writer = try CAFWriter(
            path: path, format: .linearPCM(sampleRate: 8_000, channels: 2, sample: .s16),
            info: [(key: "title", value: "T")], magicCookie: [1, 2, 3])
        let desc = bigEndian(Double(8_000).bitPattern) + Array("lpcm".utf8)
            + bigEndian(UInt32(2))  // kCAFLinearPCMFormatFlagIsLittleEndian, not float
            + bigEndian(UInt32(4)) + bigEndian(UInt32(1)) + bigEndian(UInt32(2)) + bigEndian(UInt32(16))
        let chan = bigEndian(UInt32((101 << 16) | 2)) + bigEndian(UInt32(0)) + bigEndian(UInt32(0))
        let info = bigEndian(UInt32(1)) + Array("title\u{0}T\u{0}".utf8)
        var expected = Array("caff".utf8) + [0, 1, 0, 0]
        expected += chunk("desc", desc) + chunk("chan", chan) + chunk("info", info) + chunk("kuki", [1, 2, 3])
        expected += Array("data".utf8) + bigEndian(Int64(-1)) + bigEndian(UInt32(0))
        XCTAssertEqual(try fileBytes(path), expected, "an empty recording is the header and a data chunk of size -1")

        try writer.append([0x01, 0x02, 0x03, 0x04], frameCount: 1)
        try writer.finalize()
        let finished = try fileBytes(path)
        let sizeOffset = expected.count - 12
        XCTAssertEqual(Array(finished[sizeOffset..<(sizeOffset + 8)]), bigEndian(Int64(8)), "data size = edit count + audio")
        XCTAssertEqual(Array(finished[expected.count...]), [0x01, 0x02, 0x03, 0x04])
    }

    func testFloatAndChannelLayoutsAreEncoded() throws {
        let scratch = try ScratchDirectory()
        let cases: [(channels: Int, tag: UInt32)] = [(1, (100 << 16) | 1), (2, (101 << 16) | 2), (5, (147 << 16) | 5)]
        for (channels, tag) in cases {
            let path = scratch.file("f\(channels).caf")
            let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 48_000, channels: channels, sample: .f32), info: [])
            try writer.finalize()
            let bytes = try fileBytes(path)
            XCTAssertEqual(Array(bytes[32..<36]), bigEndian(UInt32(3)), "float | little-endian in CAF's own flag meaning")
            XCTAssertEqual(Array(bytes[64..<68]), bigEndian(tag))
            let file = try CAFFile.read(path: path)
            XCTAssertEqual(file.format.formatFlags, [.isFloat, .isPacked], "read back with Core Audio flag meanings")
            XCTAssertEqual(file.channelLayoutTag, tag)
        }
    }

    func testExplicitChannelLayoutTagIsWritten() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("layout.caf")
        let writer = try CAFWriter(
            path: path, format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16),
            channelLayoutTag: CAFChannelLayoutTag.discreteInOrder(channels: 2), info: [])
        try writer.finalize()
        XCTAssertEqual(try CAFFile.read(path: path).channelLayoutTag, (147 << 16) | 2)
    }

    func testVarintsAreMinimalBigEndianGroupsOfSevenBits() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.file("varint.caf")
        let writer = try CAFWriter(path: path, format: .opus(channels: 1, framesPerPacket: 960), info: [], primingFrames: 312)
        let sizes: [UInt32] = [1, 127, 128, 300, 16_383, 16_384]
        try writer.append([UInt8](repeating: 0xFC, count: Int(sizes.reduce(0, +))), packetSizes: sizes, frameCount: 960 * sizes.count)
        try writer.finalize(remainderFrames: 100)
        let bytes = try fileBytes(path)
        let expectedBody = bigEndian(Int64(6)) + bigEndian(Int64(6 * 960 - 312 - 100)) + bigEndian(Int32(312)) + bigEndian(Int32(100))
            + [0x01, 0x7F, 0x81, 0x00, 0x82, 0x2C, 0xFF, 0x7F, 0x81, 0x80, 0x00]
        XCTAssertEqual(Array(bytes.suffix(expectedBody.count + 12)), chunk("pakt", expectedBody))
    }
}
