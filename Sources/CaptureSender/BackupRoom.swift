import CaptureCore
import Foundation

/// How much audio not yet acknowledged the packet log keeps for any receiver, and which backup
/// receivers to give up so that what only they lack never costs the main receiver its audio or its
/// pace: a pure decision, made by `PacketLog` under its lock before each append.
///
/// The room is the main receiver's: what it may hold before its own audio would overflow to a local
/// file (`--spool-max`; half of it while an overflow lasts) or, for a source read faster than real
/// time, before the source would wait for it. A backup whose backlog would pass the room while the
/// main's fits is given up at once; keeping it would give the main a gap (or hold it up). When the
/// main's own backlog does not fit, no backup is given up for it: the main overflows (or waits) of
/// its own accord, and dropping a backup would not help it.
public struct BackupRoom: Sendable, Equatable, CustomStringConvertible {
    /// Which limit the room is.
    public enum Limit: Sendable, Equatable {
        /// `--spool-max`: beyond it, captured audio overflows to a local file and the stream gets a gap.
        case spoolMax
        /// What a source read faster than real time may keep unacknowledged before it waits
        /// (`PacketLog.memoryLimit`; it is in memory when there is no spool).
        case fastSource
    }

    /// Bytes of audio not acknowledged that may be kept for any receiver.
    public var bytes: Int
    /// Which limit that is.
    public var limit: Limit

    public init(bytes: Int, limit: Limit) {
        self.bytes = bytes
        self.limit = limit
    }

    /// The backups to give up before `incoming` more bytes are kept, given the main receiver's
    /// backlog and each backup's (bytes not acknowledged), in the order given.
    public func backupsToGiveUp(incoming: Int, mainHeld: Int, backups: [(destination: LogDestination, held: Int)]) -> [LogDestination] {
        guard fits(mainHeld, incoming) else { return [] }
        return backups.filter { !fits($0.held, incoming) }.map(\.destination)
    }

    private func fits(_ held: Int, _ incoming: Int) -> Bool {
        let (total, overflow) = held.addingReportingOverflow(incoming)
        return !overflow && total <= bytes
    }

    /// "its acknowledgements fell 1.0 MiB behind, the spool's limit (--spool-max), and …", for the
    /// line that names a backup given up for it.
    public var description: String { message(naming: LibrarySettingNames()) }

    /// The text, naming the spool's limit as `naming` spells it.
    public func message(naming: any SettingNaming) -> String {
        switch limit {
        case .spoolMax:
            return "its acknowledgements fell \(Self.size(bytes)) behind, the spool's limit (\(naming.name(of: .spoolLimit))), and keeping more for it would have cost the main receiver audio"
        case .fastSource:
            return "its acknowledgements fell \(Self.size(bytes)) behind, the most a source read faster than real time may keep unacknowledged, and waiting for it would have held up the main receiver"
        }
    }

    /// 1.0 MiB, 3.0 MiB, 4.0 GiB (plain bytes below a mebibyte).
    static func size(_ bytes: Int) -> String {
        guard bytes >= 1 << 20 else { return "\(bytes) bytes" }
        let mebibytes = Double(bytes) / Double(1 << 20)
        return mebibytes >= 1_024 ? String(format: "%.1f GiB", mebibytes / 1_024) : String(format: "%.1f MiB", mebibytes)
    }
}
