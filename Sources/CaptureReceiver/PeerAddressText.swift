import NIOCore

extension SocketAddress {
    /// The address as users write it: `127.0.0.1:49676`, `[::1]:49676`, or the socket path of a
    /// Unix domain socket (SwiftNIO's own description is `[IPv4]127.0.0.1/127.0.0.1:49676`).
    public var userText: String {
        switch self {
        case .v4:
            return "\(ipAddress ?? "?"):\(port ?? 0)"
        case .v6:
            return "[\(ipAddress ?? "?")]:\(port ?? 0)"
        case .unixDomainSocket:
            return pathname ?? "unix socket"
        }
    }
}
