import CaptureService
import Foundation
import Logging
import ServiceLifecycle
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The service group both programs run in: a signal asks every service for a graceful shutdown.
/// (The receiver's own stop, its deadline and cancellation: `ReceiverServiceTests`.)
final class SignalledServiceRunnerTests: XCTestCase {
    private let quiet = Logger(label: "capture-service-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    func testSignalAsksForGracefulShutdown() async throws {
        // SIGUSR2 stands in for SIGTERM so that a mistake cannot end the test process.
        let service = RecordingService()
        let group = SignalledServiceRunner.serviceGroup(
            [service], signals: [.sigusr2], maximumGracefulShutdownDuration: .seconds(30), logger: quiet
        )
        let running = Task { try await group.run() }
        await service.events.waitUntilStarted()
        kill(getpid(), SIGUSR2)
        try await running.value
        let events = await service.events.all
        XCTAssertEqual(events, ["run", "graceful shutdown"])
    }

    func testTriggeredShutdownReachesEveryService() async throws {
        let first = RecordingService(), second = RecordingService()
        let group = SignalledServiceRunner.serviceGroup([first, second], maximumGracefulShutdownDuration: .seconds(30), logger: quiet)
        let running = Task { try await group.run() }
        await first.events.waitUntilStarted()
        await second.events.waitUntilStarted()
        await group.triggerGracefulShutdown()
        try await running.value
        let firstEvents = await first.events.all
        let secondEvents = await second.events.all
        XCTAssertEqual(firstEvents, ["run", "graceful shutdown"])
        XCTAssertEqual(secondEvents, ["run", "graceful shutdown"])
    }

    func testAServiceErrorEndsTheGroupWithThatError() async {
        let group = SignalledServiceRunner.serviceGroup(
            [FailingService()], maximumGracefulShutdownDuration: .seconds(5), logger: quiet
        )
        do {
            try await group.run()
            XCTFail("a failed service must end the group with an error")
        } catch {
            XCTAssertTrue(error is FailingService.Failure, "\(error)")
        }
    }

    func testDefaultSignalsAreTermAndInt() {
        XCTAssertEqual(SignalledServiceRunner.defaultSignals, [.sigterm, .sigint])
    }

    func testTheDeadlineErrorTellsHowToFinishTheFiles() {
        let error = ShutdownError.deadlineExceeded(service: "the receiver", deadline: .seconds(10))
        XCTAssertEqual(
            error.description,
            "the receiver did not finish shutting down within 10.0 seconds; files left open stay readable and can be finished with `capture-recv recover`")
    }
}

/// A service that runs until the group asks for a graceful shutdown, and records both.
private struct RecordingService: Service {
    let events = ServiceEvents()

    func run() async throws {
        await events.record("run")
        try? await gracefulShutdown()
        await events.record("graceful shutdown")
    }
}

/// A service whose run fails at once.
private struct FailingService: Service {
    struct Failure: Error {}

    func run() async throws {
        throw Failure()
    }
}

/// What a `RecordingService` saw, in order.
private actor ServiceEvents {
    private(set) var all: [String] = []
    private var startWaiters: [CheckedContinuation<Void, Never>] = []

    func record(_ event: String) {
        all.append(event)
        for waiter in startWaiters { waiter.resume() }
        startWaiters = []
    }

    func waitUntilStarted() async {
        if !all.isEmpty { return }
        await withCheckedContinuation { startWaiters.append($0) }
    }
}
