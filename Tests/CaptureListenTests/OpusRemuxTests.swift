import CaptureCore
import Foundation
import TestSupport
import XCTest

@testable import CaptureListen

/// An Opus stream through the hub comes out as Ogg Opus with exactly the packets that went in.
final class OpusRemuxTests: XCTestCase {
    func testPacketsOutEqualPacketsInWithRightGranulesAndFFmpegDecodesThem() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 2)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        let listener = try hub.listen()
        let reading = Task { try await ListenTestSupport.collect(listener) }
        await hub.waitUntilIdle()
        for offer in stream.offers {
            hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount)
            await hub.waitUntilIdle()
        }
        hub.finish()
        let bytes = try await reading.value
        XCTAssertEqual(listener.endReason, .streamEnded)

        let sent = ListenTestSupport.packets(of: stream.offers)
        XCTAssertEqual(sent.count, 100)
        let ogg = try OggTestReader(bytes)
        let packets = ogg.packets
        XCTAssertEqual(packets.count, sent.count + 2, "OpusHead, OpusTags, then every packet")
        guard packets.count > 2, ogg.pages.count > 2 else { return }
        XCTAssertEqual(Array(packets[0].prefix(8)), Array("OpusHead".utf8))
        XCTAssertEqual(Array(packets[1].prefix(8)), Array("OpusTags".utf8))
        XCTAssertEqual(Array(packets.dropFirst(2)), sent, "the audio packets are the stream's, unchanged and in order")
        // The header's pre-skip covers the 80 ms pre-roll; everything else is the stream's cookie.
        var expectedHead = stream.cookie
        expectedHead[10] = UInt8(3_840 & 0xFF)
        expectedHead[11] = UInt8(3_840 >> 8)
        XCTAssertEqual(packets[0], expectedHead)

        // Pages: the ID header alone on the first (beginning of stream), the tags alone on the
        // second, granule 0 on both; each audio page's granule is the samples up to its last packet.
        XCTAssertEqual(ogg.pages[0].headerType & 0x02, 0x02)
        XCTAssertEqual(ogg.pages[0].completedPackets.count, 1)
        XCTAssertEqual(ogg.pages[1].completedPackets.count, 1)
        XCTAssertEqual(ogg.pages[0].granulePosition, 0)
        XCTAssertEqual(ogg.pages[1].granulePosition, 0)
        XCTAssertEqual(Set(ogg.pages.map(\.serialNumber)).count, 1)
        XCTAssertEqual(ogg.pages.map(\.sequenceNumber), (0..<UInt32(ogg.pages.count)).map { $0 })
        var samples: Int64 = 0
        for page in ogg.pages.dropFirst(2) {
            samples += Int64(page.completedPackets.count * 960)
            XCTAssertEqual(page.granulePosition, samples)
        }
        XCTAssertEqual(samples, 96_000)
        XCTAssertEqual(ogg.pages.count, 2 + stream.offers.count, "one page per offered buffer: nothing waits for more audio")

        // Independent readers: ffprobe sees the same packets, ffmpeg decodes it cleanly.
        let path = try ListenTestSupport.temporaryFile(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let probe = try ToolRunner.run("ffprobe", ["-v", "error", "-show_packets", "-show_streams", "-of", "json", path])
        XCTAssertTrue(probe.succeeded, probe.errorText)
        let probed = probe.jsonObject?["packets"] as? [[String: Any]] ?? []
        XCTAssertEqual(probed.compactMap { ($0["size"] as? String).flatMap(Int.init) }, sent.map(\.count))
        let probedStream = (probe.jsonObject?["streams"] as? [[String: Any]])?.first
        XCTAssertEqual(probedStream?["codec_name"] as? String, "opus")
        XCTAssertEqual(probedStream?["channels"] as? Int, 2)
        let decoded = try ListenTestSupport.decodeWithFFmpeg(path)
        XCTAssertEqual(decoded.count, 96_000 - 3_840, "every sample but the pre-skip")
        XCTAssertEqual(ListenTestSupport.zeroCrossingFrequency(decoded, start: 24_000), 440, accuracy: 2)

        // opusinfo checks pages, granules and pre-skip; its one complaint is the missing end-of-stream
        // page, which it calls normal for live streams (and which makes it exit with status 1).
        let info = try ToolRunner.run("opusinfo", [path])
        let report = info.outputText + info.errorText
        let warnings = report.split(separator: "\n").filter { $0.contains("WARNING") }
        XCTAssertEqual(warnings, ["WARNING: EOS not set on stream 1 (normal for live streams)"], report)
        XCTAssertTrue(report.contains("Pre-skip: 3840"), report)
        XCTAssertTrue(report.contains("Packet duration:   20.0ms (max),   20.0ms (avg),   20.0ms (min)"), report)
        XCTAssertTrue(report.contains("Playback length: 0m:01.919s"), report)  // (96000 - 3840) / 48000 s, truncated
    }

    func testAListenerJoiningMidStreamGetsAValidStreamStartingAtTheLiveEdge() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 3)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        let offers = stream.offers
        // Nobody listens for the first second; the first listener joins, a second one a second later.
        for offer in offers[0..<10] { hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount) }
        // Both read as they go, so neither comes near the 2 s bound.
        let first = try hub.listen()
        let firstBytes = Task { try await ListenTestSupport.collect(first) }
        await hub.waitUntilIdle()
        for offer in offers[10..<20] { hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount) }
        await hub.waitUntilIdle()
        let second = try hub.listen()
        let secondBytes = Task { try await ListenTestSupport.collect(second) }
        await hub.waitUntilIdle()
        for offer in offers[20...] {
            hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount)
            await hub.waitUntilIdle()
        }
        hub.finish()
        let (one, two) = try await (firstBytes.value, secondBytes.value)
        XCTAssertEqual(first.endReason, .streamEnded)
        XCTAssertEqual(second.endReason, .streamEnded)

        let sent = ListenTestSupport.packets(of: offers)
        let firstPackets = Array(try OggTestReader(one).packets.dropFirst(2))
        let secondPackets = Array(try OggTestReader(two).packets.dropFirst(2))
        XCTAssertEqual(firstPackets, Array(sent[50...]), "the first listener starts with the audio offered after it joined")
        XCTAssertEqual(secondPackets, Array(sent[96...]), "the second gets the last 80 ms (4 packets) as pre-roll, then the live audio")
        XCTAssertNotEqual(try OggTestReader(one).pages[0].serialNumber, try OggTestReader(two).pages[0].serialNumber)

        for bytes in [one, two] {
            let path = try ListenTestSupport.temporaryFile(bytes)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let decoded = try ListenTestSupport.decodeWithFFmpeg(path)
            XCTAssertGreaterThanOrEqual(decoded.count, 48_000)
            XCTAssertEqual(ListenTestSupport.zeroCrossingFrequency(decoded, start: 0), 440, accuracy: 2)
            // The pre-skip hides the decoder's warm-up: the first audible samples are the tone at full level.
            XCTAssertEqual(ListenTestSupport.rms(decoded[0..<960]), 0.5 / 2.squareRoot(), accuracy: 0.05)
        }
    }

    func testASurroundStreamIsRemuxedWithItsChannelMappingAndFFmpegDecodesAllSixChannels() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 1, channels: 6)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        let listener = try hub.listen()
        for offer in stream.offers { hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount) }
        hub.finish()
        let bytes = try await ListenTestSupport.collect(listener)
        let packets = try OggTestReader(bytes).packets
        guard packets.count > 2 else { return XCTFail("no Ogg packets") }
        XCTAssertEqual(packets[0].count, 27, "an OpusHead of mapping family 1 with its six-entry table")
        XCTAssertEqual(packets[0][18], 1)
        XCTAssertEqual(Array(packets[0][19...]), Array(stream.cookie[19...]), "stream counts and mapping as the sender declared them")
        XCTAssertEqual(Array(packets.dropFirst(2)), ListenTestSupport.packets(of: stream.offers))

        let path = try ListenTestSupport.temporaryFile(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let probe = try ToolRunner.run("ffprobe", ["-v", "error", "-show_streams", "-of", "json", path])
        XCTAssertEqual((probe.jsonObject?["streams"] as? [[String: Any]])?.first?["channels"] as? Int, 6)
        let decoded = try ListenTestSupport.decodeWithFFmpeg(path)
        XCTAssertEqual(decoded.count, 48_000 - 3_840)
        XCTAssertEqual(ListenTestSupport.zeroCrossingFrequency(decoded, start: 0), 0, "less than a second left after the pre-skip")
        XCTAssertEqual(ListenTestSupport.rms(decoded[4_800..<40_000]), 0.5 / 2.squareRoot(), accuracy: 0.05)
    }

    func testAStreamWhoseCookieIsNoOpusHeaderIsRefusedWithAReason() {
        XCTAssertThrowsError(try ListenHub(format: .opus(channels: 2, framesPerPacket: 960), magicCookie: [1, 2, 3])) { error in
            XCTAssertEqual(
                "\(error)",
                "this stream cannot be listened to: its Opus configuration (magic cookie) is not an Opus identification header, so it cannot be played")
        }
    }
}
