import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Shows the sender's status while it runs: on a terminal, one line redrawn about 10 times a second;
/// otherwise (a log, a pipe, journald) a plain `key=value` line every `interval`, or a JSON object a
/// line with `--log-format json`; nothing when quiet. Everything goes through a `StatusConsole`,
/// which the log lines share.
///
/// The reporter only reads: `snapshot` is called on the reporter's own queue at each tick and must
/// return the pipeline's current figures (and may take the level meter's reading).
///
/// Sendability: the schedule is in one `Mutex`, whether it stopped in another (whose lock also
/// orders the output); the rest is immutable.
public final class StatusReporter: Sendable {
    /// How often and in which style the reporter writes.
    public enum Mode: Sendable, Equatable {
        /// Redraw one line in place every `refresh`.
        case terminal(refresh: Duration)
        /// Write a plain `key=value` line every `interval`.
        case plain(interval: Duration)
        /// Write a JSON object a line every `interval`.
        case json(interval: Duration)
        /// Write nothing.
        case quiet

        /// The terminal redraw period: 10 times a second.
        public static let terminalRefresh = Duration.milliseconds(100)

        /// The mode the sender's flags ask for: nothing with `--quiet`; JSON lines every
        /// `--status-interval` seconds with `--log-format json` (a terminal too: the stream then
        /// holds nothing but JSON lines); else a redrawn line on a terminal, else plain lines.
        public static func choose(isTerminal: Bool, interval: Duration, quiet: Bool, json: Bool = false) -> Mode {
            if quiet { return .quiet }
            if json { return .json(interval: interval) }
            return isTerminal ? .terminal(refresh: terminalRefresh) : .plain(interval: interval)
        }
    }

    /// The mode the reporter runs in.
    public let mode: Mode
    private let snapshot: @Sendable () -> SenderStatusSnapshot
    private let width: @Sendable () -> Int
    private let console: StatusConsole
    private let scheduler: any StatusScheduler
    private let renderer: StatusLineRenderer
    private let logger: String
    private let schedule = Mutex<(any StatusSchedule)?>(nil)
    // Whether `stop()` ran. Its lock also orders ticks and the final line, so a tick still running
    // when `stop()` is called cannot redraw the status line after its end.
    private let stopped = Mutex(false)

    /// A reporter that writes through `console`.
    /// - Parameters:
    ///   - width: the terminal's width, asked at every redraw (a resized terminal is followed).
    ///   - scheduler: the timer; tests pass a manual one.
    ///   - logger: the `logger` field of JSON lines.
    public init(
        mode: Mode,
        snapshot: @escaping @Sendable () -> SenderStatusSnapshot,
        width: @escaping @Sendable () -> Int = { 80 },
        console: StatusConsole,
        scheduler: any StatusScheduler = DispatchStatusScheduler(),
        renderer: StatusLineRenderer = StatusLineRenderer(),
        logger: String = "capture-send"
    ) {
        self.mode = mode
        self.snapshot = snapshot
        self.width = width
        self.console = console
        self.scheduler = scheduler
        self.renderer = renderer
        self.logger = logger
    }

    /// A reporter with a console of its own that writes through `write`.
    public convenience init(
        mode: Mode,
        snapshot: @escaping @Sendable () -> SenderStatusSnapshot,
        width: @escaping @Sendable () -> Int = { 80 },
        write: @escaping @Sendable (String) -> Void,
        scheduler: any StatusScheduler = DispatchStatusScheduler(),
        renderer: StatusLineRenderer = StatusLineRenderer()
    ) {
        self.init(mode: mode, snapshot: snapshot, width: width, console: StatusConsole(write: write), scheduler: scheduler, renderer: renderer)
    }

    /// A reporter on standard error, through `console`: terminal style when standard error is a
    /// terminal, plain (or JSON) lines every `interval` otherwise, nothing when `quiet`.
    public static func standardError(
        console: StatusConsole, interval: Duration, quiet: Bool, json: Bool,
        snapshot: @escaping @Sendable () -> SenderStatusSnapshot
    ) -> StatusReporter {
        let descriptor = STDERR_FILENO
        let mode = Mode.choose(isTerminal: TerminalQuery.isTerminal(descriptor), interval: interval, quiet: quiet, json: json)
        return StatusReporter(mode: mode, snapshot: snapshot, width: { TerminalQuery.columns(descriptor) }, console: console)
    }

    /// Starts the periodic output (once; later calls do nothing).
    public func start() {
        let period: Duration
        switch mode {
        case .quiet: return
        case .terminal(let refresh): period = refresh
        case .plain(let interval), .json(let interval): period = interval
        }
        schedule.withLock { running in
            guard running == nil else { return }
            running = scheduler.scheduleRepeating(every: period) { [weak self] in self?.tick() }
        }
    }

    /// Stops the output. On a terminal, the last line is drawn once more and ended with a newline,
    /// so what follows starts on a fresh line.
    public func stop() {
        let running: (any StatusSchedule)? = schedule.withLock { $0.take() }
        running?.cancel()
        stopped.withLock { stopped in
            stopped = true
            if case .terminal = mode {
                console.endStatus(renderer.terminalLine(snapshot(), width: lineWidth()))
            }
        }
    }

    /// Writes one status line now, as a tick does (nothing once stopped).
    public func tick() {
        stopped.withLock { stopped in
            guard !stopped else { return }
            writeStatus()
        }
    }

    private func writeStatus() {
        switch mode {
        case .quiet:
            return
        case .terminal:
            console.drawStatus(renderer.terminalLine(snapshot(), width: lineWidth()))
        case .plain:
            console.writeLine(renderer.plainLine(snapshot()))
        case .json:
            console.writeLine(renderer.jsonLine(snapshot(), time: Date(), logger: logger))
        }
    }

    /// One column less than the terminal: a line that fills the last column makes some terminals
    /// wrap, and the next carriage return would then redraw on a new line.
    private func lineWidth() -> Int { max(1, width() - 1) }

    deinit {
        schedule.withLock { $0 }?.cancel()
    }
}
