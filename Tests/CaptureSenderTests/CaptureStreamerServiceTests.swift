import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// `CaptureStreamer` as a swift-service-lifecycle `Service`, against a receiver that cannot be
/// reached (so delivery never ends by itself): a graceful shutdown stops capture and lets delivery
/// go on; cancellation stops delivering, and what the receiver lacks stays in the spool.
final class CaptureStreamerServiceTests: XCTestCase {
    private var root: String!
    private let quiet = Logger(label: "streamer-service-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("streamer-service-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// An hour of paced tone for a receiver nobody listens at.
    private func makeStreamer() throws -> CaptureStreamer {
        let source = try ToneSource(settings: .init(
            frequency: 440, levelDBFS: -12, sampleRate: 48_000, channels: 2, sample: .s16, duration: .seconds(3_600), paced: true))
        var configuration = CaptureStreamer.Configuration(
            streamName: "service", receiver: .init(host: "127.0.0.1", port: try LoopbackPort.free()))
        configuration.spoolRoot = root
        configuration.deliversEarlierStreams = false
        configuration.reconnect = ReconnectPolicy(initial: .milliseconds(50), maximum: .milliseconds(100))
        configuration.progressInterval = .milliseconds(50)
        return try CaptureStreamer(
            source: source, encoder: try PCMEncoder(inputFormat: source.format), configuration: configuration, logger: quiet)
    }

    /// Waits for the first progress event that shows captured audio.
    private func untilCapturing(_ events: inout AsyncStream<CaptureStreamer.Event>.Iterator) async {
        while let event = await events.next() {
            if case .progress(let status) = event, status.secondsCaptured > 0 { return }
        }
    }

    func testAGracefulShutdownStopsCaptureAndDeliveryGoesOnUntilCancelled() async throws {
        let streamer = try makeStreamer()
        var events = streamer.events.makeAsyncIterator()
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: streamer, successTerminationBehavior: .gracefullyShutdownGroup)], logger: quiet))
        let running = Task { try await group.run() }
        await untilCapturing(&events)
        await group.triggerGracefulShutdown()
        // Capture ends at once (not at the tone's hour); the delivery waits for the receiver.
        var captureEnd: Result<CaptureQueue.Completion, SenderError>?
        while captureEnd == nil, let event = await events.next() {
            if case .captureEnded(let result) = event { captureEnd = result }
        }
        guard case .success(.stopped)? = captureEnd else { return XCTFail("capture stopped by the shutdown: \(String(describing: captureEnd))") }
        XCTAssertNotNil(streamer.log.streamEnd, "the stream has its end")
        XCTAssertLessThan(streamer.log.progress.appendedEndSampleTime, 3_600 * 48_000)
        XCTAssertEqual(streamer.log.unacknowledgedBytes, Int(streamer.log.progress.appendedEndSampleTime) * 4, "all of it kept for the receiver")

        running.cancel()
        try await running.value
        let outcome = await streamer.finished()
        XCTAssertTrue(outcome.stoppedDelivering, "the cancellation stopped delivering")
        guard case .success(.stopped) = outcome.capture else { return XCTFail("\(outcome.capture)") }
        streamer.dispose()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root).count, 1, "the stream stays in the spool")
    }

    /// Runs `streamer` as its own task, cancels the run once it captures, and returns the outcome.
    private func cancelledOnceCapturing(_ streamer: CaptureStreamer) async throws -> CaptureStreamer.Outcome {
        var events = streamer.events.makeAsyncIterator()
        let running = Task { try await streamer.run() }
        await untilCapturing(&events)
        running.cancel()
        try await running.value
        return await streamer.finished()
    }

    func testCancellingTheRunStopsDeliveringAndCapture() async throws {
        let streamer = try makeStreamer()
        let outcome = try await cancelledOnceCapturing(streamer)
        XCTAssertTrue(outcome.stoppedDelivering)
        guard case .success(.stopped) = outcome.capture else { return XCTFail("capture stops with delivery: \(outcome.capture)") }
        guard case .failure = outcome.main.result else { return XCTFail("the receiver was never reached: \(outcome.main.result)") }
        XCTAssertGreaterThan(streamer.log.unacknowledgedBytes, 0)
        streamer.dispose()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root).count, 1, "the stream stays in the spool")
    }

    func testRunStartsTheStreamerOnlyIfItWasNotStarted() async throws {
        let streamer = try makeStreamer()
        try streamer.start()
        // run() does not start it again (which would throw).
        let outcome = try await cancelledOnceCapturing(streamer)
        XCTAssertTrue(outcome.stoppedDelivering)
        streamer.dispose()
    }
}
