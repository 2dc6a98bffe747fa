import Synchronization

/// `--spool-max` shared by every encoding of one capture, the foreground encodings first.
///
/// Each packet log asks, before an append, how many unacknowledged bytes it may hold
/// (`limit(for:)`); past that, its new audio overflows to a local file and its stream gets a gap
/// (`PacketLog`). The rule, a pure function (`limit(capacity:background:ownHeld:others:)`):
/// - a foreground encoding may hold an even share of what the background encodings do not hold:
///   (capacity − background held) / foreground encodings. Without background encodings that is
///   the even split of the capacity each encoding always had;
/// - a background encoding may grow only while everything held stays within half the capacity.
///   So the background gives way first: when room runs out, its audio overflows while the
///   foreground keeps at least half the capacity to itself.
///
/// Sendability: the member list is guarded by a `Mutex`; the logs are thread-safe themselves. A
/// limit reads each log's figure under that log's own lock, one at a time and outside the asking
/// log's lock, so no two log locks are ever held together.
public final class SpoolBudget: Sendable {
    /// `--spool-max`, for every encoding together.
    public let capacity: Int
    private let members = Mutex<[Member]>([])

    /// A log of the budget, held weakly (each log holds its budget).
    private struct Member: Sendable {
        weak var log: PacketLog?
        let background: Bool
    }

    public init(capacity: Int) {
        self.capacity = max(capacity, 1)
    }

    /// Adds an encoding's log to the budget.
    public func add(_ log: PacketLog, background: Bool) {
        members.withLock { $0.append(Member(log: log, background: background)) }
    }

    /// Whether `log` is one of the budget's background encodings.
    public func isBackground(_ log: PacketLog) -> Bool {
        members.withLock { list in list.first { $0.log === log }?.background ?? false }
    }

    /// The most `log` may hold now (unacknowledged bytes).
    func limit(for log: PacketLog) -> Int {
        // A foreground encoding alone (most runs) may hold the whole capacity, as the rule says:
        // answered without copying the list or reading any log's figure.
        if members.withLock({ $0.count == 1 && $0[0].log === log && !$0[0].background }) { return capacity }
        let list = members.withLock { $0 }
        guard let own = list.first(where: { $0.log === log }) else { return capacity }
        let others = list.filter { $0.log !== log }.map { (background: $0.background, held: $0.log?.heldBytesTotal ?? 0) }
        return Self.limit(capacity: capacity, background: own.background, ownHeld: log.heldBytesTotal, others: others)
    }

    /// The rule: the most an encoding may hold, given the capacity, whether it is a background
    /// one, what it holds and what the others (foreground or background) hold.
    static func limit(capacity: Int, background: Bool, ownHeld: Int, others: [(background: Bool, held: Int)]) -> Int {
        if background {
            let othersHeld = others.reduce(0) { $0 + $1.held }
            return max(0, capacity / 2 - othersHeld)
        }
        let backgroundHeld = others.filter(\.background).reduce(0) { $0 + $1.held }
        let foregroundCount = 1 + others.filter { !$0.background }.count
        return max(0, capacity - backgroundHeld) / foregroundCount
    }
}
