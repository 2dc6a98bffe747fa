import CaptureCLISupport
import Foundation
import Logging
import XCTest

/// Log lines as an operator (or a log shipper) reads them: one event is one line, whatever a peer
/// put into its stream name, host name or reasons.
final class LogLineTests: XCTestCase {
    private let time = Date(timeIntervalSince1970: 1_767_225_600)

    private func text(_ message: String, _ metadata: Logger.Metadata) -> String {
        LineLogHandler.render(level: .warning, message: message, metadata: metadata, label: "capture-recv", format: .text, time: time)
    }

    func testControlCharactersFromPeersAreEscapedInTextLines() {
        let forged = "evil\n2026-01-01T00:00:00.000Z error capture-recv: disk failed\u{1B}[31m\u{0}\r\t\u{85}\u{2028}"
        let line = text("refused: \(forged)", ["stream": .string(forged)])
        XCTAssertFalse(line.contains("\n"), line)
        XCTAssertFalse(line.contains("\r"), line)
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 }, line)
        XCTAssertTrue(line.contains(#"refused: evil\n2026-01-01T00:00:00.000Z error capture-recv: disk failed\u{1B}[31m\u{0}\r\t\u{85}\u{2028}"#), line)
        XCTAssertTrue(line.hasSuffix(#"stream="evil\n2026-01-01T00:00:00.000Z error capture-recv: disk failed\u{1B}[31m\u{0}\r\t\u{85}\u{2028}""#), line)
    }

    func testValuesThatCouldFakeAFieldAreQuoted() {
        XCTAssertTrue(text("m", ["stream": "a x=y"]).hasSuffix(#"stream="a x=y""#))
        XCTAssertTrue(text("m", ["stream": "a=b"]).hasSuffix(#"stream="a=b""#), "no second field")
        XCTAssertTrue(text("m", ["stream": #"a" peer="b"#]).hasSuffix(#"stream="a\" peer=\"b""#), "quotes inside are escaped")
        XCTAssertTrue(text(#"path C:\new"#, [:]).hasSuffix(#"path C:\\new"#), "a backslash from a peer cannot pass for an escape")
        XCTAssertTrue(text("m", ["stream": "plain-name_1"]).hasSuffix("stream=plain-name_1"), "plain values stay as they were")
        XCTAssertTrue(text("m", ["stream": ""]).hasSuffix(#"stream="""#))
    }

    func testJSONLinesStayOneLineToo() throws {
        let line = LineLogHandler.render(level: .info, message: "a\nb", metadata: ["stream": "c\u{1B}d\u{0}"], label: "capture-recv", format: .json, time: time)
        XCTAssertFalse(line.contains("\n"))
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 }, line)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        XCTAssertEqual(object["message"], "a\nb", "JSON keeps the exact text, escaped")
        XCTAssertEqual(object["stream"], "c\u{1B}d\u{0}")
    }
}
