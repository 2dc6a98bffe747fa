#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing to standard output and standard error so that a reader going away never ends the
/// process: a log shipper restarting, `capture-recv … 2>&1 | head`, a closed terminal. The recording
/// must go on; what could not be written is dropped.
public enum StandardStreams {
    /// Makes a write to a pipe nobody reads fail with EPIPE instead of killing the process with
    /// SIGPIPE. Call once at start (both executables do, before anything is written).
    public static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Writes all of `text` to `descriptor` (retrying interrupted and partial writes); gives up
    /// silently when the descriptor cannot be written (EPIPE, EBADF, a full disk behind a redirect).
    public static func write(_ text: String, to descriptor: Int32) {
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

    /// Standard error.
    public static func writeError(_ text: String) { write(text, to: STDERR_FILENO) }

    /// Standard output.
    public static func writeOutput(_ text: String) { write(text, to: STDOUT_FILENO) }

    private static func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(descriptor, bytes, count)
        #else
        Darwin.write(descriptor, bytes, count)
        #endif
    }
}
