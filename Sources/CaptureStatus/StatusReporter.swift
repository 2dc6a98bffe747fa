import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Shows the sender's status while it runs: on a terminal, one line redrawn about 10 times a second;
/// otherwise (a log, a pipe, journald) a plain `key=value` line every `interval`; nothing when quiet.
///
/// The reporter only reads: `snapshot` is called on the reporter's own queue at each tick and must
/// return the pipeline's current figures (and may take the level meter's reading).
public final class StatusReporter: @unchecked Sendable {
    /// How often and in which style the reporter writes.
    public enum Mode: Sendable, Equatable {
        /// Redraw one line in place every `refresh`.
        case terminal(refresh: Duration)
        /// Write a plain line every `interval`.
        case plain(interval: Duration)
        /// Write nothing.
        case quiet

        /// The terminal redraw period: 10 times a second.
        public static let terminalRefresh = Duration.milliseconds(100)

        /// The mode the sender's flags ask for: nothing with `--quiet`, else a redrawn line on a
        /// terminal, else plain lines every `--status-interval` seconds.
        public static func choose(isTerminal: Bool, interval: Duration, quiet: Bool) -> Mode {
            if quiet { return .quiet }
            return isTerminal ? .terminal(refresh: terminalRefresh) : .plain(interval: interval)
        }
    }

    /// The mode the reporter runs in.
    public let mode: Mode
    private let snapshot: @Sendable () -> SenderStatusSnapshot
    private let width: @Sendable () -> Int
    private let write: @Sendable (String) -> Void
    private let scheduler: any StatusScheduler
    private let renderer: StatusLineRenderer
    private let lock = NSLock()
    private var schedule: (any StatusSchedule)?
    private var drewTerminalLine = false

    /// A reporter that writes through `write`.
    /// - Parameters:
    ///   - width: the terminal's width, asked at every redraw (a resized terminal is followed).
    ///   - scheduler: the timer; tests pass a manual one.
    public init(
        mode: Mode,
        snapshot: @escaping @Sendable () -> SenderStatusSnapshot,
        width: @escaping @Sendable () -> Int = { 80 },
        write: @escaping @Sendable (String) -> Void,
        scheduler: any StatusScheduler = DispatchStatusScheduler(),
        renderer: StatusLineRenderer = StatusLineRenderer()
    ) {
        self.mode = mode
        self.snapshot = snapshot
        self.width = width
        self.write = write
        self.scheduler = scheduler
        self.renderer = renderer
    }

    /// A reporter on standard error: terminal style when it is a terminal, plain lines every
    /// `interval` otherwise, nothing when `quiet`.
    public static func standardError(
        interval: Duration, quiet: Bool, snapshot: @escaping @Sendable () -> SenderStatusSnapshot
    ) -> StatusReporter {
        let descriptor = STDERR_FILENO
        let mode = Mode.choose(isTerminal: TerminalQuery.isTerminal(descriptor), interval: interval, quiet: quiet)
        return StatusReporter(
            mode: mode, snapshot: snapshot,
            width: { TerminalQuery.columns(descriptor) },
            write: { text in FileDescriptorWriter.writeAll(text, to: descriptor) }
        )
    }

    /// Starts the periodic output (once; later calls do nothing).
    public func start() {
        let period: Duration
        switch mode {
        case .quiet: return
        case .terminal(let refresh): period = refresh
        case .plain(let interval): period = interval
        }
        lock.lock()
        defer { lock.unlock() }
        guard schedule == nil else { return }
        schedule = scheduler.scheduleRepeating(every: period) { [weak self] in self?.tick() }
    }

    /// Stops the output. On a terminal, the last line is drawn once more and ended with a newline,
    /// so what follows starts on a fresh line.
    public func stop() {
        lock.lock()
        let running = schedule
        schedule = nil
        let endLine = drewTerminalLine
        drewTerminalLine = false
        lock.unlock()
        running?.cancel()
        if case .terminal = mode, endLine {
            write(renderer.terminalRedraw(snapshot(), width: lineWidth()) + "\n")
        }
    }

    /// Writes one status line now, as a tick does.
    public func tick() {
        switch mode {
        case .quiet:
            return
        case .terminal:
            let text = renderer.terminalRedraw(snapshot(), width: lineWidth())
            lock.withLock { drewTerminalLine = true }
            write(text)
        case .plain:
            write(renderer.plainLine(snapshot()) + "\n")
        }
    }

    /// One column less than the terminal: a line that fills the last column makes some terminals
    /// wrap, and the next carriage return would then redraw on a new line.
    private func lineWidth() -> Int { max(1, width() - 1) }

    deinit {
        schedule?.cancel()
    }
}

/// Writes text to a file descriptor, retrying short writes and interruptions.
enum FileDescriptorWriter {
    private static func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
        write(descriptor, bytes, count)
    }

    static func writeAll(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else {
                return
            }
        }
    }
}
