import CaptureCLISupport
import XCTest

/// `capture-send --interactive`'s keys as a pure machine: table tests.
final class InteractiveKeysTests: XCTestCase {
    private typealias Action = InteractiveKeys.Action

    /// Each row: the bytes typed, the actions they give (all of them, in order), and where the keys stand after.
    func testEachSequenceOfKeys() {
        let rows: [(typed: [UInt8], actions: [Action], state: InteractiveKeys.State, line: UInt)] = [
            (Array(" ".utf8), [.pause], .ready(paused: true), #line),
            (Array("  ".utf8), [.pause, .resume], .ready(paused: false), #line),
            (Array("m\r".utf8), [.showLabel(""), .mark(label: "")], .ready(paused: false), #line),
            (Array("mgoal\n".utf8), [.showLabel(""), .showLabel("g"), .showLabel("go"), .showLabel("goa"), .showLabel("goal"), .mark(label: "goal")], .ready(paused: false), #line),
            // Space, q and m are part of a label; the label ends with Enter.
            (Array("Mq m\r".utf8), [.showLabel(""), .showLabel("q"), .showLabel("q "), .showLabel("q m"), .mark(label: "q m")], .ready(paused: false), #line),
            // Backspace erases a whole character, also one of several bytes.
            (Array("mé".utf8) + [0x7F] + Array("x\r".utf8), [.showLabel(""), .showLabel(""), .showLabel("é"), .showLabel(""), .showLabel("x"), .mark(label: "x")], .ready(paused: false), #line),
            ([UInt8(ascii: "m"), 0x08, 0x0D], [.showLabel(""), .mark(label: "")], .ready(paused: false), #line),
            // Escape drops the marker.
            (Array("mab".utf8) + [0x1B] + Array(" ".utf8), [.showLabel(""), .showLabel("a"), .showLabel("ab"), .cancelLabel, .pause], .ready(paused: true), #line),
            // A marker while paused keeps the pause.
            (Array(" mx\r ".utf8), [.pause, .showLabel(""), .showLabel("x"), .mark(label: "x"), .resume], .ready(paused: false), #line),
            // Control characters in a label, and other keys, do nothing.
            (Array("xz\tm".utf8) + [0x01, 0x00] + Array("a\r".utf8), [.showLabel(""), .showLabel("a"), .mark(label: "a")], .ready(paused: false), #line),
            // q stops, and nothing counts after it.
            (Array("q m\r".utf8), [.stop], .stopped, #line),
            (Array(" Q ".utf8), [.pause, .stop], .stopped, #line),
        ]
        for row in rows {
            var keys = InteractiveKeys()
            let actions = row.typed.flatMap { keys.handle(byte: $0) }
            XCTAssertEqual(actions, row.actions, line: row.line)
            XCTAssertEqual(keys.state, row.state, line: row.line)
        }
    }

    /// A label stops growing at the protocol's limit; a character cut off there is dropped.
    func testALabelStopsAtItsLimit() {
        var keys = InteractiveKeys(maximumLabelBytes: 4)
        _ = keys.handle(byte: UInt8(ascii: "m"))
        for byte in Array("abcdef".utf8) { _ = keys.handle(byte: byte) }
        XCTAssertEqual(keys.handle(byte: 0x0D), [.mark(label: "abcd")])
        _ = keys.handle(byte: UInt8(ascii: "m"))
        for byte in Array("abcé".utf8) { _ = keys.handle(byte: byte) }  // é is 2 bytes: only its first fits
        XCTAssertEqual(keys.handle(byte: 0x0D), [.mark(label: "abc")])
    }

    /// The terminal closing drops a label being typed; no key counts afterwards.
    func testTheEndOfInput() {
        var keys = InteractiveKeys()
        XCTAssertEqual(keys.endOfInput(), [])
        XCTAssertEqual(keys.handle(byte: UInt8(ascii: " ")), [])
        var typing = InteractiveKeys()
        _ = typing.handle(byte: UInt8(ascii: "m"))
        _ = typing.handle(byte: UInt8(ascii: "a"))
        XCTAssertEqual(typing.endOfInput(), [.cancelLabel])
        XCTAssertEqual(typing.state, .stopped)
    }
}
