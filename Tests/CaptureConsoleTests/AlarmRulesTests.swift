import CaptureMetrics
@testable import CaptureReceiver
import Foundation
import TestSupport
import XCTest

/// The Prometheus and Alertmanager files in docs/prometheus/ against the receiver they describe:
/// Prometheus's and Alertmanager's own checkers accept them, the rules' unit tests pass, and the
/// rules cover every alarm kind with the metric name the receiver exports, so a renamed metric or a
/// new kind fails here.
final class AlarmRulesTests: XCTestCase {
    private static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/prometheus")

    private func run(_ tool: String, _ arguments: [String]) throws -> ToolResult {
        guard ToolRunner.find(tool) != nil else { throw XCTSkip("\(tool) is not installed (Debian: prometheus, prometheus-alertmanager)") }
        return try ToolRunner.run(tool, arguments)
    }

    func testPrometheusAcceptsTheRulesAndTheirUnitTestsPass() throws {
        let rules = Self.folder.appendingPathComponent("capture-alarms.rules.yml").path
        let check = try run("promtool", ["check", "rules", rules])
        XCTAssertEqual(check.exitStatus, 0, check.outputText + check.errorText)
        XCTAssertTrue(check.outputText.contains("SUCCESS: \(StreamAlarmKind.allCases.count) rules found"), check.outputText)
        let test = try run("promtool", ["test", "rules", Self.folder.appendingPathComponent("capture-alarms.test.yml").path])
        XCTAssertEqual(test.exitStatus, 0, test.outputText + test.errorText)
    }

    func testAlertmanagerAcceptsItsConfiguration() throws {
        let check = try run("amtool", ["check-config", Self.folder.appendingPathComponent("alertmanager.yml").path])
        XCTAssertEqual(check.exitStatus, 0, check.outputText + check.errorText)
    }

    func testEveryAlarmKindHasARuleOnTheExportedMetric() throws {
        let rules = try String(contentsOf: Self.folder.appendingPathComponent("capture-alarms.rules.yml"), encoding: .utf8)
        let expressions = rules.split(separator: "\n").filter { $0.contains("expr:") }
        XCTAssertEqual(expressions.count, StreamAlarmKind.allCases.count)
        for kind in StreamAlarmKind.allCases {
            XCTAssertTrue(
                expressions.contains { $0.contains("\(ReceiverMetrics.Name.streamAlarm){kind=\"\(kind.rawValue)\"} == 1") },
                "a rule for \(kind.rawValue) on \(ReceiverMetrics.Name.streamAlarm)")
        }
        let metrics = ReceiverMetrics()
        metrics.alarm(stream: "studio-a", kind: StreamAlarmKind.silence.rawValue, raised: true)
        XCTAssertTrue(metrics.exposition().contains("\(ReceiverMetrics.Name.streamAlarm){stream=\"studio-a\",kind=\"silence\"} 1"), metrics.exposition())
    }
}
