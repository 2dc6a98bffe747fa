@testable import capture_send
import CaptureSender
import XCTest

/// `--also HOST:PORT,max-rate=...,priority=...`: what the settings parse to.
final class BackupSpecPacingTests: XCTestCase {
    func testMaxRateAndPriorityParse() throws {
        let rows: [(text: String, rate: Int?, priority: CaptureStreamer.Priority)] = [
            ("127.0.0.1:7000", nil, .foreground),
            ("127.0.0.1:7000,max-rate=200k", 200_000, .foreground),
            ("127.0.0.1:7000,max-rate=1.5M,priority=background", 1_500_000, .background),
            ("127.0.0.1:7000,priority=foreground,max-rate=8000", 8_000, .foreground),
            ("127.0.0.1:7000,codec=pcm,priority=background,max-rate=10G", 10_000_000_000, .background),
            ("127.0.0.1:7000,max-rate=64K", 64_000, .foreground),
            // Numbers as every other numeric option reads them (`SendRanges.alsoMaxRate`).
            ("127.0.0.1:7000,max-rate=1e6", 1_000_000, .foreground),
            ("127.0.0.1:7000,max-rate=+200k", 200_000, .foreground),
            ("127.0.0.1:7000,max-rate=0.5g", 500_000_000, .foreground),
        ]
        for row in rows {
            let spec = try BackupReceiverSpec(parsing: row.text)
            XCTAssertEqual(spec.maxBitsPerSecond, row.rate, row.text)
            XCTAssertEqual(spec.priority, row.priority, row.text)
        }
        XCTAssertThrowsError(try BackupReceiverSpec(parsing: "127.0.0.1:7000,max-rate="), "no value")
        for bad in ["max-rate=0", "max-rate=7999", "max-rate=11G", "max-rate=k", "max-rate=1.5", "max-rate=2T", "max-rate=0x10k", "max-rate=inf", "max-rate=nan", "priority=Background"] {
            XCTAssertThrowsError(try BackupReceiverSpec(parsing: "127.0.0.1:7000,\(bad)"), bad) { error in
                XCTAssertEqual(
                    "\(error)", "--also 127.0.0.1:7000,\(bad): "
                        + (bad.hasPrefix("max-rate") ? "\(bad) is not a rate of 8000 to 10000000000 b/s (8k to 10G); write it as 200000, 200k, 1.5M or 1G" : "priority=Background is not foreground or background"))
            }
        }
    }
}
