import Logging
import ServiceLifecycle
import UnixSignals

/// Runs services in a `ServiceGroup` until SIGTERM or SIGINT asks for a graceful shutdown, with a
/// bound after which the shutdown escalates to task cancellation.
public enum SignalledServiceRunner {
    /// The signals that ask for a graceful shutdown: SIGTERM (systemd, docker stop) and SIGINT (Ctrl-C).
    public static let defaultSignals: [UnixSignal] = [.sigterm, .sigint]

    /// The service group for `services`: graceful shutdown on `signals`, escalated to cancellation
    /// after `maximumGracefulShutdownDuration` (none when `nil`).
    public static func serviceGroup(
        _ services: [any Service], signals: [UnixSignal] = defaultSignals,
        maximumGracefulShutdownDuration: Duration?, logger: Logger
    ) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            gracefulShutdownSignals: signals,
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdownDuration
        return ServiceGroup(configuration: configuration)
    }

    /// Runs `services` until a signal in `signals` (or a service ending) shuts them down; rethrows
    /// the first service error, such as `ShutdownError.deadlineExceeded`.
    public static func run(
        _ services: [any Service], signals: [UnixSignal] = defaultSignals,
        maximumGracefulShutdownDuration: Duration?, logger: Logger
    ) async throws {
        try await serviceGroup(
            services, signals: signals, maximumGracefulShutdownDuration: maximumGracefulShutdownDuration, logger: logger
        ).run()
    }
}
