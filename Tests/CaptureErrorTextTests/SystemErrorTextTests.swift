import CaptureErrorText
import Foundation
import NIOCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// System, file and socket errors in words, as Foundation and SwiftNIO really throw them.
final class SystemErrorTextTests: XCTestCase {
    func testFoundationFileErrorsSayWhatHappened() throws {
        // As the unprivileged user the product runs as, /proc cannot take a new folder.
        XCTAssertThrowsError(try FileManager.default.createDirectory(atPath: "/proc/capture-\(UUID().uuidString)/x", withIntermediateDirectories: true)) { error in
            let text = SystemErrorText.describe(error)
            XCTAssertFalse(text.contains("NSCocoaErrorDomain"), text)
            XCTAssertTrue(["no such file or directory", "permission denied", "read-only file system"].contains(text), text)
        }
        XCTAssertThrowsError(try Data(contentsOf: URL(fileURLWithPath: "/nonexistent/tokens"))) { error in
            XCTAssertEqual(SystemErrorText.describe(error), "no such file or directory")
        }
        XCTAssertThrowsError(try String(contentsOfFile: "/nonexistent/cert.pem", encoding: .utf8)) { error in
            XCTAssertEqual(SystemErrorText.describe(error), "no such file or directory")
        }
    }

    func testSocketErrors() {
        XCTAssertEqual(SystemErrorText.describe(IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)")), "connection reset by peer")
        XCTAssertEqual(SystemErrorText.errno(EACCES), "permission denied")
        let inUse = IOError(errnoCode: EADDRINUSE, reason: "bind(descriptor:ptr:bytes:)")
        XCTAssertEqual(ListenErrorText.reason(inUse, host: "0.0.0.0", port: 7373), "port 7373 is already in use on this machine (is another capture-recv running?)")
        XCTAssertEqual(ListenErrorText.reason(IOError(errnoCode: EACCES, reason: "bind"), host: "0.0.0.0", port: 80),
                       "ports below 1024 need privileges this user does not have; use a port of 1024 or above")
        XCTAssertEqual(ListenErrorText.reason(IOError(errnoCode: EADDRNOTAVAIL, reason: "bind"), host: "10.9.8.7", port: 7373),
                       "10.9.8.7 is not an address of this machine")
    }

    func testTheProjectsOwnErrorsKeepTheirWords() {
        struct Explained: Error, CustomStringConvertible { var description: String { "the receiver is full" } }
        XCTAssertEqual(SystemErrorText.describe(Explained()), "the receiver is full")
    }
}
