import CaptureCLISupport
import CaptureCore
import CaptureSender
import CaptureStatus
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Carries out `InteractiveKeys` for `capture-send --interactive`: puts the terminal on standard
/// input into non-canonical mode without echo (Ctrl-C still raises SIGINT), reads it byte by byte on
/// a thread of its own, and does what the keys say: pause and resume the streamer, drop markers
/// (showing the label while it is typed), stop as the first Ctrl-C. `restore()` gives the terminal
/// its settings back; call it before the process exits.
///
/// Sendability: the keys' state and the saved terminal settings are in a `Mutex`; the streamer,
/// the console and the logger are thread-safe.
final class InteractiveTerminal: Sendable {
    private struct State {
        var keys = InteractiveKeys(maximumLabelBytes: 255)
        /// The terminal's settings before `start()`, until `restore()` gives them back.
        var saved: termios?
    }

    private let state = Mutex(State())
    private let streamer: CaptureStreamer
    private let console: StatusConsole
    private let logger: Logger
    private let stop: @Sendable () -> Void

    /// Whether standard input is a terminal (`--interactive` needs one).
    static var standardInputIsATerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// - Parameter stop: stops capture as the first SIGINT does.
    init(streamer: CaptureStreamer, console: StatusConsole, logger: Logger, stop: @escaping @Sendable () -> Void) {
        self.streamer = streamer
        self.console = console
        self.logger = logger
        self.stop = stop
    }

    /// Sets the terminal up and starts reading keys.
    func start() throws(CLIError) {
        var settings = termios()
        guard tcgetattr(STDIN_FILENO, &settings) == 0 else {
            throw CLIError("--interactive cannot read the terminal's settings (\(String(cString: strerror(errno)))): run capture-send in a terminal, or drop markers with SIGUSR1")
        }
        var raw = settings
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &raw.c_cc) { bytes in
            bytes[Int(VMIN)] = 1
            bytes[Int(VTIME)] = 0
        }
        guard tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0 else {
            throw CLIError("--interactive cannot set the terminal up (\(String(cString: strerror(errno)))): run capture-send in a terminal, or drop markers with SIGUSR1")
        }
        state.withLock { $0.saved = settings }
        logger.notice("interactive: space pauses and resumes, m drops a marker (type a label, then Enter), q stops")
        Thread.detachNewThread { [self] in
            DetachedThread.nameCurrentThread("terminal keys")
            readKeys()
        }
    }

    /// Gives the terminal its settings back (once; later calls do nothing).
    func restore() {
        let settings: termios? = state.withLock { $0.saved.take() }
        guard var settings else { return }
        _ = tcsetattr(STDIN_FILENO, TCSANOW, &settings)
    }

    private func readKeys() {
        var byte: UInt8 = 0
        while true {
            let count = read(STDIN_FILENO, &byte, 1)
            if count == 1 {
                let actions = state.withLock { $0.keys.handle(byte: byte) }
                actions.forEach(perform)
                if case .stopped = state.withLock({ $0.keys.state }) { return }
            } else if count < 0, errno == EINTR {
                continue
            } else {
                state.withLock { $0.keys.endOfInput() }.forEach(perform)
                return
            }
        }
    }

    private func perform(_ action: InteractiveKeys.Action) {
        switch action {
        case .pause:
            streamer.pause()
            logger.notice("capture paused: space resumes; the pause is recorded in the file as a gap")
        case .resume:
            do throws(CaptureStreamerError) {
                try streamer.resume()
                logger.notice("capture resumed")
            } catch {
                logger.error("capture cannot resume: \(error.message(naming: CommandLineSettingNames()))")
            }
        case .showLabel(let label):
            console.showPrompt("marker label: \(label)_ (Enter drops it, Esc cancels)")
        case .cancelLabel:
            console.showPrompt(nil)
            logger.notice("marker cancelled")
        case .mark(let label):
            console.showPrompt(nil)
            Self.dropMarker(streamer: streamer, label: label, logger: logger)
        case .stop:
            stop()
        }
    }

    /// Drops a marker with `label` and logs it (or why it could not be dropped).
    static func dropMarker(streamer: CaptureStreamer, label: String, logger: Logger) {
        do throws(CaptureStreamerError) {
            let sequence = try streamer.mark(label: label)
            logger.notice("marker dropped", metadata: ["label": "\(label)", "sequence": "\(sequence)"])
        } catch {
            logger.warning("no marker dropped: \(error.message(naming: CommandLineSettingNames()))")
        }
    }
}
