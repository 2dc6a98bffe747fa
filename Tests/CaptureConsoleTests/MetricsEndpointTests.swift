import CaptureConsole
import CaptureCore
@testable import CaptureMetrics
@testable import CaptureReceiver
import CaptureWire
import Foundation
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
            "capture_ack_latency_seconds", "capture_acks_sent_total", "capture_active_connections", "capture_active_streams",
            "capture_disk_round_seconds", "capture_disk_round_streams", "capture_disk_rounds_total", "capture_disk_write_seconds",
            "capture_files_finalized_total", "capture_received_bytes_total", "capture_received_packets_total",
            "capture_refusals_total", "capture_stream_backlog_bytes", "capture_waiting_streams",
        ])
        let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.map { String($0.split(separator: " ")[2]) }
        XCTAssertEqual(helps, types, "every family has one HELP line")
    }

    func testAckLatencyAndDiskRoundsAsExactLines() {
        let metrics = ReceiverMetrics()
        XCTAssertTrue(metrics.exposition().split(separator: "\n").contains("capture_disk_rounds_total 0"), "rounds count from 0, for rate()")
        metrics.ackLatency(.milliseconds(120))
        metrics.ackLatency(.milliseconds(3))
        metrics.diskRound(duration: .milliseconds(4), streams: 40)
        metrics.diskRound(duration: .microseconds(800), streams: 1)
        let lines = Set(metrics.exposition().split(separator: "\n").map(String.init))
        let expected = [
            "# HELP capture_ack_latency_seconds Seconds from an audio message's arrival to the first Ack that covers it, sampled at most once per Ack: the first audio message to arrive after the previous sample's Ack.",
            "# TYPE capture_ack_latency_seconds histogram",
            #"capture_ack_latency_seconds_bucket{le="0.001"} 0"#,
            #"capture_ack_latency_seconds_bucket{le="0.005"} 1"#,
            #"capture_ack_latency_seconds_bucket{le="0.1"} 1"#,
            #"capture_ack_latency_seconds_bucket{le="0.15"} 2"#,
            #"capture_ack_latency_seconds_bucket{le="10.0"} 2"#,
            #"capture_ack_latency_seconds_bucket{le="+Inf"} 2"#,
            "capture_ack_latency_seconds_sum 0.123",
            "capture_ack_latency_seconds_count 2",
            "# HELP capture_disk_rounds_total Disk rounds (group commits) run: each appends every stream's new audio to the commit log and syncs it once.",
            "# TYPE capture_disk_rounds_total counter",
            "capture_disk_rounds_total 2",
            "# HELP capture_disk_round_seconds Time a disk round took, from taking the streams' audio to the commit log's sync, in seconds.",
            "# TYPE capture_disk_round_seconds histogram",
            #"capture_disk_round_seconds_bucket{le="0.0005"} 0"#,
            #"capture_disk_round_seconds_bucket{le="0.001"} 1"#,
            #"capture_disk_round_seconds_bucket{le="0.0025"} 1"#,
            #"capture_disk_round_seconds_bucket{le="0.005"} 2"#,
            "capture_disk_round_seconds_sum 0.0048",
            "capture_disk_round_seconds_count 2",
            "# HELP capture_disk_round_streams Streams whose audio one disk round made durable.",
            "# TYPE capture_disk_round_streams histogram",
            #"capture_disk_round_streams_bucket{le="1.0"} 1"#,
            #"capture_disk_round_streams_bucket{le="20.0"} 1"#,
            #"capture_disk_round_streams_bucket{le="50.0"} 2"#,
            #"capture_disk_round_streams_bucket{le="10000.0"} 2"#,
            #"capture_disk_round_streams_bucket{le="+Inf"} 2"#,
            "capture_disk_round_streams_sum 41.0",
            "capture_disk_round_streams_count 2",
        ]
        for line in expected {
            XCTAssertTrue(lines.contains(line), "missing \(line) in:\n\(metrics.exposition())")
        }
    }

    func testLiveStreamsLevelsAreReadAtScrapeTime() async throws {
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60)))
        func open(_ name: String) -> any StreamActivityRecorder {
            directory.streamOpened(StreamOpening(
                id: UUID(), name: name, peer: "127.0.0.1:50000", format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16),
                started: Date(timeIntervalSince1970: 1_767_225_600), startSampleTime: 0, file: "\(name).caf", resumed: false, durableSampleTime: 0))
        }
        let studio = open("studio-a")
        studio.audioReceived(endSampleTime: 4_800, levels: AudioLevels(
            linearPeaks: [0.25, 1], linearRMS: [0.125, 0.5],
            loudness: Loudness(momentaryLUFS: -21.5, shortTermLUFS: -23.04, truePeakDBTP: [-11.9, 0])))
        let older = open("field-\"2\"")
        older.audioReceived(endSampleTime: 4_800, levels: AudioLevels(linearPeaks: [0.5, 0], linearRMS: [0.25, 0]))
        let quiet = open("no-levels")
        quiet.audioReceived(endSampleTime: 4_800, levels: nil)
        let gone = open("gone")
        gone.audioReceived(endSampleTime: 4_800, levels: AudioLevels(linearPeaks: [0.5, 0.5], linearRMS: [0.25, 0.25]))
        gone.connectionEnded(resumable: true)

        let console = try await RunningConsole(metrics: ReceiverMetrics(), directory: directory)
        addTeardownBlock { await console.stop() }
        let scrape = try await HTTP.get(port: console.port, path: "/metrics")
        let expected = [
            "# HELP capture_stream_peak_dbfs A live stream's latest sample peak per channel (1, 2, ...), in dBFS (-120 is silence), as its sender measured it.",
            "# TYPE capture_stream_peak_dbfs gauge",
            #"capture_stream_peak_dbfs{stream="field-\"2\"",channel="1"} -6.02"#,
            #"capture_stream_peak_dbfs{stream="field-\"2\"",channel="2"} -120.0"#,
            #"capture_stream_peak_dbfs{stream="studio-a",channel="1"} -12.04"#,
            #"capture_stream_peak_dbfs{stream="studio-a",channel="2"} 0.0"#,
            "# HELP capture_stream_short_term_lufs A live stream's latest EBU R128 short-term loudness (last 3 s), in LUFS (-120 is silence), when its sender measures it.",
            "# TYPE capture_stream_short_term_lufs gauge",
            #"capture_stream_short_term_lufs{stream="studio-a"} -23.04"#,
        ]
        let family = scrape.lines.filter { $0.contains("capture_stream_peak_dbfs") || $0.contains("capture_stream_short_term_lufs") }
        XCTAssertEqual(family, expected, "the live streams with levels, and only those, in label order:\n\(scrape.body)")

        // The stream's levels leave with it.
        studio.connectionEnded(resumable: false)
        older.connectionEnded(resumable: true)
        let after = try await HTTP.get(port: console.port, path: "/metrics")
        XCTAssertFalse(after.body.contains("capture_stream_peak_dbfs"), after.body)
        XCTAssertFalse(after.body.contains("capture_stream_short_term_lufs"), after.body)
    }

    func testLevelReadingsOfOneNameAreOneSeriesAndOddValuesAreLeftOut() {
        let metrics = ReceiverMetrics()
        let text = metrics.exposition(streamLevels: [
            .init(stream: "a", peakDBFS: [-3], shortTermLUFS: .nan),
            .init(stream: "a", peakDBFS: [-9], shortTermLUFS: -20),
            .init(stream: "b", peakDBFS: [.infinity, -1.5]),
        ])
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("capture_stream_") }.map(String.init)
        XCTAssertEqual(lines, [
            #"capture_stream_peak_dbfs{stream="a",channel="1"} -3.0"#,
            #"capture_stream_peak_dbfs{stream="b",channel="2"} -1.5"#,
        ])
        XCTAssertFalse(metrics.exposition().contains("capture_stream_peak_dbfs"), "no readings, no family")
    }

    func testEveryNameHasHelp() {
        XCTAssertEqual(ReceiverMetrics.Name.all.count, Set(ReceiverMetrics.Name.all).count)
        for name in ReceiverMetrics.Name.all {
            XCTAssertNotNil(ReceiverMetrics.helpTexts[name], name)
        }
        XCTAssertEqual(Set(ReceiverMetrics.helpTexts.keys), Set(ReceiverMetrics.Name.all))
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
            XCTAssertTrue(message.hasSuffix("choose another address with the console's address (ConsoleSettings.host, .port)"), message)
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
