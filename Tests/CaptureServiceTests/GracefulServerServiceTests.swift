import CaptureService
import Foundation
import Logging
import ServiceLifecycle
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The receiver's graceful shutdown: start, wait for SIGTERM/SIGINT (or a trigger), stop within a deadline.
final class GracefulServerServiceTests: XCTestCase {
    private let quiet = Logger(label: "capture-service-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    func testTriggeredShutdownStopsTheServerWithItsDeadlineAndEndsCleanly() async throws {
        let server = FakeServer()
        let service = server.service(deadline: .seconds(7), logger: quiet)
        let group = SignalledServiceRunner.serviceGroup([service], maximumGracefulShutdownDuration: .seconds(30), logger: quiet)
        let running = Task { try await group.run() }
        await server.waitUntilStarted()
        let beforeShutdown = await server.events
        XCTAssertEqual(beforeShutdown, ["start"], "the server runs until shutdown is asked for")
        await group.triggerGracefulShutdown()
        try await running.value
        let events = await server.events
        XCTAssertEqual(events, ["start", "shutDown 7 seconds"])
    }

    func testSignalAsksForGracefulShutdown() async throws {
        // SIGUSR2 stands in for SIGTERM so that a mistake cannot end the test process.
        let server = FakeServer()
        let group = SignalledServiceRunner.serviceGroup(
            [server.service(deadline: .seconds(3), logger: quiet)], signals: [.sigusr2],
            maximumGracefulShutdownDuration: .seconds(30), logger: quiet
        )
        let running = Task { try await group.run() }
        await server.waitUntilStarted()
        kill(getpid(), SIGUSR2)
        try await running.value
        let events = await server.events
        XCTAssertEqual(events, ["start", "shutDown 3 seconds"])
    }

    func testDefaultSignalsAreTermAndInt() {
        XCTAssertEqual(SignalledServiceRunner.defaultSignals, [.sigterm, .sigint])
    }

    func testShutdownPastTheDeadlineIsReportedAsAnError() async throws {
        let server = FakeServer(cleanShutdown: false)
        let group = SignalledServiceRunner.serviceGroup(
            [server.service(deadline: .milliseconds(500), logger: quiet)], maximumGracefulShutdownDuration: .seconds(30), logger: quiet
        )
        let running = Task { try await group.run() }
        await server.waitUntilStarted()
        await group.triggerGracefulShutdown()
        do {
            try await running.value
            XCTFail("an unclean shutdown must be reported")
        } catch let error as ShutdownError {
            XCTAssertEqual(error, .deadlineExceeded(service: "fake", deadline: .milliseconds(500)))
            XCTAssertTrue(error.description.contains("capture-recv recover"), error.description)
        }
    }

    func testCancellationStillStopsTheServer() async throws {
        let server = FakeServer()
        let group = SignalledServiceRunner.serviceGroup(
            [server.service(deadline: .seconds(2), logger: quiet)], maximumGracefulShutdownDuration: nil, logger: quiet
        )
        let running = Task { try await group.run() }
        await server.waitUntilStarted()
        running.cancel()
        _ = try? await running.value
        let events = await server.events
        XCTAssertEqual(events, ["start", "shutDown 2 seconds"])
    }

    func testFailedStartEndsTheGroupWithThatErrorAndNoStop() async {
        let server = FakeServer(startError: FakeServer.StartFailure())
        let group = SignalledServiceRunner.serviceGroup(
            [server.service(deadline: .seconds(1), logger: quiet)], maximumGracefulShutdownDuration: .seconds(5), logger: quiet
        )
        do {
            try await group.run()
            XCTFail("a failed start must end the group with an error")
        } catch {
            XCTAssertTrue(error is FakeServer.StartFailure, "\(error)")
        }
        let events = await server.events
        XCTAssertEqual(events, ["start"])
    }
}

/// A server that records what was asked of it.
actor FakeServer {
    struct StartFailure: Error {}

    private(set) var events: [String] = []
    private let cleanShutdown: Bool
    private let startError: StartFailure?
    private var started = false
    private var startWaiters: [CheckedContinuation<Void, Never>] = []

    init(cleanShutdown: Bool = true, startError: StartFailure? = nil) {
        self.cleanShutdown = cleanShutdown
        self.startError = startError
    }

    nonisolated func service(deadline: Duration, logger: Logger) -> GracefulServerService {
        GracefulServerService(
            name: "fake", shutdownDeadline: deadline, logger: logger,
            start: { try await self.start() },
            shutDown: { deadline in await self.shutDown(deadline) }
        )
    }

    func start() throws(StartFailure) {
        events.append("start")
        if let startError { throw startError }
        started = true
        for waiter in startWaiters { waiter.resume() }
        startWaiters = []
    }

    func shutDown(_ deadline: Duration) -> Bool {
        events.append("shutDown \(deadline.components.seconds) seconds")
        return cleanShutdown
    }

    func waitUntilStarted() async {
        if started { return }
        await withCheckedContinuation { startWaiters.append($0) }
    }
}
