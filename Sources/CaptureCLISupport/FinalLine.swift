import CaptureCore
import Foundation
import Logging

/// The one line an executable ends with when it exits non-zero at run time: `Error: …` as text,
/// or, with `--log-format json`, a JSON object with the same fields as the JSON log lines (level
/// `error`), so that standard error holds nothing but JSON lines.
public enum FinalLine {
    /// Writes `message` as the final line of `label` (the executable's name), in `format`.
    public static func write(_ message: String, format: LogFormat, label: String) {
        StandardStreams.writeError(render(message, format: format, label: label, time: Date()) + "\n")
    }

    /// The line, without its newline.
    public static func render(_ message: String, format: LogFormat, label: String, time: Date) -> String {
        switch format {
        case .text:
            return "Error: \(message)"
        case .json:
            return LineLogHandler.render(level: .error, message: message, metadata: [:], label: label, format: .json, time: time)
        }
    }
}
