import CaptureCore
import Foundation
import XCTest

/// Threads are named for the system (`top -H`, `perf`, core dumps), the name cut to the 15 bytes
/// Linux keeps.
final class DetachedThreadTests: XCTestCase {
    func testAThreadNamesItselfAndTheNameIsCutTo15Bytes() throws {
        let rows: [(String, String)] = [("log commit", "log commit"), ("a name longer than fifteen", "a name longer t")]
        for (name, shown) in rows {
            let seen = NameBox()
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                DetachedThread.nameCurrentThread(name)
                seen.set(try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8).trimmingCharacters(in: .newlines))
                done.signal()
            }
            thread.start()
            XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
            XCTAssertEqual(seen.get(), shown)
        }
    }

    func testAStartedThreadCarriesItsName() throws {
        let seen = NameBox()
        let done = DispatchSemaphore(value: 0)
        try DetachedThread.start(name: "capture-delivery") {
            seen.set(try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8).trimmingCharacters(in: .newlines))
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(seen.get(), "capture-deliver")
    }
}

/// A name read on another thread.
private final class NameBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: String?
    func set(_ name: String?) { lock.withLock { value = name } }
    func get() -> String? { lock.withLock { value } }
}
