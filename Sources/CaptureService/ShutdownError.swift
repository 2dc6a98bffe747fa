/// Why a graceful shutdown did not end cleanly.
public enum ShutdownError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server did not finish its work (open files, connections) within the deadline.
    case deadlineExceeded(service: String, deadline: Duration)

    public var description: String {
        switch self {
        case .deadlineExceeded(let service, let deadline):
            return "\(service) did not finish shutting down within \(deadline); files left open stay readable and can be finished with `capture-recv recover`"
        }
    }
}
