import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import Logging
import TestSupport
import XCTest

/// `CaptureStreamer`'s lifecycle without a reachable receiver: it starts once, captures into the
/// spool, gives a backup up after its give-up time (releasing its cursor), reports every step
/// through `events` with `.finished` last, and on `stopDelivering()` + `dispose()` leaves what the
/// main receiver never acknowledged in the spool.
final class CaptureStreamerTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("streamer-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A loopback port nothing listens on (bound, then released).
    private func closedPort() throws -> Int { try LoopbackPort.free() }

    func testABackupIsGivenUpTheMainsAudioStaysInTheSpoolAndEventsEndWithFinished() async throws {
        let mainPort = try closedPort()
        let backupPort = try closedPort()
        let source = try ToneSource(settings: .init(
            frequency: 440, levelDBFS: -12, sampleRate: 48_000, channels: 2, sample: .s16, duration: .seconds(1), paced: false))
        var configuration = CaptureStreamer.Configuration(streamName: "lifecycle", receiver: .init(host: "127.0.0.1", port: mainPort))
        configuration.backups = [.init(host: "127.0.0.1", port: backupPort)]
        configuration.backupGiveUpAfter = .milliseconds(500)
        configuration.spoolRoot = root
        configuration.deliversEarlierStreams = false
        configuration.reconnect = ReconnectPolicy(initial: .milliseconds(50), maximum: .milliseconds(100))
        configuration.progressInterval = .milliseconds(100)
        let streamer = try CaptureStreamer(
            source: source, encoder: try PCMEncoder(inputFormat: source.format), configuration: configuration, logger: Logger(label: "test"))
        let collected = Task { () -> [CaptureStreamer.Event] in
            var events: [CaptureStreamer.Event] = []
            for await event in streamer.events { events.append(event) }
            return events
        }
        try streamer.start()
        XCTAssertThrowsError(try streamer.start()) { error in
            XCTAssertEqual(error as? CaptureStreamerError, .invalidState("a streamer starts once; create a new one to stream again"))
        }
        let deadline = Date().addingTimeInterval(20)
        // Given up by its sender, then its cursor dropped by the streamer once that sender returns.
        while streamer.status.links[1].state != .gaveUp || streamer.status.links[1].progress.unacknowledgedBytes > 0, Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let status = streamer.status
        XCTAssertEqual(status.links.map(\.state), [.reconnecting, .gaveUp])
        XCTAssertEqual(status.links.map(\.receiver), ["127.0.0.1:\(mainPort)", "127.0.0.1:\(backupPort)"])
        XCTAssertEqual(status.links[1].progress.unacknowledgedBytes, 0, "the dropped backup holds nothing")
        while streamer.log.streamEnd == nil, Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertEqual(streamer.log.progress.appendedEndSampleTime, 48_000, "one second of tone captured")
        XCTAssertEqual(streamer.log.unacknowledgedBytes, 192_000, "all of it kept for the main receiver")

        streamer.stopDelivering()
        let outcome = await streamer.finished()
        XCTAssertTrue(outcome.stoppedDelivering)
        guard case .success(.endOfStream) = outcome.capture else { return XCTFail("capture ended at the source's end: \(outcome.capture)") }
        guard case .failure(.connectionLost) = outcome.main.result else { return XCTFail("the main was never reached: \(outcome.main.result)") }
        guard case .failure(.gaveUp(let receiver, let reason, let fromSecond)) = outcome.links[1].result else {
            return XCTFail("the backup was given up: \(outcome.links[1].result)")
        }
        XCTAssertEqual(receiver, "127.0.0.1:\(backupPort)")
        XCTAssertEqual(reason, .unreachable(seconds: 0.5))
        XCTAssertEqual(fromSecond, 0)
        XCTAssertEqual(outcome.incompleteBackups.map(\.receiver), ["127.0.0.1:\(backupPort)"])

        streamer.dispose()
        let kept = try FileManager.default.contentsOfDirectory(atPath: root)
        XCTAssertEqual(kept, [configuration.streamID.uuidString.lowercased()], "the stream stays in the spool for the main receiver")

        let events = await collected.value
        guard case .finished? = events.last else { return XCTFail("finished comes last: \(events)") }
        XCTAssertTrue(events.contains { if case .link(.backup(1), _, .gaveUp) = $0 { true } else { false } })
        XCTAssertTrue(events.contains { if case .link(.main, _, .reconnecting) = $0 { true } else { false } })
        XCTAssertTrue(events.contains { if case .captureEnded(.success) = $0 { true } else { false } })
        XCTAssertTrue(events.contains { if case .progress = $0 { true } else { false } })
        XCTAssertEqual(events.filter { if case .deliveryFailed = $0 { true } else { false } }.count, 2)
    }

    /// A background destination is refused with a line that says why: as the main receiver, without
    /// a spool, or sharing a foreground destination's encoder. None of them leaves a spool behind.
    func testBackgroundDestinationsThatCannotWorkAreRefused() throws {
        let source = try ToneSource(settings: .init(
            frequency: 440, levelDBFS: -12, sampleRate: 48_000, channels: 2, sample: .s16, duration: .seconds(1), paced: false))
        let main = CaptureStreamer.Receiver(host: "127.0.0.1", port: 7373)
        let archive = CaptureStreamer.Receiver(host: "127.0.0.1", port: 7374)
        var configuration = CaptureStreamer.Configuration(streamName: "refused", receiver: main)
        configuration.spoolRoot = root
        let pcm = try PCMEncoder(inputFormat: source.format)
        let other = try PCMEncoder(inputFormat: source.format)
        let rows: [(destinations: [CaptureStreamer.Destination], spool: Bool, message: String)] = [
            ([.init(receiver: main, encoder: pcm, priority: .background)], true,
             "the main receiver (the first destination) is sent the live stream: it cannot be a background destination"),
            ([.init(receiver: main, encoder: pcm), .init(receiver: archive, encoder: other, priority: .background)], false,
             "the background destination 127.0.0.1:7374 needs a spool: its audio waits there until it is acknowledged, across restarts"),
            ([.init(receiver: main, encoder: pcm), .init(receiver: archive, encoder: pcm, priority: .background)], true,
             "the background destination 127.0.0.1:7374 needs an encoder of its own: a foreground destination's stream cannot wait for it"),
        ]
        for row in rows {
            var settings = configuration
            if !row.spool { settings.spoolRoot = nil }
            XCTAssertThrowsError(try CaptureStreamer(source: source, destinations: row.destinations, configuration: settings, logger: Logger(label: "test"))) { error in
                XCTAssertEqual(error as? CaptureStreamerError, .invalidState(row.message))
            }
        }
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [], [], "nothing was created")
    }
}
