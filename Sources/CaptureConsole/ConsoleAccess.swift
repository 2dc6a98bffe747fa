import CaptureCore
import CaptureSecurity
import Crypto
import Foundation

/// Who may use the receiver's HTTP server. On a loopback address (127.0.0.0/8, ::1, `localhost`)
/// anyone who can reach it may: they are on the receiver's machine already. On any other address
/// the console plays live audio and lists every field unit, so every request needs one of the
/// tokens of `--http-token-file`, as `Authorization: Bearer TOKEN` (scripts, Prometheus) or as the
/// session cookie the login form sets (browsers). Everywhere, a request must be for one of the
/// console's names (`hosts`: against DNS rebinding, which would otherwise let any web page read a
/// loopback console). A pure decision, tested by table.
public struct ConsoleAccess: Sendable {
    /// The cookie a successful login sets.
    public static let cookieName = "capture_console"

    /// Tokens that open the server; nil: no token needed (loopback only).
    public let tokens: AuthTokens?
    /// The names the server answers to.
    public let hosts: ConsoleHostNames

    /// The access for a server bound to `host`: open on loopback unless tokens are given; elsewhere
    /// tokens are required. It answers to `host`'s names (`ConsoleHostNames`) and to `allowedHosts`
    /// (`--http-allow-host`).
    public init(host: String, tokens: AuthTokens?, allowedHosts: [String] = []) throws(ConsoleSetupError) {
        try self.init(host: host, tokens: tokens, hosts: ConsoleHostNames(listeningOn: host, allowing: allowedHosts))
    }

    /// The same with the names given.
    public init(host: String, tokens: AuthTokens?, hosts: ConsoleHostNames) throws(ConsoleSetupError) {
        if tokens == nil, !Self.isLoopback(host) {
            throw .tokensRequired(host: host)
        }
        self.tokens = tokens
        self.hosts = hosts
    }

    /// True for addresses only this machine can reach.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".")
        return parts.count == 4 && parts.first == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Whether a request with these headers may proceed.
    public func allows(authorization: String?, cookieHeader: String?) -> Bool {
        guard let tokens else { return true }
        if let authorization, authorization.lowercased().hasPrefix("bearer ") {
            let presented = String(authorization.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
            if tokens.accepts(presented) { return true }
        }
        if let session = Self.cookie(named: Self.cookieName, in: cookieHeader) {
            let expected = tokens.tokens.map(Self.sessionValue(for:))
            // Compare with every valid value, in constant time each, so timing tells nothing.
            return expected.reduce(false) { found, value in ConstantTime.tokenEquals(session, value) || found }
        }
        return false
    }

    /// The session cookie's value for a token: a hash, so the token itself is never stored in the
    /// browser, and a stolen cookie cannot be turned back into a token for the audio protocol.
    public static func sessionValue(for token: String) -> String {
        SHA256.hash(data: Data("capture-console-session\u{0}\(token)".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The value of cookie `name` in a `Cookie:` header.
    static func cookie(named name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0] == name { return parts[1] }
        }
        return nil
    }
}

/// Why the receiver's HTTP server cannot start. Its text names the settings to change through a
/// `SettingNaming` (`message(naming:)`); `description` uses the library's own words.
public enum ConsoleSetupError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A non-loopback address without tokens.
    case tokensRequired(host: String)
    /// The TLS certificate or key cannot be used.
    case tls(ServerTLSProblem)
    /// The address cannot be listened on.
    case cannotListen(host: String, port: Int, reason: String)
    /// A host name (the console's address, an allowed host name) that is no host name or address.
    case badHost(setting: Setting, value: String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .tokensRequired(let host):
            return "\(naming.name(of: .consoleAddress)) \(host) is reachable from other machines, and the console plays live audio:"
                + " give \(naming.name(of: .consoleTokenFile, value: "FILE")) (the tokens that may use it), or listen on 127.0.0.1"
        case .tls(let problem):
            return "cannot serve the console over TLS: \(problem.message(naming: naming))"
        case .cannotListen(let host, let port, let reason):
            return "cannot serve the console and metrics on \(host):\(port): \(reason); choose another address with \(naming.name(of: .consoleAddress, value: "HOST:PORT"))"
        case .badHost(let setting, let value):
            return "\(naming.name(of: setting)) \(value) is not a host name or address: give a name such as recorder.example or an address such as 192.0.2.10 or [2001:db8::1], optionally with :PORT"
        }
    }
}
