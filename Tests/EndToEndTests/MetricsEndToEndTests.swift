import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// capture-recv --metrics: Prometheus text scraped while a stream is live shows it (its levels
/// too), the counters move as the stream runs and ends, and Acks and disk rounds are timed.
final class MetricsEndToEndTests: XCTestCase {
    private func value(_ name: String, in lines: [String]) -> Double? {
        lines.first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    func testMetricsShowALiveStream() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--metrics", "127.0.0.1:0"])
        var metricsPort: Int?
        XCTAssertTrue(waitFor {
            metricsPort = receiver.child.standardOutput.split(separator: "\n")
                .first { $0.hasPrefix("metrics on ") }.flatMap { Int($0.split(separator: ":").last ?? "") }
            return metricsPort != nil
        })
        let port = try XCTUnwrap(metricsPort)
        let idle = try OpsHTTPClient.request(port: port, path: "/metrics")
        XCTAssertEqual(idle.status, 200)
        XCTAssertEqual(value("capture_active_streams", in: idle.lines), 0)

        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "4", "--stream-name", "metered", "--buffer-seconds", "0.05",
        ])
        // While the stream runs: one stream, one connection, audio received and acknowledged.
        var live: [String] = []
        XCTAssertTrue(waitFor(20) {
            live = (try? OpsHTTPClient.request(port: port, path: "/metrics").lines) ?? []
            return (value("capture_acks_sent_total", in: live) ?? 0) >= 2
        }, live.joined(separator: "\n"))
        XCTAssertEqual(value("capture_active_streams", in: live), 1)
        XCTAssertEqual(value("capture_active_connections", in: live), 1)
        XCTAssertGreaterThan(value("capture_received_bytes_total", in: live) ?? 0, 48_000 * 4 / 10)
        XCTAssertGreaterThan(value("capture_received_packets_total", in: live) ?? 0, 0)
        XCTAssertGreaterThan(value("capture_disk_write_seconds_count", in: live) ?? 0, 0, "disk writes are timed")
        XCTAssertGreaterThan(value("capture_disk_rounds_total", in: live) ?? 0, 0, "rounds are counted")
        XCTAssertGreaterThan(value("capture_disk_round_streams_sum", in: live) ?? 0, 0, "and the streams in them")
        XCTAssertGreaterThan(value("capture_ack_latency_seconds_count", in: live) ?? 0, 0, "Acks are timed")
        let latency = (value("capture_ack_latency_seconds_sum", in: live) ?? -1) / (value("capture_ack_latency_seconds_count", in: live) ?? 1)
        XCTAssertTrue((0.0..<5.0).contains(latency), "mean ack latency \(latency) s")
        // The stream's levels, read from the directory at the scrape.
        let peaks = live.filter { $0.hasPrefix(#"capture_stream_peak_dbfs{stream="metered",channel="#) }
        XCTAssertFalse(peaks.isEmpty, live.joined(separator: "\n"))
        for line in peaks {
            let peak = Double(line.split(separator: " ").last ?? "") ?? 1
            XCTAssertTrue((-120.0...0.0).contains(peak), line)
        }
        XCTAssertNotNil(value(#"capture_stream_short_term_lufs{stream="metered"}"#, in: live), "the sender measures loudness: \(live.joined(separator: "\n"))")

        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        var done: [String] = []
        XCTAssertTrue(waitFor {
            done = (try? OpsHTTPClient.request(port: port, path: "/metrics").lines) ?? []
            return value("capture_files_finalized_total", in: done) == 1
        }, done.joined(separator: "\n"))
        XCTAssertEqual(value("capture_active_streams", in: done), 0)
        XCTAssertFalse(done.contains { $0.hasPrefix("capture_stream_peak_dbfs{") }, "a finished stream has no levels")
        XCTAssertEqual(value("capture_received_packets_total", in: done), 4 * 48_000, "PCM packets are frames: all of them")
        XCTAssertEqual(try OpsHTTPClient.request(port: port, path: "/other").status, 404)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
