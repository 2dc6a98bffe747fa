import ArgumentParser

/// A `HOST:PORT` command-line value: `127.0.0.1:7373`, `recorder.example:7373`, `[::1]:7373`, or
/// `:7373` (all addresses, for listening).
public struct HostAndPort: Equatable, Sendable, CustomStringConvertible, ExpressibleByArgument {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; `defaultHost` stands in for an empty host.
    public init?(parsing text: String, defaultHost: String = "0.0.0.0") {
        var hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { return nil }  // a bare IPv6 address needs brackets
        }
        guard let port = Int(portPart), (0...65_535).contains(port) else { return nil }
        if hostPart.isEmpty { hostPart = Substring(defaultHost) }
        self.init(host: String(hostPart), port: port)
    }

    public init?(argument: String) {
        self.init(parsing: argument)
    }

    public static var defaultCompletionKind: CompletionKind { .default }

    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
