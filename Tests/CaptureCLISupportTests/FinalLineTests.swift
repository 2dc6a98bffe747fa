import CaptureCLISupport
import Foundation
import XCTest

/// The line a failed run ends with: plain text, or a JSON object like every JSON log line.
final class FinalLineTests: XCTestCase {
    func testTextAndJSON() throws {
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        XCTAssertEqual(FinalLine.render("cannot read x", format: .text, label: "capture-send", time: time), "Error: cannot read x")
        let json = FinalLine.render("cannot read \"x\"", format: .json, label: "capture-send", time: time)
        XCTAssertFalse(json.contains("\n"))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String])
        XCTAssertEqual(object, ["time": "2027-01-15T08:00:00.000Z", "level": "error", "logger": "capture-send", "message": "cannot read \"x\""])
    }
}
