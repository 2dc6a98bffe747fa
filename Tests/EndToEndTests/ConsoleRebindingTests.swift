import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// DNS rebinding (issue 27, item 6), with the real capture-recv and raw requests from curl: the
/// console answers only to the names of the address it listens on (and those `--http-allow-host`
/// adds), and takes state-changing requests only from its own pages (`Origin`).
final class ConsoleRebindingTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("rebinding-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private struct Answer {
        var status: Int
        var body: String
        var headers: String
    }

    /// One request with curl to `url`, with `Host: host` when given (curl's own otherwise).
    private func request(_ url: String, host: String? = nil, method: String = "GET", headers: [String] = [], body: String? = nil) throws -> Answer {
        let bodyFile = work.appendingPathComponent("body-\(UUID().uuidString)").path
        let headerFile = work.appendingPathComponent("headers-\(UUID().uuidString)").path
        var arguments = ["-sS", "-g", "--max-time", "10", "-X", method, "-D", headerFile, "-o", bodyFile, "-w", "%{http_code}"]
        if let host { arguments += ["-H", "Host: \(host)"] }
        for header in headers { arguments += ["-H", header] }
        if let body { arguments += ["--data-binary", body] }
        let run = try ToolRunner.run("curl", arguments + [url])
        XCTAssertTrue(run.succeeded, "curl \(url): \(run.errorText)")
        return Answer(
            status: Int(run.outputText) ?? -1,
            body: (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? "",
            headers: (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? "")
    }

    private func tokenFile() throws -> String {
        let file = work.appendingPathComponent("tokens")
        try "rebinding-test-token-1\n".write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, 0o600)
        Unprivileged.handOver(file.path)
        return file.path
    }

    private let bearer = "Authorization: Bearer rebinding-test-token-1"

    /// The refusal of a Host: 421 and one line naming the option that would allow the name.
    private func assertRefusedHost(_ answer: Answer, name: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(answer.status, 421, answer.body, file: file, line: line)
        XCTAssertEqual(
            answer.body,
            "capture-recv: this console does not answer to the name \(name) (the request's Host); if that name is this machine's, start capture-recv with --http-allow-host \(name)\n",
            file: file, line: line)
    }

    /// A non-loopback IPv4 address of this machine.
    private func machineAddress() throws -> String {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { throw XCTSkip("getifaddrs failed") }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                  (entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK)) == 0 else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet4 in
                var raw = inet4.pointee.sin_addr
                _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
            }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        throw XCTSkip("this machine has no IPv4 address beyond loopback")
    }

    // MARK: - Host

    func testOnLoopbackOnlyTheMachinesLoopbackNamesAreAnswered() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        let base = "http://127.0.0.1:\(port)"
        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)", "LocalHost:\(port)", "localhost", "127.0.0.1"] {
            let answer = try request(base + "/api/streams", host: host)
            XCTAssertEqual(answer.status, 200, "Host: \(host): \(answer.body)")
            XCTAssertEqual(answer.body, "[]", "Host: \(host)")
        }
        // A name that resolves to 127.0.0.1 in an attacker's DNS: nothing, on any path.
        for path in ["/", "/api/streams", "/api/events", "/api/streams/\(UUID().uuidString.lowercased())/listen", "/metrics", "/login", "/console.css", "/api/openapi.yaml"] {
            assertRefusedHost(try request(base + path, host: "attacker.example:\(port)"), name: "attacker.example")
        }
        for name in ["127.0.0.1.attacker.example", "localhost.attacker.example", "attacker.example"] {
            assertRefusedHost(try request(base + "/api/streams", host: name), name: name)
        }
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testANameAddedWithHTTPAllowHostIsAnswered() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--http-allow-host", "recorder.example", "--http-allow-host", "console.example:8443"])
        let port = try receiver.httpPort()
        let base = "http://127.0.0.1:\(port)"
        for host in ["recorder.example", "recorder.example:\(port)", "Recorder.Example:443", "console.example:8443", "localhost:\(port)"] {
            XCTAssertEqual(try request(base + "/api/streams", host: host).status, 200, "Host: \(host)")
        }
        assertRefusedHost(try request(base + "/api/streams", host: "console.example:\(port)"), name: "console.example")
        assertRefusedHost(try request(base + "/api/streams", host: "attacker.example"), name: "attacker.example")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testOnIPv6LoopbackOnlyTheMachinesLoopbackNamesAreAnswered() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "[::1]:0"])
        let port = try receiver.httpPort()
        let base = "http://[::1]:\(port)"
        for host in ["[::1]:\(port)", "localhost:\(port)", "[0:0:0:0:0:0:0:1]:\(port)", "127.0.0.1:\(port)"] {
            let answer = try request(base + "/api/streams", host: host)
            XCTAssertEqual(answer.status, 200, "Host: \(host): \(answer.body)")
        }
        XCTAssertEqual(try request(base + "/api/streams").status, 200, "curl's own Host")
        assertRefusedHost(try request(base + "/api/streams", host: "attacker.example:\(port)"), name: "attacker.example")
        assertRefusedHost(try request(base + "/metrics", host: "[fd00::bad]:\(port)"), name: "[fd00::bad]")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    /// On a specific address, only that address (the console then needs a token as well, and the
    /// Host check comes first: a token does not make a foreign name acceptable).
    func testOnAnExplicitAddressOnlyThatAddressIsAnswered() throws {
        let address = try machineAddress()
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "\(address):0", "--http-token-file", try tokenFile()])
        let port = try receiver.httpPort()
        let base = "http://\(address):\(port)"
        XCTAssertEqual(try request(base + "/api/streams", host: "\(address):\(port)", headers: [bearer]).status, 200)
        XCTAssertEqual(try request(base + "/api/streams", host: "\(address):\(port)").status, 401, "the token is still needed")
        assertRefusedHost(try request(base + "/api/streams", host: "localhost:\(port)", headers: [bearer]), name: "localhost")
        assertRefusedHost(try request(base + "/api/streams", host: "attacker.example:\(port)", headers: [bearer]), name: "attacker.example")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    /// On every address (0.0.0.0): the machine's addresses and its host name.
    func testOnEveryAddressTheMachinesAddressesAndNameAreAnswered() throws {
        let address = try machineAddress()
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "0.0.0.0:0", "--http-token-file", try tokenFile()])
        let port = try receiver.httpPort()
        let hostName = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "localhost"
        for host in ["\(address):\(port)", "127.0.0.1:\(port)", "localhost:\(port)", "\(hostName):\(port)"] {
            XCTAssertEqual(try request("http://127.0.0.1:\(port)/api/streams", host: host, headers: [bearer]).status, 200, "Host: \(host)")
        }
        assertRefusedHost(try request("http://127.0.0.1:\(port)/api/streams", host: "attacker.example:\(port)", headers: [bearer]), name: "attacker.example")
        assertRefusedHost(try request("http://127.0.0.1:\(port)/api/streams", host: "192.0.2.254:\(port)", headers: [bearer]), name: "192.0.2.254")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    // MARK: - Origin

    /// A form on another site cannot post to the console: the login form (and anything else that
    /// is not GET or HEAD) is refused when its Origin is not one of the console's names.
    func testAPostFromAnotherOriginIsRefused() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--http-token-file", try tokenFile()])
        let port = try receiver.httpPort()
        let login = "http://127.0.0.1:\(port)/login"
        let form = "Content-Type: application/x-www-form-urlencoded"
        for origin in ["http://attacker.example", "http://attacker.example:\(port)", "null", "http://127.0.0.1.attacker.example:\(port)"] {
            let answer = try request(login, method: "POST", headers: [form, "Origin: \(origin)"], body: "token=rebinding-test-token-1")
            XCTAssertEqual(answer.status, 403, "Origin: \(origin)")
            XCTAssertFalse(answer.headers.lowercased().contains("set-cookie"), answer.headers)
            XCTAssertEqual(
                answer.body,
                "capture-recv: this console takes no POST from pages of \(origin) (the request's Origin); if that site is this console's, start capture-recv with --http-allow-host NAME for its host name\n",
                "Origin: \(origin)")
        }
        for origin in ["http://127.0.0.1:\(port)", "http://localhost:\(port)", nil] {
            let answer = try request(login, method: "POST", headers: [form] + (origin.map { ["Origin: \($0)"] } ?? []), body: "token=rebinding-test-token-1")
            XCTAssertEqual(answer.status, 303, "Origin: \(origin ?? "none")")
            XCTAssertTrue(answer.headers.lowercased().contains("set-cookie: capture_console="), answer.headers)
        }
        let delete = try request("http://127.0.0.1:\(port)/api/streams", method: "DELETE", headers: [bearer, "Origin: http://attacker.example"])
        XCTAssertEqual(delete.status, 403)
        XCTAssertEqual(try request("http://127.0.0.1:\(port)/api/streams", headers: [bearer, "Origin: http://attacker.example"]).status, 200,
                       "a GET is not state-changing: its Origin is not checked (its Host is)")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    // MARK: - Behind a reverse proxy

    /// Debian's HAProxy in HTTP mode in front of a loopback console, once passing the browser's
    /// Host on (HAProxy's default, nginx's `proxy_set_header Host $host`) and once replacing it with
    /// the console's address (nginx's default): the public name is refused until
    /// `--http-allow-host` names it; with the Host replaced, reading works but the login form's
    /// Origin still names the public site.
    func testBehindAReverseProxyThePublicNameNeedsHTTPAllowHost() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") else {
            throw XCTSkip("haproxy is not installed (scripts/install-deps.sh installs it)")
        }
        let tokens = try tokenFile()
        let form = "Content-Type: application/x-www-form-urlencoded"
        for allowing in [false, true] {
            let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--http-token-file", tokens] + (allowing ? ["--http-allow-host", "console.example"] : []))
            let port = try receiver.httpPort()
            let passing = try LoopbackPort.free()
            let replacing = try LoopbackPort.free()
            let proxy = try HAProxyUnderTest(configuration: """
                defaults
                    mode http
                    timeout connect 1s
                    timeout client 30s
                    timeout server 30s
                frontend passing
                    bind 127.0.0.1:\(passing)
                    default_backend console
                frontend replacing
                    bind 127.0.0.1:\(replacing)
                    http-request set-header Host 127.0.0.1:\(port)
                    default_backend console
                backend console
                    server console 127.0.0.1:\(port)

                """, port: passing, folder: work)
            let read = try request("http://127.0.0.1:\(passing)/api/streams", host: "console.example", headers: [bearer])
            let login = try request("http://127.0.0.1:\(replacing)/login", host: "console.example", method: "POST",
                                    headers: [form, "Origin: https://console.example"], body: "token=rebinding-test-token-1")
            if allowing {
                XCTAssertEqual(read.status, 200, read.body)
                XCTAssertEqual(login.status, 303, login.body)
            } else {
                assertRefusedHost(read, name: "console.example")
                XCTAssertEqual(login.status, 403, login.body)
            }
            XCTAssertEqual(try request("http://127.0.0.1:\(replacing)/api/streams", host: "console.example", headers: [bearer]).status, 200,
                           "with the Host replaced by the proxy, reading needs no name")
            assertRefusedHost(try request("http://127.0.0.1:\(passing)/api/streams", host: "attacker.example", headers: [bearer]), name: "attacker.example")
            XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
            _ = proxy
        }
    }

    // MARK: - In a browser

    /// The attack itself in chromium: a name that resolves to 127.0.0.1 (the browser's resolver
    /// is told so) serves the attacker's page; its requests reach the console with that name and
    /// get nothing.
    func testARealBrowserOnARebindingNameGetsNothing() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"),
              (try? ToolRunner.run("python3", ["-c", "import selenium"]))?.succeeded == true
        else { throw XCTSkip("chromium, chromium-driver and selenium are installed by scripts/install-deps.sh") }
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/rebinding_browser.py").path
        let run = try ToolRunner.run("python3", [script, "rebound.test", "http://rebound.test:\(port)/api/streams"])
        XCTAssertTrue(run.succeeded, run.errorText)
        let seen = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.standardOutput) as? [String: Any], run.outputText)
        XCTAssertEqual(
            seen["text"] as? String,
            "capture-recv: this console does not answer to the name rebound.test (the request's Host); if that name is this machine's, start capture-recv with --http-allow-host rebound.test")
        XCTAssertEqual(seen["fetch_status"] as? Int, 421, "\(seen)")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
