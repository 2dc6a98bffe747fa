import CaptureCore
import Foundation
import TestSupport
import XCTest

@testable import CaptureListen

/// PCM streams are encoded to Opus for listening: a 440 Hz tone comes out as a 440 Hz tone,
/// whatever the stream's sample format, byte order, rate and channel count.
final class PCMListenTests: XCTestCase {
    private struct Case {
        var name: String
        var format: StreamFormat
        var framesPerOffer: Int
    }

    private let cases = [
        Case(name: "s16 48 kHz stereo", format: ListenTestSupport.pcmFormat(sampleRate: 48_000, channels: 2, bits: 16), framesPerOffer: 1_024),
        Case(name: "s24 44.1 kHz mono", format: ListenTestSupport.pcmFormat(sampleRate: 44_100, channels: 1, bits: 24), framesPerOffer: 4_410),
        Case(name: "s32 big-endian 96 kHz 6 channels", format: ListenTestSupport.pcmFormat(sampleRate: 96_000, channels: 6, bits: 32, bigEndian: true), framesPerOffer: 4_800),
        Case(name: "f32 16 kHz mono", format: ListenTestSupport.pcmFormat(sampleRate: 16_000, channels: 1, bits: 32, float: true), framesPerOffer: 160),
        Case(name: "f64 big-endian 22.05 kHz stereo", format: ListenTestSupport.pcmFormat(sampleRate: 22_050, channels: 2, bits: 64, float: true, bigEndian: true), framesPerOffer: 2_205),
    ]

    func testA440HzToneComesOutAsA440HzToneThatFFmpegDecodes() async throws {
        for testCase in cases {
            let hub = try ListenHub(format: testCase.format, magicCookie: [])
            let listener = try hub.listen()
            let reading = Task { try await ListenTestSupport.collect(listener) }
            for offer in ListenTestSupport.pcmOffers(format: testCase.format, seconds: 2, framesPerOffer: testCase.framesPerOffer) {
                hub.offer(payload: offer.payload, packetSizes: [], frameCount: offer.frameCount)
                await hub.waitUntilIdle()
            }
            hub.finish()
            let bytes = try await reading.value
            XCTAssertEqual(listener.endReason, .streamEnded, testCase.name)

            let ogg = try OggTestReader(bytes)
            let head = try XCTUnwrap(ogg.packets.first, testCase.name)
            XCTAssertEqual(Array(head.prefix(8)), Array("OpusHead".utf8), testCase.name)
            XCTAssertEqual(Int(head[9]), min(testCase.format.channelCount, 2), "\(testCase.name): more than two channels are downmixed to stereo")
            let path = try ListenTestSupport.temporaryFile(bytes)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let decoded = try ListenTestSupport.decodeWithFFmpeg(path)
            XCTAssertEqual(Double(decoded.count), 96_000 - 3_840, accuracy: 1_000, "\(testCase.name): 2 s of audio less the pre-skip")
            XCTAssertEqual(ListenTestSupport.zeroCrossingFrequency(decoded, start: 24_000), 440, accuracy: 2, testCase.name)
            XCTAssertEqual(ListenTestSupport.rms(decoded[24_000..<72_000]), 0.5 / 2.squareRoot(), accuracy: 0.05, testCase.name)
        }
    }

    func testListenersOfAPCMStreamShareOneEncoderWhichIsReleasedWithTheLast() async throws {
        let format = ListenTestSupport.pcmFormat(sampleRate: 48_000, channels: 2, bits: 16)
        let hub = try ListenHub(format: format, magicCookie: [])
        let offers = ListenTestSupport.pcmOffers(format: format, seconds: 1, framesPerOffer: 960)
        let first = try hub.listen()
        let second = try hub.listen()
        for offer in offers { hub.offer(payload: offer.payload, packetSizes: [], frameCount: offer.frameCount) }
        await hub.waitUntilIdle()
        var statistics = hub.statistics
        XCTAssertEqual(statistics.listeners, 2)
        XCTAssertEqual(statistics.encodersCreated, 1)
        XCTAssertEqual(statistics.activeEncoders, 1)
        XCTAssertEqual(statistics.buffersProcessed, offers.count, "each buffer is encoded once for both listeners")

        first.cancel()
        await hub.waitUntilIdle()
        XCTAssertEqual(hub.statistics.activeEncoders, 1, "the encoder stays while someone listens")
        second.cancel()
        await hub.waitUntilIdle()
        statistics = hub.statistics
        XCTAssertEqual(statistics.listeners, 0)
        XCTAssertEqual(statistics.activeEncoders, 0, "the encoder goes with the last listener")
        XCTAssertEqual(first.endReason, .cancelled)

        let third = try hub.listen()
        await hub.waitUntilIdle()
        XCTAssertEqual(hub.statistics.encodersCreated, 2, "a new listener after a pause gets a fresh encoder")
        third.cancel()
    }

