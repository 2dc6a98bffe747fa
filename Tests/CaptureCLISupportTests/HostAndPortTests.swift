import CaptureCLISupport
import XCTest

/// `HOST:PORT` values as users write them, and what they are told when one cannot be used.
final class HostAndPortTests: XCTestCase {
    func testAddressesThatParse() throws {
        let cases: [(String, HostAndPort)] = [
            ("127.0.0.1:7373", HostAndPort(host: "127.0.0.1", port: 7373)),
            ("recorder.example.org:7373", HostAndPort(host: "recorder.example.org", port: 7373)),
            ("[::1]:7373", HostAndPort(host: "::1", port: 7373)),
            (":7373", HostAndPort(host: "0.0.0.0", port: 7373)),
            ("127.0.0.1:0", HostAndPort(host: "127.0.0.1", port: 0)),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(try HostAndPort.parse(text), expected, text)
        }
        XCTAssertEqual(HostAndPort(host: "::1", port: 7373).description, "[::1]:7373")
        XCTAssertEqual(HostAndPort(host: "127.0.0.1", port: 7373).description, "127.0.0.1:7373")
    }

    func testEachMistakeGetsItsOwnMessage() {
        let cases: [(String, String)] = [
            ("", "the address is empty"),
            ("127.0.0.1", "127.0.0.1 has no port: write HOST:PORT"),
            ("127.0.0.1:", "127.0.0.1: has no port after the colon"),
            ("127.0.0.1:http", "http is not a port number: use 1 to 65535"),
            ("127.0.0.1:70000", "70000 is not a port number"),
            ("::1:7373", "an IPv6 address needs brackets around it, as in [::1]:7373"),
            ("[::1", "[::1 lacks the closing bracket"),
            ("[::1]", "[::1] has no port"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try HostAndPort.parse(text), text) { error in
                let message = (error as? HostAndPort.ParseError)?.description ?? ""
                XCTAssertTrue(message.contains(expected), "\(text): \(message)")
            }
        }
    }

    func testAnAddressToConnectToNeedsAHostAndARealPort() {
        XCTAssertEqual(try HostAndPort.remoteAddress("127.0.0.1:7373"), HostAndPort(host: "127.0.0.1", port: 7373))
        for (text, expected) in [(":7373", ":7373 has no host"), ("127.0.0.1:0", "port 0 cannot be connected to"), ("127.0.0.1", "has no port")] {
            XCTAssertThrowsError(try HostAndPort.remoteAddress(text), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text): \(error)")
            }
        }
    }
}
