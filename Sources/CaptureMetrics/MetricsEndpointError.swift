/// Why the metrics endpoint could not start.
public enum MetricsEndpointError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The address could not be listened on (in use, not local, bad host).
    case cannotListen(host: String, port: Int, reason: String)

    public var description: String {
        switch self {
        case .cannotListen(let host, let port, let reason):
            return "cannot serve metrics on \(host):\(port): \(reason); choose a free port or an address of this machine for --metrics"
        }
    }
}
