import CaptureCore

/// Decides when the receiver's acknowledgements are overdue, so that the status line can say
/// "no ack for N s" instead of "streaming" while a receiver is hung (stopped, or stuck on its disk)
/// and the connection has not broken yet.
///
/// The receiver acknowledges audio once it is durably written, within its `--sync-ms` (200 ms by
/// default) of receiving it. Acknowledgements are overdue when, on a streaming link, audio is waiting
/// for one and nothing has been acknowledged for `overdueAfter` (3 s): counted from the latest of
/// the last acknowledgement (or the resume point of a handshake), the moment the oldest
/// unacknowledged audio was appended, and the moment the link was seen streaming. The last of these
/// keeps a fresh connection from being blamed for an outage before it. While the link is
/// connecting or reconnecting, nothing is overdue: the link state says what is going on.
///
/// The times fed in and the wait returned are seconds on one monotonic clock (measured figures, as
/// the status snapshot carries them); `nil` means "never" (no acknowledgement yet, or no
/// unacknowledged audio).
public struct AcknowledgementWatch: Sendable {
    /// The default threshold: 3 s, fifteen times the receiver's default sync interval, and long
    /// enough for a slow disk's occasional sync.
    public static let defaultOverdueAfter = Duration.seconds(3)

    /// How long the receiver may go without an acknowledgement, while audio waits for one, before
    /// its acknowledgements are overdue (and the status line says so).
    public var overdueAfter: Duration
    private var streamingSince: Double?

    public init(overdueAfter: Duration = AcknowledgementWatch.defaultOverdueAfter) {
        self.overdueAfter = max(.zero, overdueAfter)
    }

    /// The seconds the receiver has gone without acknowledging audio that waits for it, when that
    /// is overdue; `nil` when acknowledgements are not overdue.
    /// - Parameters:
    ///   - now: the current time.
    ///   - link: the link's state now.
    ///   - lastAcknowledgement: when the receiver last reported its durable position.
    ///   - oldestUnacknowledged: when the oldest audio not yet acknowledged was appended.
    public mutating func overdue(
        now: Double, link: SenderStatusSnapshot.LinkState, lastAcknowledgement: Double?, oldestUnacknowledged: Double?
    ) -> Double? {
        guard link == .streaming else {
            streamingSince = nil
            return nil
        }
        let since = streamingSince ?? now
        streamingSince = since
        guard let oldestUnacknowledged else { return nil }
        let waitingSince = max(since, oldestUnacknowledged, lastAcknowledgement ?? -.infinity)
        let waited = now - waitingSince
        return waited >= overdueAfter.inSeconds ? waited : nil
    }
}
