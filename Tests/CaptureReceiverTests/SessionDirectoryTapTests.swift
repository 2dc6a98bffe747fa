@testable import CaptureReceiver
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// A connection's session handler reports its stream to the directory: in an EmbeddedChannel with
/// scripted storage, what arrives on the wire shows in the directory's row.
final class SessionDirectoryTapTests: XCTestCase {
    typealias ScriptedStorage = ReceiverSessionHandlerTests.ScriptedStorage

    static let stream = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()
    static let path = "/srv/rec/studio-a/20260101T000000Z-studio-a.caf"

    private let storage = ScriptedStorage()
    private let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60)))

    private func makeChannel() throws -> EmbeddedChannel {
        let configuration = ReceiverConfiguration(outputDirectory: "/srv/rec")
        let handler = ReceiverSessionHandler(
            configuration: configuration, registry: StreamRegistry(), storage: storage, logger: Logger(label: "test"), directory: directory)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            ByteToMessageHandler(WireFrameDecoder(role: .receiver)),
            MessageToByteHandler(WireFrameEncoder()),
            handler,
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).wait()
        return channel
    }

    private func send(_ channel: EmbeddedChannel, _ message: WireMessage, preamble: Bool = false) throws {
        try channel.writeInbound(ByteBuffer(bytes: (preamble ? WirePreamble.bytes() : []) + message.encode()))
        channel.embeddedEventLoop.run()
    }

    /// Opens the stream through HelloAccepted.
    private func streaming(_ channel: EmbeddedChannel) throws -> ReceiverSessionHandlerTests.ScriptedFile {
        try send(channel, .hello(.with {
            $0.protocolVersion = 1
            $0.streamID = Self.stream.wireBytes
            $0.streamName = "studio-a"
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            $0.startTimeUnixNs = 1_767_225_600_000_000_000
        }), preamble: true)
        let file = try XCTUnwrap(storage.completeOpen(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0)))
        channel.embeddedEventLoop.run()
        return file
    }

    /// 4,800 frames (0.1 s) of silent s16 stereo at `sequence`, with `levels` when given.
    private func audio(_ sequence: UInt64, at firstSampleTime: Int64? = nil, peak: [UInt32]? = nil, rms: [UInt32] = []) -> WireMessage {
        .audioData(.with {
            $0.sequence = sequence
            $0.firstSampleTime = firstSampleTime ?? Int64(sequence - 1) * 4_800
            $0.packetCount = 4_800
            $0.frameCount = 4_800
            $0.payload = Data(count: 4_800 * 4)
            if let peak {
                $0.levels = .with {
                    $0.peak = peak
                    $0.rms = rms
                }
            }
        })
    }

    func testASessionsAudioGapsAndAcksShowInItsRow() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        var row = try XCTUnwrap(directory.snapshot(of: Self.stream), "listed once HelloAccepted is sent")
        XCTAssertEqual(row.state, .live)
        XCTAssertEqual(row.name, "studio-a")
        XCTAssertEqual(row.file, "studio-a/20260101T000000Z-studio-a.caf", "relative to --out")
        XCTAssertEqual(row.format, "s16 48000 Hz 2 ch")
        XCTAssertEqual(row.started, Date(timeIntervalSince1970: 1_767_225_600))
        XCTAssertTrue(row.peer.contains("127.0.0.1"), row.peer)
        XCTAssertNil(row.lastAudioReceived)

        try send(channel, audio(1, peak: [1200, 0], rms: [1501, 300]))
        try send(channel, .gap(.with {
            $0.sequence = 2
            $0.sampleTime = 4_800
            $0.lengthFrames = 2_400
            $0.reason = "overrun"
        }))
        try send(channel, audio(3, at: 7_200))
        file.events.durable(StreamPosition(lastSequence: 2, endSampleTime: 7_200))
        channel.embeddedEventLoop.run()
        row = try XCTUnwrap(directory.snapshot(of: Self.stream))
        XCTAssertEqual(file.writes.count, 2)
        XCTAssertEqual(file.writes.first?.levels?.peakDBFS, [-12, 0])
        XCTAssertEqual(row.levels, StreamLevels(peakDBFS: [-12, 0], rmsDBFS: [-15.01, -3]), "audio without levels keeps the latest shown")
        XCTAssertNotNil(row.lastAudioReceived)
        XCTAssertEqual(row.gapCount, 1)
        XCTAssertEqual(row.gapSeconds, 0.05)
        XCTAssertEqual(row.secondsOnDisk, 0.15)
        XCTAssertEqual(row.secondsAcknowledged, 0.15)

        try channel.close().wait()
        channel.embeddedEventLoop.run()
        try XCTUnwrap(file.pendingDetach).completion()
        channel.embeddedEventLoop.run()
        XCTAssertEqual(directory.snapshot(of: Self.stream)?.state, .reconnecting, "its file waits for a resume")
    }

    func testInvalidLevelsAreIgnoredAndTheAudioIsStillRecorded() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        try send(channel, audio(1, peak: [1200], rms: [1500]))
        try send(channel, audio(2, peak: [1200, 12_001], rms: [1500, 12_001]))
        try send(channel, audio(3, peak: [1500, 1500], rms: [1200, 1200]))
        XCTAssertEqual(file.writes.count, 3, "the audio is recorded")
        XCTAssertEqual(file.writes.map(\.levels), [nil, nil, nil])
        XCTAssertTrue(channel.isActive, "the connection goes on")
        let row = try XCTUnwrap(directory.snapshot(of: Self.stream))
        XCTAssertNil(row.levels)
        XCTAssertNotNil(row.lastAudioReceived)
    }

    func testAnOlderSendersStreamHasNoLevelsAndFinishes() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        try send(channel, audio(1))
        try send(channel, .endOfStream(.with {
            $0.lastSequence = 1
            $0.endSampleTime = 4_800
        }))
        try XCTUnwrap(file.pendingFinish)(.success(FinishedFile(path: Self.path, frames: 4_800, packets: 4_800, bytes: 19_200, gaps: 0)))
        channel.embeddedEventLoop.run()
        let row = try XCTUnwrap(directory.snapshot(of: Self.stream))
        XCTAssertNil(row.levels)
        XCTAssertEqual(row.state, .finished)
    }
}
