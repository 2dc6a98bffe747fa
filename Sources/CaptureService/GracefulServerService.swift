import Logging
import ServiceLifecycle

/// A server with a start and a bounded stop, run as a swift-service-lifecycle `Service`: `run()`
/// starts it, waits until the service group asks for a graceful shutdown (SIGTERM/SIGINT, or
/// `ServiceGroup.triggerGracefulShutdown()`), then stops it with a deadline. If the task is
/// cancelled instead, it stops the server all the same.
///
/// `run()` returns normally after a clean stop and throws `ShutdownError.deadlineExceeded` when the
/// stop reports that the deadline passed, so the program can choose its exit status.
public struct GracefulServerService: Service {
    /// The name used in log lines and errors.
    public let name: String
    /// How long the stop may take.
    public let shutdownDeadline: Duration
    private let start: @Sendable () async throws -> Void
    private let shutDown: @Sendable (_ deadline: Duration) async -> Bool
    private let logger: Logger

    /// - Parameters:
    ///   - start: starts the server; returns once it serves (an error ends `run()` with that error).
    ///   - shutDown: stops the server within `deadline` (stop accepting, tell clients, finish
    ///     files); returns whether it finished cleanly in time. Work that blocks (the disk) runs
    ///     off the task pool inside it (`BlockingWork`).
    public init(
        name: String, shutdownDeadline: Duration, logger: Logger,
        start: @escaping @Sendable () async throws -> Void,
        shutDown: @escaping @Sendable (_ deadline: Duration) async -> Bool
    ) {
        self.name = name
        self.shutdownDeadline = shutdownDeadline
        self.logger = logger
        self.start = start
        self.shutDown = shutDown
    }

    public func run() async throws {
        try await start()
        logger.debug("service started", metadata: ["service": "\(name)"])
        do {
            try await gracefulShutdown()
            logger.notice("shutting down gracefully", metadata: ["service": "\(name)", "deadline": "\(shutdownDeadline)"])
        } catch {
            logger.notice("cancelled: shutting down", metadata: ["service": "\(name)", "deadline": "\(shutdownDeadline)"])
        }
        guard await shutDown(shutdownDeadline) else {
            throw ShutdownError.deadlineExceeded(service: name, deadline: shutdownDeadline)
        }
        logger.debug("service stopped", metadata: ["service": "\(name)"])
    }
}
