import CaptureWire

/// The delivery decisions of one `StreamSender`, as a pure state machine (events in, actions out;
/// each event gives the time, as a `Duration` since the origin of `MonotonicClock`): what a connection's end leads to
/// (delivered; delivered although the confirmation was lost; continued as a new stream; a failure
/// reconnecting cannot mend; or a reconnect after a backoff), and when a backup receiver is given up.
/// `StreamSender` is its shell: it connects, waits and logs as the actions say.
///
/// **Giving a backup up.** A backup that has lacked audio for `giveUpAfter` without making
/// progress is given up: its acknowledged position has not advanced since the later of its last
/// advance and the append of the oldest entry it lacks (`Backlog.stalledSince`). That one clock
/// covers a backup that cannot be reached, one that is connected but acknowledges nothing, and one
/// that acknowledges what was never sent (a protocol violation advances nothing): reconnecting does
/// not reset it, only progress does, and a backup that lacks nothing (the capture paused, or it has
/// everything) is never stalled. The reason names which of the three it was. The main receiver
/// (`giveUpAfter` nil) is never given up. (A backup whose backlog would cost the main receiver
/// audio or pace is given up at once by the packet log, `BackupRoom`.)
///
/// **Backoff.** `ReconnectPolicy`'s delays; a connection that got past the handshake resets them,
/// unless it ended because the receiver broke the protocol (a receiver that answers every
/// connection with a violation is not reconnected to in a tight loop). A rate-limited refusal waits
/// at least its Retry-After (at most an hour).
struct DeliveryPolicy: Sendable {
    /// Where a receiver's acknowledgement cursor stands, as the packet log reports it.
    struct Backlog: Sendable, Equatable {
        /// When its acknowledged position last advanced (nil: not in this run).
        var lastAdvanceAt: Duration?
        /// When the oldest entry it has not acknowledged was appended (nil: it lacks nothing).
        var oldestLackingAppendedAt: Duration?

        /// Since when it has lacked audio without its position advancing; nil when it lacks nothing.
        var stalledSince: Duration? {
            oldestLackingAppendedAt.map { max($0, lastAdvanceAt ?? $0) }
        }
    }

    /// What happened.
    enum Event: Sendable, Equatable {
        /// A connection's handshake was accepted: the receiver is reachable and connected.
        case accepted(at: Duration)
        /// A connection ended with `outcome`. `complete`: the receiver acknowledged every entry
        /// and the stream has ended. `random`: uniform in [0, 1), for the backoff's jitter.
        case connectionEnded(ConnectionOutcome, at: Duration, backlog: Backlog, complete: Bool, random: Double)
        /// A look at the clock (while connecting, connected or waiting to reconnect).
        case check(at: Duration, backlog: Backlog)
    }

    /// What to do.
    enum Action: Sendable, Equatable {
        /// Go on; look again (`check`) at `checkAt` (nil: no need, nothing can be given up).
        case keepGoing(checkAt: Duration?)
        /// The receiver confirmed the whole stream.
        case delivered(StreamSummary)
        /// The connection ended with `refusal`, but the receiver had acknowledged every entry and
        /// the end: it finished the file, and only its confirmation was lost.
        case deliveredUnconfirmed(refusal: SenderError)
        /// The receiver cannot resume this stream: deliver the rest as a new stream that continues it.
        /// `receiverHoldsUntil`: set when the receiver lost audio it had acknowledged (see
        /// `ConnectionOutcome.cannotResume`), the sample index where what it holds ends.
        case continueAsNewStream(refusal: SenderError, receiverHoldsUntil: Int64?)
        /// Reconnecting cannot help.
        case fail(SenderError)
        /// Wait `after`, then connect again (`error` ended the connection).
        case reconnect(after: Duration, error: SenderError)
        /// Give this backup receiver up.
        case giveUp(SenderError.GiveUpReason)
    }

    /// Delays between attempts.
    let reconnect: ReconnectPolicy
    /// For a backup: how long it may go without progress while it lacks audio before it is given
    /// up; nil for the main receiver.
    let giveUpAfter: Duration?

    /// Failed attempts since the last that counted as a success (for the backoff).
    private(set) var failures = 0
    /// A connection is accepted and has not ended.
    private var connected = false
    /// The last moment a connection was known accepted (its acceptance, or its end).
    private var lastConnectedAt: Duration?
    /// The last protocol violation of the receiver: when, and what.
    private var lastViolation: (at: Duration, detail: WireError)?

