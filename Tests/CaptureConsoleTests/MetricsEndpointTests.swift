import CaptureConsole
import CaptureMetrics
import Prometheus
import TestSupport
import XCTest

/// What a Prometheus server scraping `capture-recv --http` (or its old name `--metrics`) reads at
/// `/metrics`.
final class MetricsEndpointTests: XCTestCase {
    private func startEndpoint(_ metrics: ReceiverMetrics) async throws -> RunningConsole {
        let console = try await RunningConsole(metrics: metrics)
        addTeardownBlock { await console.stop() }
        return console
    }

    func testScrapeShowsEveryRecordedFigureAsExactLines() async throws {
        let metrics = ReceiverMetrics(refusalReasons: ["auth", "limit"], errorReasons: ["disk_full"])
        metrics.connectionOpened()
        metrics.connectionOpened()
        metrics.connectionClosed()
        metrics.streamOpened()
        metrics.bytesReceived(4_000)
        metrics.bytesReceived(96)
        metrics.packetsReceived(5)
        metrics.packetsReceived(3)
        for _ in 0..<3 { metrics.ackSent() }
        metrics.fileFinalized()
        metrics.refused(reason: "auth")
        metrics.refused(reason: "auth")
        metrics.refused(reason: "version")
        metrics.error(reason: "protocol")
        metrics.diskWrite(duration: .microseconds(300))
        metrics.diskWrite(duration: .milliseconds(2))
        metrics.diskWrite(duration: .milliseconds(40))
        metrics.backlog(stream: "field-1", bytes: 38_400, seconds: 0.2)

        let endpoint = try await startEndpoint(metrics)
        let response = try await HTTP.get(port: endpoint.port, path: "/metrics")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8")
        XCTAssertEqual(response.headers["content-length"], "\(response.body.utf8.count)")
        let lines = Set(response.lines)
        let expected = [
            "# HELP capture_active_connections Sender connections open now.",
            "# TYPE capture_active_connections gauge",
            "capture_active_connections 1.0",
            "# TYPE capture_active_streams gauge",
            "capture_active_streams 1.0",
            "# TYPE capture_received_bytes_total counter",
            "capture_received_bytes_total 4096",
            "capture_received_packets_total 8",
            "capture_acks_sent_total 3",
            "capture_files_finalized_total 1",
            "# TYPE capture_refusals_total counter",
            #"capture_refusals_total{reason="auth"} 2"#,
            #"capture_refusals_total{reason="limit"} 0"#,
            #"capture_refusals_total{reason="version"} 1"#,
            #"capture_errors_total{reason="disk_full"} 0"#,
            #"capture_errors_total{reason="protocol"} 1"#,
            "# HELP capture_disk_write_seconds Time to write (and sync) audio to disk, in seconds.",
            "# TYPE capture_disk_write_seconds histogram",
            #"capture_disk_write_seconds_bucket{le="0.0001"} 0"#,
            #"capture_disk_write_seconds_bucket{le="0.00025"} 0"#,
            #"capture_disk_write_seconds_bucket{le="0.0005"} 1"#,
            #"capture_disk_write_seconds_bucket{le="0.001"} 1"#,
            #"capture_disk_write_seconds_bucket{le="0.0025"} 2"#,
            #"capture_disk_write_seconds_bucket{le="0.025"} 2"#,
            #"capture_disk_write_seconds_bucket{le="0.05"} 3"#,
            #"capture_disk_write_seconds_bucket{le="2.5"} 3"#,
            #"capture_disk_write_seconds_bucket{le="+Inf"} 3"#,
            "capture_disk_write_seconds_sum 0.0423",
            "capture_disk_write_seconds_count 3",
            "# TYPE capture_stream_backlog_bytes gauge",
            #"capture_stream_backlog_bytes{stream="field-1"} 38400.0"#,
            #"capture_stream_backlog_seconds{stream="field-1"} 0.2"#,
        ]
        for line in expected {
            XCTAssertTrue(lines.contains(line), "missing \(line) in:\n\(response.body)")
        }
    }

