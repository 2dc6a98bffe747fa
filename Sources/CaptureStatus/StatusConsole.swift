import CaptureCore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one owner of the sender's standard error: log lines and the status line both go through it,
/// so that they never land on one another.
///
/// On a terminal the status line is redrawn in place (carriage return, the line, clear to end of
/// line) and stays the last line on screen. A log line written meanwhile clears the status line,
/// takes its place with a newline after it, and the status line is drawn again under it — in one
/// write, so nothing can come between. Off a terminal nothing is redrawn and log lines are simply
/// written, one a line.
///
/// Sendability: the status line, the prompt and `closed` are in a `Mutex`, whose lock also orders
/// every write.
public final class StatusConsole: Sendable {
    private struct State {
        var statusLine: String?
        /// A prompt drawn after the status line (a marker's label being typed, `--interactive`).
        var prompt: String?
        var closed = false

        /// The status line with the prompt after it, as drawn; nil when neither is there.
        var drawnLine: String? {
            switch (statusLine, prompt) {
            case (nil, nil): return nil
            case (let line?, nil): return line
            case (nil, let prompt?): return prompt
            case (let line?, let prompt?): return line + "  " + prompt
            }
        }
    }

    private let write: @Sendable (String) -> Void
    // Every write is made with `state`'s lock held, so writes never land on one another.
    private let state = Mutex(State())

    /// A console writing through `write` (each call gets text to write as is).
    public init(write: @escaping @Sendable (String) -> Void) {
        self.write = write
    }

    /// The console on standard error.
    public static func standardError() -> StatusConsole {
        StatusConsole { text in StandardStreams.writeError(text) }
    }

    /// Writes `line` (without its newline) as a line of its own, above the status line if one is
    /// drawn, and draws the status line again under it.
    public func writeLine(_ line: String) {
        state.withLock { state in
            if let drawnLine = state.drawnLine {
                write(
                    StatusLineRenderer.carriageReturn + StatusLineRenderer.clearToEndOfLine + line + "\n"
                        + StatusLineRenderer.carriageReturn + drawnLine + StatusLineRenderer.clearToEndOfLine
                )
            } else {
                write(line + "\n")
            }
        }
    }

    /// Draws the status line in place of the one drawn before (on a terminal); nothing once the
    /// final line is written.
    public func drawStatus(_ line: String) {
        state.withLock { state in
            guard !state.closed else { return }
            state.statusLine = line
            write(StatusLineRenderer.carriageReturn + (state.drawnLine ?? line) + StatusLineRenderer.clearToEndOfLine)
        }
    }

    /// Draws `prompt` after the status line (or alone, when none is drawn), in place; nil takes it
    /// away. For a terminal the user types on: `capture-send --interactive` shows a marker's label
    /// there while it is typed.
    public func showPrompt(_ prompt: String?) {
        state.withLock { state in
            guard !state.closed else { return }
            state.prompt = prompt
            write(StatusLineRenderer.carriageReturn + (state.drawnLine ?? "") + StatusLineRenderer.clearToEndOfLine)
        }
    }

    /// Draws `line` one last time and ends it with a newline: it stays on screen, and what is
    /// written next starts on a fresh line below it. Does nothing if no status line is drawn.
    public func endStatus(_ line: String) {
        state.withLock { state in
            guard state.statusLine != nil else { return }
            state.statusLine = nil
            state.prompt = nil
            write(StatusLineRenderer.carriageReturn + line + StatusLineRenderer.clearToEndOfLine + "\n")
        }
    }
}

extension StatusConsole {
    /// Writes the line a run ends with (an error, or what stays in the spool), possibly while the
    /// status line is still being redrawn: the status line, if drawn, stays on screen and is ended
    /// with a newline, `line` follows on a line of its own, and no status line is drawn after it.
    public func writeFinalLine(_ line: String) {
        state.withLock { state in
            let status = state.statusLine.map {
                StatusLineRenderer.carriageReturn + $0 + StatusLineRenderer.clearToEndOfLine + "\n"
            } ?? ""
            state.statusLine = nil
            state.prompt = nil
            state.closed = true
            write(status + line + "\n")
        }
    }
}