    /// `giveUpAfter`: nil for never (the main receiver); below zero counts as zero.
    init(reconnect: ReconnectPolicy, giveUpAfter: Duration?) {
        self.reconnect = reconnect
        self.giveUpAfter = giveUpAfter.map { max(.zero, $0) }
    }

    mutating func handle(_ event: Event) -> Action {
        switch event {
        case .accepted(let now):
            connected = true
            lastConnectedAt = now
            return .keepGoing(checkAt: nil)
        case .connectionEnded(let outcome, let now, let backlog, let complete, let random):
            return connectionEnded(outcome, now: now, backlog: backlog, complete: complete, random: random)
        case .check(let now, let backlog):
            guard let giveUpAfter else { return .keepGoing(checkAt: nil) }
            guard let deadline = deadline(backlog) else {
                // Nothing lacked now: a stall that starts later ends no earlier than this.
                return .keepGoing(checkAt: now + giveUpAfter)
            }
            return now >= deadline ? .giveUp(reason(backlog, now: now)) : .keepGoing(checkAt: deadline)
        }
    }

    private mutating func connectionEnded(_ outcome: ConnectionOutcome, now: Duration, backlog: Backlog, complete: Bool, random: Double) -> Action {
        if connected || outcome.streamed { lastConnectedAt = now }
        connected = false
        switch outcome {
        case .delivered(let summary):
            return .delivered(summary)
        case .cannotResume(let refusal, let receiverHoldsUntil):
            // Everything acknowledged and no resume point named: the receiver finished the file and
            // only its confirmation was lost. A resume point named is audio the receiver lost.
            if complete, receiverHoldsUntil == nil { return .deliveredUnconfirmed(refusal: refusal) }
            failures = 0
            return .continueAsNewStream(refusal: refusal, receiverHoldsUntil: receiverHoldsUntil)
        case .interrupted(let error, let retry, let streamed):
            guard retry else { return complete ? .deliveredUnconfirmed(refusal: error) : .fail(error) }
            if case .protocolViolation(let detail) = error {
                lastViolation = (now, detail)
            } else if streamed {
                failures = 0
            }
            var delay = reconnect.delay(afterFailures: failures, random: random)
            if case .rateLimited(_, let retryAfter) = error { delay = max(delay, Self.retryAfterWait(retryAfter)) }
            failures += 1
            if let deadline = deadline(backlog), now >= deadline { return .giveUp(reason(backlog, now: now)) }
            return .reconnect(after: delay, error: error)
        }
    }

    /// When a backup lacking audio without progress is given up; nil for the main receiver, or
    /// when it lacks nothing.
    private func deadline(_ backlog: Backlog) -> Duration? {
        guard let giveUpAfter, let since = backlog.stalledSince else { return nil }
        return since + giveUpAfter
    }

    /// Why the stall happened: a violation during it, a connection during it, or neither.
    private func reason(_ backlog: Backlog, now: Duration) -> SenderError.GiveUpReason {
        let seconds = (giveUpAfter ?? .zero).inSeconds
        let since = backlog.stalledSince ?? now
        if let lastViolation, lastViolation.at >= since {
            return .brokeProtocol(seconds: seconds, detail: lastViolation.detail)
        }
        if connected || (lastConnectedAt.map { $0 >= since } ?? false) {
            return .noProgress(seconds: seconds)
        }
        return .unreachable(seconds: seconds)
    }
}

extension DeliveryPolicy {
    /// A rate-limited refusal's Retry-After (seconds, as the receiver sent it) as a wait: at most
    /// an hour, and none when it is not a number.
    static func retryAfterWait(_ seconds: Double) -> Duration {
        guard seconds.isFinite, seconds > 0 else { return .zero }
        return .seconds(min(seconds, 3_600))
    }
}

extension ConnectionOutcome {
    /// Whether the receiver confirmed the whole stream.
    var isDelivered: Bool {
        if case .delivered = self { return true }
        return false
    }

    /// Whether the connection got past the handshake.
    var streamed: Bool {
        switch self {
        case .delivered: return true
        case .interrupted(_, _, let streamed): return streamed
        case .cannotResume: return false
        }
    }
}
