import CaptureConsole
import CaptureMetrics
import CaptureReceiver
import Foundation
import Logging
import ServiceLifecycle
import XCTest

/// A console server running in a service group of its own for a test, on a free loopback port.
final class RunningConsole: @unchecked Sendable {
    let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    init(
        host: String = "127.0.0.1", access: ConsoleAccess? = nil, metrics: ReceiverMetrics? = ReceiverMetrics(),
        directory: StreamDirectory? = nil, listening: (any LiveListening)? = nil, idleTimeout: Duration = .seconds(30),
        tlsCertificatePath: String? = nil, tlsKeyPath: String? = nil, recordings: RecordingCatalogue? = nil
    ) async throws {
        let portBox = PortBox()
        let settings = ConsoleSettings(
            host: host, port: 0, access: try access ?? ConsoleAccess(host: host, tokens: nil),
            tlsCertificatePath: tlsCertificatePath, tlsKeyPath: tlsKeyPath, idleTimeout: idleTimeout)
        let service = try ConsoleServer.make(
            settings: settings, metrics: metrics, directory: directory, listening: listening, recordings: recordings, logger: Logger(label: "console-test"),
            onListening: { portBox.set($0) })
        group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [service], logger: Logger(label: "console-test")))
        let group = self.group
        task = Task { try await group.run() }
        port = try await portBox.wait()
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// The port the server announces, waited for.
private final class PortBox: @unchecked Sendable {
    private let lock = NSLock()
    private var port: Int?

    func set(_ value: Int) { lock.withLock { port = value } }

    func wait() async throws -> Int {
        for _ in 0..<1_000 {
            if let port = lock.withLock({ port }) { return port }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw CancellationError()
    }
}
