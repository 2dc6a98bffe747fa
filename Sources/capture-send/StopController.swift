import CaptureCLISupport
import CaptureSender
import Dispatch
import Foundation
import Logging
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// Carries out `SenderStopSequence` for a running capture-send: traps SIGINT and SIGTERM (through
/// `SignalDelivery`), feeds them and the stop timeout to the sequence, and does what it says:
/// stops capture, stops delivery, and makes sure the process ends within `exitBound` of the
/// decision to stop delivering, with one line saying what stays in the spool.
///
/// Sendability: its mutable state is in a `Mutex`.
final class StopController: Sendable {
    /// Longest time from stopping delivery to the process's exit.
    static let exitBound: Double = 1.5

    private struct State {
        var sequence: SenderStopSequence
        var abandonReason: SenderStopSequence.AbandonReason?
        var finalLineWritten = false
        var deliveredEverything = false
        var signals: SignalDelivery?
        var exitHook: (@Sendable () -> Void)?
    }

    private let state: Mutex<State>
    private let logger: Logger
    private let stopCapture: @Sendable () -> Void
    private let abandonDelivery: @Sendable () -> Void
    private let leftoverLine: @Sendable (SenderStopSequence.AbandonReason) -> String
    private let writeFinalLine: @Sendable (String) -> Void
    private let timerQueue = DispatchQueue(label: "capture-send stop timer")

    /// - Parameters:
    ///   - stopCapture: stops the capture queue so that what was captured drains into the log.
    ///   - abandonDelivery: closes every connection; `StreamSender.run()` then returns.
    ///   - leftoverLine: the one line that says what stays where, for the reason given.
    ///   - writeFinalLine: writes that line to standard error (as text or JSON).
    init(
        stopTimeout: Duration?, logger: Logger,
        stopCapture: @escaping @Sendable () -> Void,
        abandonDelivery: @escaping @Sendable () -> Void,
        leftoverLine: @escaping @Sendable (SenderStopSequence.AbandonReason) -> String,
        writeFinalLine: @escaping @Sendable (String) -> Void
    ) {
        state = Mutex(State(sequence: SenderStopSequence(stopTimeout: stopTimeout)))
        self.logger = logger
        self.stopCapture = stopCapture
        self.abandonDelivery = abandonDelivery
        self.leftoverLine = leftoverLine
        self.writeFinalLine = writeFinalLine
    }

    /// Traps SIGINT and SIGTERM; from now on they go through the stop sequence.
    func start() {
        let delivery = SignalDelivery(signals: [.sigint, .sigterm]) { [weak self] signal in
            self?.handle(.signal(signal == .sigterm ? .terminate : .interrupt))
        }
        state.withLock { $0.signals = delivery }
    }

    /// Stops as the first SIGINT does (`q` in `--interactive`).
    func interrupt() {
        handle(.signal(.interrupt))
    }

    /// Runs right before the process is ended at once (the terminal's settings given back).
    func beforeExit(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.exitHook = body }
    }

    /// The run ended on its own (delivered, or failed for another reason): later signals change nothing.
    func finished() {
        handle(.finished)
    }

    /// The receiver confirmed the whole stream: the run exits 0 whatever signal came meanwhile.
    func delivered() {
        state.withLock { $0.deliveredEverything = true }
        handle(.finished)
    }

    /// Why delivery was stopped early, if it was.
    var abandoned: SenderStopSequence.AbandonReason? { state.withLock { $0.abandonReason } }

    /// Writes the line about what stays in the spool, once (the watchdog may have written it).
    /// Returns whether this call wrote it.
    @discardableResult
    func reportLeftover() -> Bool {
        let reason: SenderStopSequence.AbandonReason? = state.withLock { state in
            guard let abandonReason = state.abandonReason, !state.finalLineWritten else { return nil }
            state.finalLineWritten = true
            return abandonReason
        }
        guard let reason else { return false }
        writeFinalLine(leftoverLine(reason))
        return true
    }

    private func handle(_ event: SenderStopSequence.Event) {
        let action: SenderStopSequence.Action = state.withLock { $0.sequence.handle(event) }
        switch action {
        case .none:
            return
        case .stopCapture(let deadline):
            let limit = deadline.map { "for at most \($0.secondsText) s (--stop-timeout)" } ?? "with no time limit (--stop-timeout 0)"
            logger.notice("stopping capture; delivering what was captured \(limit); signal again to stop delivering and keep the rest in the spool")
            stopCapture()
            if let deadline {
                timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(deadline.inNanoseconds))) { [weak self] in self?.handle(.stopTimeoutPassed) }
            }
        case .abandonDelivery(let reason):
            state.withLock { $0.abandonReason = reason }
            logger.warning("stopping delivery now", metadata: ["reason": "\(reason.message(naming: CommandLineSettingNames()))"])
            abandonDelivery()
            // Ending delivery closes sockets and joins threads; should anything of it hang, the
            // process still ends within the bound, with the spool as it is on disk.
            timerQueue.asyncAfter(deadline: .now() + Self.exitBound) { [weak self] in self?.exitNow() }
        case .exitImmediately:
            exitNow()
        }
    }

    private func exitNow() {
        if state.withLock({ $0.deliveredEverything }) { return }
        reportLeftover()
        state.withLock { $0.exitHook }?()
        _exit(CaptureSend.abandonedExitCode)
    }

}
