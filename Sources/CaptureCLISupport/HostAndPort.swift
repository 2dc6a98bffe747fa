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

    /// Why a `HOST:PORT` value cannot be used, in words that show how to write it.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Parses `HOST:PORT`; `defaultHost` stands in for an empty host. Port 0 (any free port) is
    /// accepted only when `allowsAnyPort` (for listening).
    public static func parse(_ text: String, defaultHost: String = "0.0.0.0", allowsAnyPort: Bool = true) throws(ParseError) -> HostAndPort {
        let example = "write HOST:PORT, for example 127.0.0.1:7373, [::1]:7373 or :7373 for every address"
        guard !text.isEmpty else { throw ParseError(description: "the address is empty: \(example)") }
        var hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw ParseError(description: "\(text) lacks the closing bracket of its IPv6 address: \(example)")
            }
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ParseError(description: "\(text) has no port: \(example)") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ParseError(description: "\(text) has no port: \(example)") }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") {
                throw ParseError(description: "an IPv6 address needs brackets around it, as in [\(hostPart)]:\(portPart)")
            }
        }
        guard !portPart.isEmpty else { throw ParseError(description: "\(text) has no port after the colon: \(example)") }
        guard let port = Int(portPart), (0...65_535).contains(port) else {
            throw ParseError(description: "\(portPart) is not a port number: use 1 to 65535 (\(example))")
        }
        if port == 0, !allowsAnyPort {
            throw ParseError(description: "port 0 cannot be connected to: name the port the receiver listens on (7373 by default)")
        }
        if hostPart.isEmpty { hostPart = Substring(defaultHost) }
        return HostAndPort(host: String(hostPart), port: port)
    }

    /// Parses `HOST:PORT` as `parse` does; nil when it cannot be used.
    public init?(parsing text: String, defaultHost: String = "0.0.0.0") {
        guard let parsed = try? Self.parse(text, defaultHost: defaultHost) else { return nil }
        self = parsed
    }

    public init?(argument: String) {
        self.init(parsing: argument)
    }

    /// For `@Option(transform:)` and `@Argument(transform:)`: the value, or an error whose message
    /// ArgumentParser shows after the option's name.
    public static func listenAddress(_ text: String) throws -> HostAndPort {
        do {
            return try parse(text)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The same for an address to connect to (a host is required, port 0 is not accepted).
    public static func remoteAddress(_ text: String) throws -> HostAndPort {
        let address: HostAndPort
        do {
            address = try parse(text, defaultHost: "", allowsAnyPort: false)
        } catch {
            throw ValidationError(error.description)
        }
        guard !address.host.isEmpty else {
            throw ValidationError("\(text) has no host: write HOST:PORT, for example 127.0.0.1:7373")
        }
        return address
    }

    public static var defaultCompletionKind: CompletionKind { .default }

    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
