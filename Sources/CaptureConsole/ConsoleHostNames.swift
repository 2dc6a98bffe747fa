#if canImport(Glibc)
import CaptureCore
import Glibc
#endif

/// The names the receiver's HTTP server answers to: a defence against DNS rebinding. Any web page
/// the operator opens can point a name of its own at 127.0.0.1 (or at any address the browser
/// reaches) and read what the console answers there, as the same origin. The browser still sends
/// the name it asked for, so every request's `Host` must be one of the console's own names, and a
/// state-changing request (anything but GET and HEAD: the login form) that comes from a page
/// (`Origin`) must come from a page at one of them. A pure decision, tested by table.
///
/// The console's names, by the address it listens on (`--http HOST:PORT`):
/// - loopback (127.0.0.0/8, `::1`, `localhost`): `127.0.0.1`, `[::1]`, `localhost`, and the
///   address given;
/// - a specific address: that address (or the name given);
/// - every address (`0.0.0.0`, `[::]`): the machine's addresses (as they are when the request
///   comes), `127.0.0.1`, `[::1]`, `localhost`, and the machine's host name (also with `.local`);
/// - and every `--http-allow-host NAME` (any port) or `NAME:PORT` (that port only), such as the name
///   a reverse proxy or a DNS entry gives the console.
///
/// The port of a built-in name is not compared: a port forward (`docker run -p 8080:9090`) changes
/// it, and a rebinding page can choose its port but not the console's names. A request without a
/// `Host` (HTTP/1.0 tools) is answered: browsers always send one.
public struct ConsoleHostNames: Sendable {
    /// A host as a `Host` header, an `Origin` or `--http-allow-host` names it.
    enum Host: Hashable, Sendable {
        /// A DNS name, lowercased, without a final dot.
        case name(String)
        /// An IPv4 (4 bytes) or IPv6 (16 bytes) address; IPv4-mapped IPv6 addresses as IPv4.
        case address([UInt8])
    }

    /// A host with a port.
    struct Endpoint: Hashable, Sendable {
        var host: Host
        var port: Int
    }

    /// Names answered on any port.
    private(set) var anyPort: Set<Host>
    /// Names answered on one port only.
    private(set) var onePort: Set<Endpoint>
    /// Whether the machine's addresses are answered too (listening on every address).
    let everyMachineAddress: Bool
    /// The machine's addresses now (`getifaddrs`; replaced in tests).
    private let machineAddresses: @Sendable () -> Set<[UInt8]>

    /// The names of a console listening on `listenHost`, plus `allowed` (`--http-allow-host`
    /// values: `NAME`, `NAME:PORT`, an address, `[IPv6]:PORT`). Throws for a value that is no host.
    public init(
        listeningOn listenHost: String, allowing allowed: [String] = [],
        hostName: String = ConsoleHostNames.machineHostName(), machineAddresses: @escaping @Sendable () -> Set<[UInt8]> = ConsoleHostNames.currentMachineAddresses
    ) throws(ConsoleSetupError) {
        let loopback: Set<Host> = [.name("localhost"), .address([127, 0, 0, 1]), .address(Array(repeating: 0, count: 15) + [1])]
        var anyPort: Set<Host> = []
        var everyMachineAddress = false
        let bare = listenHost.hasPrefix("[") && listenHost.hasSuffix("]") ? String(listenHost.dropFirst().dropLast()) : listenHost
        if ["", "0.0.0.0", "::", "*"].contains(bare) {
            everyMachineAddress = true
            anyPort = loopback
            let name = hostName.lowercased()
            if let host = Self.host(Substring(name)), case .name = host {
                anyPort.insert(host)
                if !name.contains(".") { anyPort.insert(.name(name + ".local")) }
            }
        } else {
            guard let own = Self.host(Substring(bare.contains(":") ? "[\(bare)]" : bare)) else {
                throw .badHost(setting: .consoleAddress, value: listenHost)
            }
            anyPort = [own]
            if ConsoleAccess.isLoopback(listenHost) { anyPort.formUnion(loopback) }
        }
        var onePort: Set<Endpoint> = []
        for value in allowed {
            guard let (text, port) = Self.split(authority: value), let host = Self.host(text) else { throw .badHost(setting: .consoleAllowedHost, value: value) }
            if let port { onePort.insert(Endpoint(host: host, port: port)) } else { anyPort.insert(host) }
        }
        self.anyPort = anyPort
        self.onePort = onePort
        self.everyMachineAddress = everyMachineAddress
        self.machineAddresses = machineAddresses
    }

