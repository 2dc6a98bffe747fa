import CaptureCore
/// How capture-send stops when it is asked to: the rules for SIGINT (Ctrl-C) and SIGTERM (systemd,
/// `docker stop`, `kill`), as a pure state machine (events in, actions out) that the executable
/// carries out.
///
/// - The first SIGINT or SIGTERM stops capture and lets the sender deliver what was captured, for
///   at most `stopTimeout` (none when nil).
/// - A second SIGINT or SIGTERM, or the stop timeout passing, stops delivery at once: what the
///   receiver has not acknowledged stays in the spool, and the program says so (capture-send
///   exits with its own status for that, 3).
/// - Any further signal asks for an immediate exit, in case ending delivery itself hangs.
public struct SenderStopSequence: Sendable, Equatable {
    /// A signal that asks capture-send to stop.
    public enum StopSignal: String, Sendable, Equatable {
        /// SIGINT: Ctrl-C at a terminal.
        case interrupt = "SIGINT"
        /// SIGTERM: systemd's and Docker's stop, `kill`.
        case terminate = "SIGTERM"
    }

    /// What happens to the sender.
    public enum Event: Sendable, Equatable {
        /// A stop signal arrived.
        case signal(StopSignal)
        /// The stop timeout that the first signal started has passed.
        case stopTimeoutPassed
        /// The receiver confirmed the whole stream (or the run ended on its own).
        case finished
    }

    /// Why delivery was stopped before the receiver had everything.
    public enum AbandonReason: Sendable, Equatable, CustomStringConvertible {
        /// A second stop signal.
        case secondSignal(StopSignal)
        /// The stop timeout passed while delivering.
        case stopTimeout(Duration)

        public var description: String { message(naming: LibrarySettingNames()) }

        /// The reason's text, naming the stop timeout as `naming` spells it.
        public func message(naming: any SettingNaming) -> String {
            switch self {
            case .secondSignal(let signal): return "a second stop signal (\(signal.rawValue))"
            case .stopTimeout(let timeout): return "\(naming.name(of: .stopTimeout)) (\(timeout.secondsText) s) passed while delivering"
            }
        }
    }

    /// What the executable must do now.
    public enum Action: Sendable, Equatable {
        /// Nothing.
        case none
        /// Stop capture (drain what is queued) and keep delivering; start a timer of `deadline`
        /// that reports `.stopTimeoutPassed` (no timer when nil).
        case stopCapture(deadline: Duration?)
        /// Stop delivering now: close the connections, keep what is unacknowledged in the spool,
        /// report it and end the run as abandoned.
        case abandonDelivery(AbandonReason)
        /// Ending delivery did not finish and another signal came: end the run at once, as abandoned.
        case exitImmediately
    }

    /// Where the run stands.
    public enum Phase: Sendable, Equatable {
        /// Capturing and delivering.
        case running
        /// Capture stopped; delivering what was captured.
        case draining
        /// Delivery stopped; the run is ending with audio left in the spool.
        case abandoned
        /// The run is over (delivered, or ended on its own).
        case finished
    }

    /// The phase the run is in.
    public private(set) var phase: Phase = .running
    /// How long delivery may go on after the first signal; nil for no limit.
    public let stopTimeout: Duration?

    /// - Parameter stopTimeout: how long delivery may take after the first signal (nil or zero: no limit).
    public init(stopTimeout: Duration?) {
        if let stopTimeout, stopTimeout > .zero {
            self.stopTimeout = stopTimeout
        } else {
            self.stopTimeout = nil
        }
    }

    /// Takes an event and says what to do.
    public mutating func handle(_ event: Event) -> Action {
        switch (phase, event) {
        case (.running, .signal):
            phase = .draining
            return .stopCapture(deadline: stopTimeout)
        case (.draining, .signal(let signal)):
            phase = .abandoned
            return .abandonDelivery(.secondSignal(signal))
        case (.draining, .stopTimeoutPassed):
            phase = .abandoned
            return .abandonDelivery(.stopTimeout(stopTimeout ?? .zero))
        case (.abandoned, .signal):
            return .exitImmediately
        case (.running, .finished), (.draining, .finished):
            phase = .finished
            return .none
        case (.running, .stopTimeoutPassed), (.abandoned, .stopTimeoutPassed), (.abandoned, .finished),
            (.finished, _):
            return .none
        }
    }
}
