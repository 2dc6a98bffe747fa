@testable import CaptureReceiver
import Logging
import NIOCore
import NIOEmbedded
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A connection the listening channel cannot accept or set up is logged with the reason, never
/// closed in silence.
final class AcceptFailureLoggerTests: XCTestCase {
    func testAnAcceptErrorIsLoggedInWords() throws {
        let lines = LogLines()
        let logger = Logger(label: "test") { _ in RecordingLogHandler(lines: lines) }
        let channel = EmbeddedChannel(handler: AcceptFailureLogger(logger: logger))
        channel.pipeline.fireErrorCaught(IOError(errnoCode: EACCES, reason: "setsockopt(descriptor:level:option_name:option_value:option_len:)"))
        XCTAssertThrowsError(try channel.throwIfErrorCaught(), "the error still travels on")
        XCTAssertEqual(lines.all, ["error cannot accept or set up a connection; it was closed reason=permission denied"])
        _ = try channel.finish()
    }
}

/// Log lines kept for a test to read.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// A swift-log handler that keeps `level message key=value…` lines.
struct RecordingLogHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        lines.append(([String(describing: event.level), "\(event.message)"] + fields).joined(separator: " "))
    }
}
