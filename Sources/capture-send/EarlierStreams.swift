import CaptureSender
import Foundation
import Logging

/// Delivers the streams that earlier runs of capture-send left in the spool (killed, or stopped
/// before the receiver had everything), each on a thread of its own, to the receiver named on the
/// command line, while the new stream records. A delivered stream's spool folder is removed.
final class EarlierStreams: @unchecked Sendable {
    private let lock = NSLock()
    private var senders: [StreamSender] = []
    private var threads: [Thread] = []
    private var failures: [String] = []
    private let finished = DispatchGroup()

    /// Starts delivering every earlier stream under `root` that no running capture-send owns.
    init(root: String, excluding current: UUID, template: SenderConfiguration, logger: Logger) {
        for directory in StreamSpool.streamDirectories(root: root) where !directory.hasSuffix(current.uuidString.lowercased()) {
            let spool: StreamSpool?
            do throws(SpoolError) {
                spool = try StreamSpool.openEarlier(directory: directory)
            } catch {
                logger.error("cannot read an earlier stream's spool; it is left as it is", metadata: ["folder": "\(directory)", "error": "\(error)"])
                continue
            }
            guard let spool else { continue }
            let log: PacketLog
            do throws(SpoolError) {
                log = try PacketLog(recovering: spool)
            } catch {
                logger.error("cannot read an earlier stream's spool; it is left as it is", metadata: ["folder": "\(directory)", "error": "\(error)"])
                continue
            }
            if log.lastSequence == 0 {
                // Killed before its first packet: nothing to deliver.
                log.removeSpool()
                continue
            }
            var configuration = template
            configuration.streamID = spool.meta.streamID
            configuration.streamName = spool.meta.streamName
            var streamLogger = logger
            streamLogger[metadataKey: "earlier-stream"] = "\(spool.meta.streamID)"
            streamLogger.notice("delivering audio an earlier run left in the spool", metadata: [
                "stream": "\(spool.meta.streamName)", "messages": "\(log.lastSequence - log.acknowledgedSequence)",
                "bytes": "\(log.unacknowledgedBytes)",
            ])
            let sender = StreamSender(configuration: configuration, description: spool.meta.streamDescription, log: log, logger: streamLogger)
            senders.append(sender)
            finished.enter()
            let reporter = streamLogger
            let thread = Thread { [self] in
                switch sender.run() {
                case .success(let summary):
                    log.removeSpool()
                    reporter.notice("earlier stream delivered; removed from the spool", metadata: ["file": "\(summary.fileName)"])
                case .failure(let error):
                    reporter.error("an earlier stream could not be delivered; it stays in the spool for the next run", metadata: [
                        "folder": "\(directory)", "error": "\(error)",
                    ])
                    lock.withLock { failures.append("\(directory): \(error)") }
                }
                finished.leave()
            }
            threads.append(thread)
            thread.start()
        }
    }

    /// Stops every delivery (their audio stays in the spool).
    func abandon() { senders.forEach { $0.abandon() } }

    /// Waits until every earlier stream is delivered or has failed; returns the failures.
    func wait() -> [String] {
        finished.wait()
        return lock.withLock { failures }
    }
}
