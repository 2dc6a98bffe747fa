#if canImport(Glibc)
import Glibc
#endif

/// This process's open-file limit (`RLIMIT_NOFILE`), which programs holding one descriptor per
/// stream raise from its soft to its hard value at start (an unprivileged process may).
public enum OpenFileLimit {
    /// The soft limit before and after raising it to the hard limit (equal when it could not be
    /// raised or already was); values beyond `Int32.max` (unlimited) read as `Int32.max`.
    public static func raiseSoftToHard() -> (before: Int, now: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (1_024, 1_024) }
        let before = clamp(limit.rlim_cur)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return (before, clamp(limit.rlim_cur))
    }

    private static func clamp(_ value: rlim_t) -> Int {
        value > rlim_t(Int32.max) ? Int(Int32.max) : Int(value)
    }
}