    func testFamiliesComeInNameOrderEachWithHelpAndType() throws {
        let metrics = ReceiverMetrics(refusalReasons: ["limit"])
        metrics.backlog(stream: "a", bytes: 1)
        let text = metrics.exposition()
        let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }
        XCTAssertEqual(types, types.sorted())
        XCTAssertEqual(types, [
            "capture_acks_sent_total", "capture_active_connections", "capture_active_streams", "capture_disk_write_seconds",
            "capture_files_finalized_total", "capture_received_bytes_total", "capture_received_packets_total",
            "capture_refusals_total", "capture_stream_backlog_bytes", "capture_waiting_streams",
        ])
        let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.map { String($0.split(separator: " ")[2]) }
        XCTAssertEqual(helps, types, "every family has one HELP line")
    }

    func testOtherPathsAre404AndAQueryIsIgnored() async throws {
        let endpoint = try await startEndpoint(ReceiverMetrics())
        let missing = try await HTTP.get(port: endpoint.port, path: "/metricsx")
        XCTAssertEqual(missing.status, 404)
        let post = try await HTTP.get(method: "POST", port: endpoint.port, path: "/metrics")
        XCTAssertNotEqual(post.status, 200)
        let withQuery = try await HTTP.get(port: endpoint.port, path: "/metrics?x=1")
        XCTAssertEqual(withQuery.status, 200)
        XCTAssertTrue(withQuery.body.contains("capture_active_streams 0.0"), withQuery.body)
    }

    func testEachScrapeIsCurrent() async throws {
        let metrics = ReceiverMetrics()
        let endpoint = try await startEndpoint(metrics)
        metrics.streamOpened()
        let first = try await HTTP.get(port: endpoint.port, path: "/metrics")
        XCTAssertTrue(first.lines.contains("capture_active_streams 1.0"))
        metrics.streamOpened()
        metrics.bytesReceived(10)
        let second = try await HTTP.get(port: endpoint.port, path: "/metrics").lines
        XCTAssertTrue(second.contains("capture_active_streams 2.0"), "\(second)")
        XCTAssertTrue(second.contains("capture_received_bytes_total 10"), "\(second)")
    }

    func testClosedStreamLosesItsBacklogSeries() throws {
        let metrics = ReceiverMetrics()
        metrics.streamOpened()
        metrics.backlog(stream: "one", bytes: 100, seconds: 1)
        metrics.backlog(stream: "two", bytes: 200)
        metrics.streamClosed(stream: "one")
        let lines = metrics.exposition().split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("capture_active_streams 0.0"), "\(lines)")
        XCTAssertFalse(lines.contains { $0.contains(#"stream="one""#) }, "\(lines)")
        XCTAssertTrue(lines.contains(#"capture_stream_backlog_bytes{stream="two"} 200.0"#), "\(lines)")
    }

    func testTwoReceiversInOneProcessCountApart() {
        let first = ReceiverMetrics()
        let second = ReceiverMetrics()
        first.bytesReceived(5)
        first.refused(reason: "auth")
        XCTAssertTrue(first.exposition().contains("capture_received_bytes_total 5\n"))
        XCTAssertTrue(second.exposition().contains("capture_received_bytes_total 0\n"))
        XCTAssertFalse(second.exposition().contains("capture_refusals_total"))
    }

    func testMetricsOnTheirOwnRegistryStayOffTheDefaultOne() {
        ReceiverMetrics().bytesReceived(1)
        XCTAssertFalse(PrometheusMetricsFactory.defaultRegistry.emitToString().contains("capture_"))
    }

    func testDiskWriteInSecondsLandsInTheRightBucket() {
        let metrics = ReceiverMetrics()
        metrics.diskWrite(seconds: 0.5)
        metrics.diskWrite(seconds: 3)
        let lines = metrics.exposition().split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains(#"capture_disk_write_seconds_bucket{le="0.25"} 0"#), "\(lines)")
        XCTAssertTrue(lines.contains(#"capture_disk_write_seconds_bucket{le="0.5"} 1"#), "\(lines)")
        XCTAssertTrue(lines.contains(#"capture_disk_write_seconds_bucket{le="2.5"} 1"#), "\(lines)")
        XCTAssertTrue(lines.contains(#"capture_disk_write_seconds_bucket{le="+Inf"} 2"#), "\(lines)")
    }

    func testBusyPortGivesAnErrorThatSaysWhatToDo() async throws {
        let first = try await startEndpoint(ReceiverMetrics())
        let service = try ConsoleServer.make(
            settings: ConsoleSettings(host: "127.0.0.1", port: first.port, access: try ConsoleAccess(host: "127.0.0.1", tokens: nil)),
            metrics: ReceiverMetrics(), directory: nil, logger: .init(label: "test"))
        do {
            try await service.run()
            XCTFail("a second server on a busy port must not run")
        } catch {
            let message = "\(error)"
            XCTAssertTrue(message.hasPrefix("cannot serve the console and metrics on 127.0.0.1:\(first.port): port \(first.port) is already in use"), message)
            XCTAssertTrue(message.hasSuffix("choose another address with --http HOST:PORT"), message)
        }
    }

    func testStoppedServerRefusesConnections() async throws {
        let console = try await RunningConsole(metrics: ReceiverMetrics())
        let port = console.port
        let before = try await HTTP.get(port: port, path: "/metrics")
        XCTAssertEqual(before.status, 200)
        await console.stop()
        do {
            _ = try await HTTP.get(port: port, path: "/metrics")
            XCTFail("nothing listens any more")
        } catch {}
    }
}