    func testAListenerJoiningAPCMStreamMidStreamGetsAValidStreamOfTheTone() async throws {
        let format = ListenTestSupport.pcmFormat(sampleRate: 44_100, channels: 2, bits: 16)
        let hub = try ListenHub(format: format, magicCookie: [])
        let offers = ListenTestSupport.pcmOffers(format: format, seconds: 3, framesPerOffer: 2_205)
        // Both listeners read as they go (3 s unread would pass the 2 s bound and drop them).
        let first = try hub.listen()
        let firstBytes = Task { try await ListenTestSupport.collect(first) }
        for offer in offers[0..<20] {
            hub.offer(payload: offer.payload, packetSizes: [], frameCount: offer.frameCount)
            await hub.waitUntilIdle()
        }
        let second = try hub.listen()
        let secondBytes = Task { try await ListenTestSupport.collect(second) }
        for offer in offers[20...] {
            hub.offer(payload: offer.payload, packetSizes: [], frameCount: offer.frameCount)
            await hub.waitUntilIdle()
        }
        hub.finish()
        let (one, two) = try await (firstBytes.value, secondBytes.value)
        XCTAssertEqual(first.endReason, .streamEnded)
        XCTAssertEqual(second.endReason, .streamEnded)
        XCTAssertEqual(hub.statistics.encodersCreated, 1)

        let firstPackets = try OggTestReader(one).packets.dropFirst(2)
        let secondPackets = try OggTestReader(two).packets.dropFirst(2)
        XCTAssertEqual(Array(firstPackets.suffix(secondPackets.count)), Array(secondPackets), "the joiner gets the shared encoder's packets from its pre-roll on")
        XCTAssertEqual(Double(secondPackets.count), 100 + 4, accuracy: 2, "the last two seconds and the 80 ms pre-roll")
        let path = try ListenTestSupport.temporaryFile(two)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let decoded = try ListenTestSupport.decodeWithFFmpeg(path)
        XCTAssertEqual(ListenTestSupport.zeroCrossingFrequency(decoded, start: 0), 440, accuracy: 2)
        XCTAssertEqual(ListenTestSupport.rms(decoded[0..<960]), 0.5 / 2.squareRoot(), accuracy: 0.05, "clean from the first sample heard")
    }

    func testOfferingAudioWithNobodyListeningEncodesNothing() async throws {
        let format = ListenTestSupport.pcmFormat(sampleRate: 44_100, channels: 2, bits: 24)
        let hub = try ListenHub(format: format, magicCookie: [])
        for offer in ListenTestSupport.pcmOffers(format: format, seconds: 1, framesPerOffer: 4_410) {
            hub.offer(payload: offer.payload, packetSizes: [], frameCount: offer.frameCount)
        }
        await hub.waitUntilIdle()
        XCTAssertEqual(hub.statistics, ListenHubStatistics(listeners: 0, activeEncoders: 0, encodersCreated: 0, buffersProcessed: 0, listenersDropped: 0))
    }

    func testAPCMLayoutTheEncoderCannotReadIsRefusedWithAReason() {
        let format = ListenTestSupport.pcmFormat(sampleRate: 48_000, channels: 2, bits: 8)
        XCTAssertThrowsError(try ListenHub(format: format, magicCookie: [])) { error in
            XCTAssertEqual("\(error)", "this stream cannot be listened to: its samples are 8-bit integers; 16, 24 or 32-bit can be played")
        }
    }
}

/// The converter reads every sample layout exactly and downmixes surround to stereo as documented.
final class ListenPCMConverterTests: XCTestCase {
    func testEachLayoutReadsToTheSameFloats() throws {
        let samples: [Float] = [0.5, -0.25, 0.125, -1]
        let layouts: [(bits: Int, float: Bool, bigEndian: Bool)] = [
            (16, false, false), (16, false, true), (24, false, false), (24, false, true),
            (32, false, false), (32, false, true), (32, true, false), (32, true, true), (64, true, false), (64, true, true),
        ]
        for layout in layouts {
            let format = ListenTestSupport.pcmFormat(sampleRate: 48_000, channels: 2, bits: layout.bits, float: layout.float, bigEndian: layout.bigEndian)
            let converter = try ListenPCMConverter(format: format)
            var out: [Float] = []
            ListenTestSupport.pcmBytes(samples, bits: layout.bits, float: layout.float, bigEndian: layout.bigEndian)
                .withUnsafeBytes { converter.convert($0, into: &out) }
            XCTAssertEqual(out, samples, "\(layout)")
        }
    }

    func testMoreThanTwoChannelsAreDownmixedToStereo() throws {
        // Four channels: left, right, and two more that go into both sides at half gain.
        let format = ListenTestSupport.pcmFormat(sampleRate: 48_000, channels: 4, bits: 32, float: true)
        let converter = try ListenPCMConverter(format: format)
        var out: [Float] = []
        ListenTestSupport.pcmBytes([0.8, -0.4, 0.2, 0.2], bits: 32, float: true).withUnsafeBytes { converter.convert($0, into: &out) }
        XCTAssertEqual(out.count, 2)
        XCTAssertEqual(out[0], (0.8 + 0.2) / 2, accuracy: 1e-6)
        XCTAssertEqual(out[1], (-0.4 + 0.2) / 2, accuracy: 1e-6)
    }
}