    /// Why a request whose `Host` header is `authority` gets no answer (one line, for the
    /// response's body); nil when it may proceed. `secure`: over HTTPS (a Host without a port then
    /// means 443, otherwise 80).
    public func refusal(host authority: String?, secure: Bool, settingNames: any SettingNaming = LibrarySettingNames()) -> String? {
        guard let authority else { return nil }
        guard let (text, port) = Self.split(authority: authority), let host = Self.host(text) else {
            return "capture-recv: the request's Host (\(Self.printable(authority))) is not a host name or address"
        }
        if answers(host, port: port ?? (secure ? 443 : 80)) { return nil }
        let name = Self.printable(String(text).lowercased())
        return "capture-recv: this console does not answer to the name \(name) (the request's Host); if that name is this machine's, start capture-recv with \(settingNames.name(of: .consoleAllowedHost)) \(name)"
    }

    /// Why a request with `method` from a page at `origin` (its `Origin` header) is refused (one
    /// line); nil when it may proceed. GET and HEAD change nothing and are not checked; nor is a
    /// request without an `Origin` (not from a page: a script, curl).
    public func refusal(origin: String?, method: String, settingNames: any SettingNaming = LibrarySettingNames()) -> String? {
        guard let origin, method != "GET", method != "HEAD" else { return nil }
        if let (scheme, rest) = Self.splitScheme(origin), let (text, port) = Self.split(authority: rest), let host = Self.host(text),
           answers(host, port: port ?? (scheme == "https" ? 443 : 80)) {
            return nil
        }
        return "capture-recv: this console takes no \(Self.printable(method)) from pages of \(Self.printable(origin)) (the request's Origin); if that site is this console's, start capture-recv with \(settingNames.name(of: .consoleAllowedHost, value: "NAME")) for its host name"
    }

    private func answers(_ host: Host, port: Int) -> Bool {
        if anyPort.contains(host) || onePort.contains(Endpoint(host: host, port: port)) { return true }
        if everyMachineAddress, case .address(let bytes) = host { return machineAddresses().contains(bytes) }
        return false
    }

    // MARK: - Parsing

    /// `HOST[:PORT]` (IPv6 in brackets); nil when it is not of that form or the port is no port.
    static func split(authority: String) -> (host: Substring, port: Int?)? {
        let text = Substring(authority)
        let host: Substring
        let rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[...close]
            rest = text[text.index(after: close)...]
        } else if let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            rest = text[colon...]
        } else {
            host = text
            rest = ""
        }
        guard !host.isEmpty else { return nil }
        guard !rest.isEmpty else { return (host, nil) }
        let digits = rest.dropFirst()
        guard rest.first == ":", !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(digits), (1...65_535).contains(port) else { return nil }
        return (host, port)
    }

    /// `scheme://authority` of an `Origin`; nil for `null` and anything else.
    static func splitScheme(_ origin: String) -> (scheme: String, authority: String)? {
        guard let range = origin.range(of: "://") else { return nil }
        let scheme = origin[..<range.lowerBound].lowercased()
        let authority = String(origin[range.upperBound...])
        guard scheme == "http" || scheme == "https", !authority.contains("/") else { return nil }
        return (scheme, authority)
    }

    /// A host name or address (IPv6 in brackets); nil when it is neither.
    static func host(_ text: Substring) -> Host? {
        if text.hasPrefix("[") {
            guard text.hasSuffix("]"), text.count > 2 else { return nil }
            var address = in6_addr()
            guard inet_pton(AF_INET6, String(text.dropFirst().dropLast()), &address) == 1 else { return nil }
            let bytes = withUnsafeBytes(of: &address) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return .address(Array(bytes[12...])) }
            return .address(bytes)
        }
        var address = in_addr()
        if inet_pton(AF_INET, String(text), &address) == 1 { return .address(withUnsafeBytes(of: &address) { Array($0) }) }
        var name = text.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard !name.isEmpty, name.utf8.count <= 253,
              labels.allSatisfy({ label in
                  !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                      && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
              })
        else { return nil }
        // All digits and dots but not an IPv4 address (such as 127.1): not a name either.
        guard !name.allSatisfy({ $0.isNumber || $0 == "." }) else { return nil }
        return .name(name)
    }

    /// `text` fit for a one-line message: printable ASCII, at most 200 characters.
    static func printable(_ text: String) -> String {
        let kept = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.map(Character.init))
        return kept.count > 200 ? String(kept.prefix(200)) + "…" : kept
    }

    // MARK: - This machine

    /// The machine's host name (`gethostname`), lowercased.
    public static func machineHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
    }

    /// The addresses of the machine's network interfaces now.
    @Sendable public static func currentMachineAddresses() -> Set<[UInt8]> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found: Set<[UInt8]> = []
        var cursor = list
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let address = entry.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                _ = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { found.insert(withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }) }
            case AF_INET6:
                _ = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { found.insert(withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }) }
            default:
                continue
            }
        }
        return found
    }
}
