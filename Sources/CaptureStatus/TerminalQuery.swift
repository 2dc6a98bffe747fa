#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the status reporter needs to know about its output: whether it is a terminal, and how wide.
public enum TerminalQuery {
    /// Whether `fileDescriptor` is a terminal (`isatty`).
    public static func isTerminal(_ fileDescriptor: Int32) -> Bool {
        isatty(fileDescriptor) == 1
    }

    /// The terminal's width in columns (`TIOCGWINSZ`), else `COLUMNS`, else 80.
    public static func columns(_ fileDescriptor: Int32) -> Int {
        var size = winsize()
        if ioctl(fileDescriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
            return Int(size.ws_col)
        }
        if let text = getenv("COLUMNS"), let columns = Int(String(cString: text)), columns > 0 {
            return columns
        }
        return 80
    }
}
