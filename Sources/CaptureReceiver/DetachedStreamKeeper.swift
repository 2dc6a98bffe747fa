import Foundation
import Logging
import NIOCore

/// Keeps the receiver's promise to detached streams: at start-up it registers the unfinalized files
/// a previous run left (so their senders can resume them), and while running it finalizes those
/// whose sender has not come back within `ReceiverConfiguration.resumeWindow`.
enum DetachedStreamKeeper {
    /// Registers the resumable files in the output folder and schedules the expiry check.
    static func start(
        configuration: ReceiverConfiguration, registry: StreamRegistry, writerPool: WriterPool, eventLoop: any EventLoop, logger: Logger
    ) {
        for found in ResumableFiles.scan(directory: configuration.outputDirectory, logger: logger) {
            registry.detach(found.stream, path: found.path, since: found.since)
            logger.notice("an unfinished stream is waiting for its sender to resume it", metadata: [
                "path": "\(found.path)", "stream-id": "\(found.stream)",
            ])
        }
        let window = configuration.resumeWindow
        expire(registry: registry, writerPool: writerPool, window: window, logger: logger)
        let period = TimeAmount.milliseconds(Int64(max(1, min(window, 60)) * 1_000))
        eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in
            expire(registry: registry, writerPool: writerPool, window: window, logger: logger)
        }
    }

    /// Finalizes (on the writer pool) every detached stream older than `window`.
    static func expire(registry: StreamRegistry, writerPool: WriterPool, window: TimeInterval, logger: Logger) {
        for stream in registry.takeDetached(before: Date().addingTimeInterval(-window)) {
            writerPool.finalizeAbandoned(path: stream.path, logger: logger)
        }
    }
}
