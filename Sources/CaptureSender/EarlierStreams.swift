import CaptureCore
import Foundation
import Logging

/// Delivers the streams that earlier runs of capture-send left in the spool (killed, or stopped
/// before the receiver had everything) and that belong to this run's destination (the same
/// HOST:PORT as given and the same TLS identity), each in a task of its own, while the new stream
/// records. Streams of other receivers, and of spools too old to say, are left for their own runs
/// or `capture-send spool deliver`. A delivered stream's spool folder is removed. Damage found in
/// an earlier stream's spool is logged as an error, in the words `spool deliver` uses: which
/// seconds were lost and where the damaged bytes are kept; and `finished()` returns it, so that the run
/// does not end as if all had gone well.
public final class EarlierStreams: Sendable {
    private let deliveries = SpooledStreamDeliveries()
    /// Earlier streams found damaged before any delivery started (an unreadable `meta.json`, a spool
    /// that cannot be delivered with its damage): each stays in the spool, and the line says why.
    private let damaged: [String]

    /// Starts delivering every earlier stream under `root` that belongs to `destination` and that
    /// no running capture-send owns. `foreground`: where this run's live destinations stand; an
    /// earlier background stream (`SpoolMeta.background`) is delivered behind them, as it was.
    public init(
        root: String, excluding current: Set<UUID>, destination: SpoolDestination, template: SenderConfiguration,
        foreground: (@Sendable () -> ForegroundState)? = nil, logger: Logger
    ) {
        StreamSpool.removeAbandonedPartials(root: root)
        var others = 0
        var unknown: [String] = []
        var damaged: [String] = []
        let currentNames = current.map { $0.uuidString.lowercased() }
        for directory in StreamSpool.streamDirectories(root: root) where !currentNames.contains(where: { directory.hasSuffix($0) }) {
            let meta: SpoolMeta
            do throws(SpoolError) {
                guard let inspected = try StreamSpool.inspect(directory: directory) else { continue }
                meta = inspected.meta
            } catch {
                logger.error("an earlier stream's spool is damaged; it is left in the spool as it is", metadata: [
                    "folder": "\(directory)", "error": "\(error)",
                ])
                damaged.append("\(error)")
                continue
            }
            switch SpooledStreams.ownership(of: meta, for: destination) {
            case .other:
                others += 1
                continue
            case .unknown:
                unknown.append(meta.streamID.uuidString.lowercased())
                continue
            case .own:
                break
            }
            let claim: SpooledStreams.Claim
            do throws(SpoolError) {
                claim = try SpooledStreams.claim(directory: directory)
            } catch {
                logger.error("cannot read an earlier stream's spool; it is left as it is", metadata: ["folder": "\(directory)", "error": "\(error)"])
                continue
            }
            switch claim {
            case .gone, .inUse:
                continue
            case .removedEmpty(let meta):
                logger.notice("an earlier stream held no captured audio; removed from the spool without delivering it", metadata: [
                    "stream": "\(meta.streamID.uuidString.lowercased())", "folder": "\(directory)", "pid": "\(getpid())",
                ])
            case .undeliverable(let meta, let report):
                logger.error("\(report.undelivered(streamName: meta.streamName))", metadata: [
                    "stream": "\(meta.streamID.uuidString.lowercased())", "folder": "\(directory)",
                ])
                damaged.append(report.undelivered(streamName: meta.streamName))
            case .ready(let spool, let log):
                var configuration = template
                if spool.meta.background == true { configuration.foreground = foreground }
                deliveries.start(spool: spool, log: log, configuration: configuration, logger: logger)
            }
        }
        if others > 0 {
            logger.notice("earlier streams for other receivers stay in the spool (see capture-send spool list)", metadata: ["streams": "\(others)"])
        }
        if !unknown.isEmpty {
            logger.notice("earlier streams without a recorded receiver stay in the spool; send each with \(template.settingNames.name(of: .spoolDelivery, value: "HOST:PORT"))", metadata: [
                "streams": "\(unknown.joined(separator: ","))",
            ])
        }
        self.damaged = damaged
    }

    /// Stops every delivery (their audio stays in the spool).
    public func abandon() { deliveries.abandon() }

    /// Waits until every earlier stream is delivered or has failed, and returns what did not go
    /// well: `failures`, the streams that stay in the spool and why (a delivery that failed, damage
    /// that keeps a stream from being delivered, an unreadable `meta.json`); `losses`, the streams
    /// delivered without audio that spool damage destroyed (which seconds, and where the damaged
    /// bytes are kept).
    public func finished() async -> (failures: [String], losses: [String]) {
        let failed = await deliveries.finished()
        let losses = deliveries.results.compactMap { result -> String? in
            guard result.error == nil, let damage = result.damage, damage.lostSeconds != nil else { return nil }
            return damage.delivered(streamName: result.streamName, receiver: result.receiver)
        }
        return (damaged + failed, losses)
    }
}
