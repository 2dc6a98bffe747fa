import CaptureConsole
import XCTest

/// The names the console answers to (DNS rebinding, issue 27 item 6): a table over listening
/// addresses, `Host` headers and `Origin`s.
final class ConsoleHostNamesTests: XCTestCase {
    private static let machine: Set<[UInt8]> = [[192, 0, 2, 2], [127, 0, 0, 1], [0xFD] + Array(repeating: 0, count: 14) + [2]]

    private func names(_ listen: String, _ allowed: [String] = []) throws -> ConsoleHostNames {
        try ConsoleHostNames(listeningOn: listen, allowing: allowed, hostName: "vm", machineAddresses: { Self.machine })
    }

    private func refused(_ name: String) -> String {
        "capture-recv: this console does not answer to the name \(name) (the request's Host); if that name is this machine's, start capture-recv with an allowed host name (ConsoleAccess allowedHosts) \(name)"
    }

    func testHostTable() throws {
        let loopback = try names("127.0.0.1")
        let loopback6 = try names("::1")
        let other = try names("127.0.0.2")
        let specific = try names("192.0.2.2")
        let named = try names("recorder.local")
        let every = try names("0.0.0.0")
        let every6 = try names("::")
        let extra = try names("127.0.0.1", ["recorder.example", "console.example:8443", "[2001:db8::1]", "192.0.2.99:9000"])
        let cases: [(ConsoleHostNames, String?, Bool, String?, UInt)] = [
            // Loopback: its names, any port, any case, with a final dot.
            (loopback, "127.0.0.1:9090", false, nil, #line),
            (loopback, "127.0.0.1", false, nil, #line),
            (loopback, "localhost:9090", false, nil, #line),
            (loopback, "LOCALHOST:1", false, nil, #line),
            (loopback, "localhost.:9090", false, nil, #line),
            (loopback, "[::1]:9090", false, nil, #line),
            (loopback, "[0:0:0:0:0:0:0:1]", false, nil, #line),
            (loopback, "[::ffff:127.0.0.1]:9090", false, nil, #line),
            (loopback, nil, false, nil, #line),
            (loopback, "attacker.example:9090", false, refused("attacker.example"), #line),
            (loopback, "Attacker.Example", false, refused("attacker.example"), #line),
            (loopback, "127.0.0.1.attacker.example", false, refused("127.0.0.1.attacker.example"), #line),
            (loopback, "localhost.attacker.example:80", false, refused("localhost.attacker.example"), #line),
            (loopback, "127.0.0.2:9090", false, refused("127.0.0.2"), #line),
            (loopback, "192.0.2.2:9090", false, refused("192.0.2.2"), #line),
            (loopback, "vm:9090", false, refused("vm"), #line),
            (loopback6, "[::1]:9090", false, nil, #line),
            (loopback6, "localhost", false, nil, #line),
            (loopback6, "[fd00::bad]:9090", false, refused("[fd00::bad]"), #line),
            (other, "127.0.0.2:9090", false, nil, #line),
            (other, "127.0.0.1:9090", false, nil, #line),
            // Not a host: refused, saying so.
            (loopback, "", false, "capture-recv: the request's Host () is not a host name or address", #line),
            (loopback, "::1", false, "capture-recv: the request's Host (::1) is not a host name or address", #line),
            (loopback, "localhost:0", false, "capture-recv: the request's Host (localhost:0) is not a host name or address", #line),
            (loopback, "localhost:99999", false, "capture-recv: the request's Host (localhost:99999) is not a host name or address", #line),
            (loopback, "localhost:80x", false, "capture-recv: the request's Host (localhost:80x) is not a host name or address", #line),
            (loopback, "local host", false, "capture-recv: the request's Host (local host) is not a host name or address", #line),
            (loopback, "127.1", false, "capture-recv: the request's Host (127.1) is not a host name or address", #line),
            (loopback, "a\u{7}b", false, "capture-recv: the request's Host (ab) is not a host name or address", #line),
            // A specific address: that address only.
            (specific, "192.0.2.2:9090", false, nil, #line),
            (specific, "localhost:9090", false, refused("localhost"), #line),
            (specific, "127.0.0.1:9090", false, refused("127.0.0.1"), #line),
            (specific, "vm:9090", false, refused("vm"), #line),
            (named, "recorder.local:9090", false, nil, #line),
            (named, "localhost", false, refused("localhost"), #line),
            // Every address: the machine's addresses and names.
            (every, "192.0.2.2:9090", false, nil, #line),
            (every, "[fd00::2]:9090", false, nil, #line),
            (every, "127.0.0.1:9090", false, nil, #line),
            (every, "localhost:8080", false, nil, #line),
            (every, "vm:9090", false, nil, #line),
            (every, "vm.local:9090", false, nil, #line),
            (every, "192.0.2.254:9090", false, refused("192.0.2.254"), #line),
            (every, "vm.example:9090", false, refused("vm.example"), #line),
            (every, "attacker.example", false, refused("attacker.example"), #line),
            (every6, "192.0.2.2", false, nil, #line),
            (every6, "attacker.example", false, refused("attacker.example"), #line),
            // --http-allow-host: a name on any port, NAME:PORT on that port (a Host without a port
            // is the scheme's).
            (extra, "recorder.example", false, nil, #line),
            (extra, "RECORDER.example:443", false, nil, #line),
            (extra, "console.example:8443", false, nil, #line),
            (extra, "console.example", false, refused("console.example"), #line),
            (extra, "console.example:9090", false, refused("console.example"), #line),
            (extra, "[2001:db8::1]:7", false, nil, #line),
            (extra, "192.0.2.99:9000", false, nil, #line),
            (extra, "192.0.2.99", false, refused("192.0.2.99"), #line),
            (extra, "localhost", false, nil, #line),
            (try names("127.0.0.1", ["secure.example:443"]), "secure.example", true, nil, #line),
            (try names("127.0.0.1", ["secure.example:443"]), "secure.example", false, refused("secure.example"), #line),
        ]
        for (hosts, host, secure, expected, line) in cases {
            XCTAssertEqual(hosts.refusal(host: host, secure: secure), expected, "Host: \(host ?? "none")", line: line)
        }
    }

    func testOriginTable() throws {
        let loopback = try names("127.0.0.1", ["console.example:8443"])
        func refused(_ method: String, _ origin: String) -> String {
            "capture-recv: this console takes no \(method) from pages of \(origin) (the request's Origin); if that site is this console's, start capture-recv with an allowed host name (ConsoleAccess allowedHosts) for its host name"
        }
        let cases: [(String?, String, String?, UInt)] = [
            (nil, "POST", nil, #line),
            ("http://127.0.0.1:9090", "POST", nil, #line),
            ("http://localhost:9090", "POST", nil, #line),
            ("https://[::1]:9090", "POST", nil, #line),
            ("https://console.example:8443", "POST", nil, #line),
            ("http://console.example:8443", "DELETE", nil, #line),
            ("https://console.example", "POST", refused("POST", "https://console.example"), #line),
            ("http://attacker.example", "POST", refused("POST", "http://attacker.example"), #line),
            ("http://attacker.example:9090", "PUT", refused("PUT", "http://attacker.example:9090"), #line),
            ("null", "POST", refused("POST", "null"), #line),
            ("ftp://localhost", "POST", refused("POST", "ftp://localhost"), #line),
            ("http://localhost/path", "POST", refused("POST", "http://localhost/path"), #line),
            // GET and HEAD change nothing: their Origin is not looked at (their Host is).
            ("http://attacker.example", "GET", nil, #line),
            ("http://attacker.example", "HEAD", nil, #line),
        ]
        for (origin, method, expected, line) in cases {
            XCTAssertEqual(loopback.refusal(origin: origin, method: method), expected, "\(method) Origin: \(origin ?? "none")", line: line)
        }
    }

    func testBadNamesAreRefusedAtStart() {
        for value in ["", "recorder example", "recorder.example:0", "recorder.example:http", "[::1", "a..b", "-:80", "1.2.3"] {
            XCTAssertThrowsError(try names("127.0.0.1", [value]), value) { error in
                XCTAssertEqual("\(error)", "an allowed host name (ConsoleAccess allowedHosts) \(value) is not a host name or address: give a name such as recorder.example or an address such as 192.0.2.10 or [2001:db8::1], optionally with :PORT")
            }
        }
    }

    func testTheMachinesOwnAddressesAreThoseOfItsInterfaces() {
        let addresses = ConsoleHostNames.currentMachineAddresses()
        XCTAssertTrue(addresses.contains([127, 0, 0, 1]), "\(addresses)")
        XCTAssertFalse(ConsoleHostNames.machineHostName().isEmpty)
    }
}
