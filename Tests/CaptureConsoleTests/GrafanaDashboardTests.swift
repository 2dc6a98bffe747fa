@testable import CaptureMetrics
@testable import CaptureReceiver
import Foundation
import TestSupport
import XCTest

/// The Grafana dashboard in docs/grafana/ against the receiver it shows. Grafana is not in
/// Debian 12's archive, so the dashboard is not rendered here: it is checked instead. Every panel
/// is well formed (a unique id, the dashboard's Prometheus data source, at least one query);
/// Prometheus's own `promtool` parses every query (with Grafana's variables replaced by values);
/// every metric the queries read is one a `ReceiverMetrics` exports, rates are taken of counters
/// and histograms only; and every metric the receiver exports has a panel. So a renamed, removed or
/// new metric fails here.
final class GrafanaDashboardTests: XCTestCase {
    private static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/grafana")
    private static let dashboardFile = folder.appendingPathComponent("capture-receiver.json")

    /// One PromQL query of the dashboard: a panel's target, or the series selector of a template
    /// variable's `label_values(...)`.
    struct Query {
        /// Where it is, for failure messages and as a recording rule's name ("panel_15_A").
        var place: String
        /// As written in the dashboard, with Grafana's variables.
        var expression: String
    }

    // MARK: - Reading the dashboard

    private func dashboard() throws -> [String: Any] {
        let data = try Data(contentsOf: Self.dashboardFile)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any], "the dashboard is a JSON object")
    }

    /// Every panel, those inside rows included.
    private func panels(_ dashboard: [String: Any]) throws -> [[String: Any]] {
        let top = try XCTUnwrap(dashboard["panels"] as? [[String: Any]], "the dashboard has panels")
        return top.flatMap { panel in [panel] + ((panel["panels"] as? [[String: Any]]) ?? []) }
    }

    private func variables(_ dashboard: [String: Any]) -> [[String: Any]] {
        ((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]]) ?? []
    }

    private func queries(_ dashboard: [String: Any]) throws -> [Query] {
        var found: [Query] = []
        for panel in try panels(dashboard) where panel["type"] as? String != "row" {
            let id = panel["id"].map { "\($0)" } ?? "?"
            for target in (panel["targets"] as? [[String: Any]]) ?? [] {
                let expression = try XCTUnwrap(target["expr"] as? String, "panel \(id)'s target has an expr")
                found.append(Query(place: "panel_\(id)_\(target["refId"] as? String ?? "?")", expression: expression))
            }
        }
        for variable in variables(dashboard) where variable["type"] as? String == "query" {
            let name = variable["name"] as? String ?? "?"
            let query = (variable["query"] as? String) ?? ((variable["query"] as? [String: Any])?["query"] as? String) ?? ""
            if let selector = Self.labelValuesSelector(query) {
                found.append(Query(place: "variable_\(name)", expression: selector))
            }
        }
        return found
    }

    /// The series selector of `label_values(SELECTOR, LABEL)`; nil for other variable queries.
    static func labelValuesSelector(_ query: String) -> String? {
        let text = query.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("label_values("), text.hasSuffix(")"), let comma = text.lastIndex(of: ",") else { return nil }
        let selector = text[text.index(text.startIndex, offsetBy: "label_values(".count)..<comma]
        return selector.trimmingCharacters(in: .whitespaces)
    }

    // MARK: - Grafana's variables

    /// Values for Grafana's built-in variables, as a query would get them.
    private static let builtIns: [String: String] = [
        "__rate_interval": "1m", "__interval": "30s", "__interval_ms": "30000", "__range": "1h", "__range_s": "3600",
        "__range_ms": "3600000",
    ]

    /// `expression` with every Grafana variable (`$name`, `${name}`, `${name:format}`, `[[name]]`)
    /// replaced: built-ins by their usual values, the dashboard's own variables by `values`. A
    /// variable that is neither fails (a typo would leave Grafana's query broken).
    static func substitute(_ expression: String, values: [String: String]) throws -> String {
        let pattern = try Regex(#"\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]"#)
        var output = ""
        var rest = expression[...]
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            let name = (1...3).lazy.compactMap { match.output[$0].substring }.first.map(String.init) ?? ""
            guard let value = builtIns[name] ?? values[name] else {
                throw SubstitutionError(name: name, expression: expression)
            }
            output += value
            rest = rest[match.range.upperBound...]
        }
        return output + rest
    }

    struct SubstitutionError: Error, CustomStringConvertible {
        var name: String
        var expression: String
        var description: String { "$\(name) is neither a Grafana built-in nor one of the dashboard's variables, in \(expression)" }
    }

    /// A value for each of the dashboard's own variables.
    private func variableValues(_ dashboard: [String: Any]) -> [String: String] {
        var values: [String: String] = [:]
        for variable in variables(dashboard) {
            guard let name = variable["name"] as? String else { continue }
            values[name] = ["stream": "studio-a", "instance": "127.0.0.1:8080"][name] ?? "value"
        }
        return values
    }

    // MARK: - Metric names

    /// The metric names an expression reads (identifiers starting with `capture_`).
    static func metricNames(in expression: String) throws -> [(name: String, function: String)] {
        let pattern = try Regex(#"(?:^|[^A-Za-z0-9_:])(capture_[A-Za-z0-9_]+)"#)
        return expression.matches(of: pattern).compactMap { match in
            guard let name = match.output[1].range else { return nil }
            return (String(expression[name]), enclosingFunction(in: expression, before: name.lowerBound))
        }
    }

    /// The function whose parentheses enclose `position` ("rate", "histogram_quantile"), or "" when
    /// none does, or the parentheses are an aggregation's or a sub-expression's.
    static func enclosingFunction(in expression: String, before position: String.Index) -> String {
        var depth = 0
        var index = position
        while index > expression.startIndex {
            index = expression.index(before: index)
            switch expression[index] {
            case ")": depth += 1
            case "(" where depth > 0: depth -= 1
            case "(":
                var start = index
                while start > expression.startIndex, expression[expression.index(before: start)] == " " { start = expression.index(before: start) }
                var nameStart = start
                while nameStart > expression.startIndex, expression[expression.index(before: nameStart)].isLetter || expression[expression.index(before: nameStart)] == "_" {
                    nameStart = expression.index(before: nameStart)
                }
                return String(expression[nameStart..<start])
            default: break
            }
        }
        return ""
    }

    /// What a `ReceiverMetrics` exports once it has seen one of everything (labelled families and
    /// the scrape-time levels appear only then): each family's name and type.
    static func exportedFamilies() -> [String: String] {
        let metrics = ReceiverMetrics(refusalReasons: ["authenticationFailed"], errorReasons: ["storageFailed"])
        metrics.connectionOpened()
        metrics.streamOpened()
        metrics.waitingStreams(1)
        metrics.bytesReceived(1_920)
        metrics.packetsReceived(480)
        metrics.ackSent()
        metrics.ackLatency(.milliseconds(210))
        metrics.fileFinalized()
        metrics.refused(reason: "tooManyStreams")
        metrics.error(reason: "sequenceGap")
        metrics.diskWrite(duration: .milliseconds(2))
        metrics.diskRound(duration: .milliseconds(3), streams: 12)
        metrics.backlog(stream: "studio-a", bytes: 38_400, seconds: 0.2)
        metrics.alarm(stream: "studio-a", kind: StreamAlarmKind.silence.rawValue, raised: true)
        let text = metrics.exposition(streamLevels: [.init(stream: "studio-a", peakDBFS: [-6, -12], shortTermLUFS: -23)])
        var families: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            if parts.count == 4 { families[String(parts[2])] = String(parts[3]) }
        }
        return families
    }

    /// The family a series name belongs to (`_bucket`, `_sum` and `_count` of a histogram), and its
    /// type; nil when the receiver exports no such series.
    static func family(of name: String, in families: [String: String]) -> (name: String, type: String)? {
        if let type = families[name] { return (name, type) }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if families[base] == "histogram" { return (base, "histogram") }
        }
        return nil
    }

    // MARK: - Tests

    func testTheDashboardIsAGrafanaDashboardWithAPrometheusInputAndAStreamVariable() throws {
        let dashboard = try dashboard()
        XCTAssertEqual(dashboard["uid"] as? String, "capture-receiver")
        XCTAssertFalse((dashboard["title"] as? String ?? "").isEmpty)
        let schema = try XCTUnwrap(dashboard["schemaVersion"] as? Int)
        XCTAssertTrue((36...41).contains(schema), "schemaVersion \(schema): Grafana 9.5 to 11")
        let inputs = try XCTUnwrap(dashboard["__inputs"] as? [[String: Any]])
        XCTAssertTrue(inputs.contains { $0["name"] as? String == "DS_PROMETHEUS" && $0["type"] as? String == "datasource" && $0["pluginId"] as? String == "prometheus" })
        let variables = variables(dashboard)
        let stream = try XCTUnwrap(variables.first { $0["name"] as? String == "stream" }, "a stream variable")
        let query = (stream["query"] as? [String: Any])?["query"] as? String ?? ""
        XCTAssertTrue(query.hasPrefix("label_values(") && query.hasSuffix(", stream)"), query)
        XCTAssertTrue(query.contains(ReceiverMetrics.Name.streamAlarm), query)
        for variable in variables where variable["type"] as? String == "query" {
            XCTAssertEqual((variable["datasource"] as? [String: Any])?["uid"] as? String, "${DS_PROMETHEUS}", "\(variable["name"] ?? "?")")
        }
    }

    func testEveryPanelHasAUniqueIDADataSourceAndAQuery() throws {
        let panels = try panels(try dashboard())
        XCTAssertGreaterThan(panels.count, 10)
        var ids: Set<Int> = []
        for panel in panels {
            let id = try XCTUnwrap(panel["id"] as? Int, "every panel has an id: \(panel["title"] ?? "?")")
            XCTAssertTrue(ids.insert(id).inserted, "panel id \(id) is used twice")
            let title = panel["title"] as? String ?? ""
            XCTAssertFalse(title.isEmpty, "panel \(id) has a title")
            let grid = try XCTUnwrap(panel["gridPos"] as? [String: Int], "panel \(id) has a place")
            XCTAssertLessThanOrEqual((grid["x"] ?? 0) + (grid["w"] ?? 0), 24, "panel \(id) fits the 24 columns")
            // A row only groups the panels below it: it shows no data.
            if panel["type"] as? String == "row" { continue }
            XCTAssertEqual((panel["datasource"] as? [String: Any])?["uid"] as? String, "${DS_PROMETHEUS}", "panel \(id) (\(title)) reads Prometheus")
            let targets = (panel["targets"] as? [[String: Any]]) ?? []
            XCTAssertFalse(targets.isEmpty, "panel \(id) (\(title)) has a query")
            var refs: Set<String> = []
            for target in targets {
                XCTAssertFalse((target["expr"] as? String ?? "").isEmpty, "panel \(id) (\(title)): every target has an expr")
                XCTAssertTrue(refs.insert(target["refId"] as? String ?? "").inserted, "panel \(id) (\(title)): refIds are unique")
                XCTAssertEqual((target["datasource"] as? [String: Any])?["uid"] as? String, "${DS_PROMETHEUS}", "panel \(id) (\(title))")
            }
        }
    }

    func testPrometheusParsesEveryQuery() throws {
        guard ToolRunner.find("promtool") != nil else { throw XCTSkip("promtool is not installed (Debian: prometheus)") }
        let dashboard = try dashboard()
        let values = variableValues(dashboard)
        let queries = try queries(dashboard)
        XCTAssertGreaterThan(queries.count, 20)
        // Each query as a recording rule: `promtool check rules` parses its expression as PromQL.
        // The file is JSON, which is YAML (with "/" unescaped: YAML has no "\/").
        let rules: [[String: String]] = try queries.map { ["record": "dashboard:\($0.place)", "expr": try Self.substitute($0.expression, values: values)] }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("grafana-queries-\(UUID().uuidString).rules.json")
        defer { try? FileManager.default.removeItem(at: file) }
        try JSONSerialization.data(withJSONObject: ["groups": [["name": "grafana-dashboard", "rules": rules]]], options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            .write(to: file)
        let check = try ToolRunner.run("promtool", ["check", "rules", file.path])
        XCTAssertEqual(check.exitStatus, 0, check.outputText + check.errorText)
        XCTAssertTrue(check.outputText.contains("SUCCESS: \(queries.count) rules found"), check.outputText + check.errorText)
    }

    func testEveryMetricTheDashboardReadsIsOneTheReceiverExportsAndRatesAreOfCounters() throws {
        let families = Self.exportedFamilies()
        for query in try queries(try dashboard()) {
            let names = try Self.metricNames(in: query.expression)
            XCTAssertFalse(names.isEmpty && !query.place.hasPrefix("variable_"), "\(query.place) reads no capture_ metric: \(query.expression)")
            for (name, function) in names {
                guard let family = Self.family(of: name, in: families) else {
                    XCTFail("\(query.place) reads \(name), which the receiver does not export (\(families.keys.sorted())): \(query.expression)")
                    continue
                }
                let rated = ["rate", "irate", "increase"].contains(function)
                if query.place.hasPrefix("variable_") { continue }
                switch family.type {
                case "counter", "histogram":
                    XCTAssertTrue(rated, "\(query.place): \(name) is a \(family.type): read it through rate() or increase(), not \(function.isEmpty ? "as is" : function + "()")")
                default:
                    XCTAssertFalse(rated, "\(query.place): \(name) is a \(family.type): \(function)() of it means nothing")
                }
                if name.hasSuffix("_bucket") {
                    XCTAssertTrue(query.expression.contains("by (le)") && query.expression.hasPrefix("histogram_quantile("), "\(query.place): buckets are for histogram_quantile over le")
                }
            }
        }
    }

    func testEveryMetricTheReceiverExportsHasAPanel() throws {
        let families = Self.exportedFamilies()
        XCTAssertEqual(Set(families.keys), Set(ReceiverMetrics.Name.all), "fed one of everything, the receiver exports every name it has, and only those")
        var read: Set<String> = []
        for query in try queries(try dashboard()) where !query.place.hasPrefix("variable_") {
            for (name, _) in try Self.metricNames(in: query.expression) {
                if let family = Self.family(of: name, in: families) { read.insert(family.name) }
            }
        }
        for name in ReceiverMetrics.Name.all {
            XCTAssertTrue(read.contains(name), "no panel of docs/grafana/capture-receiver.json shows \(name)")
        }
    }

    func testTheDocsNameEveryMetric() throws {
        let readme = try String(contentsOf: Self.folder.appendingPathComponent("README.md"), encoding: .utf8)
        let api = try String(contentsOf: Self.folder.deletingLastPathComponent().appendingPathComponent("HTTP-API.md"), encoding: .utf8)
        for name in ReceiverMetrics.Name.all {
            XCTAssertTrue(readme.contains("`\(name)`"), "docs/grafana/README.md names \(name)")
            XCTAssertTrue(api.contains("| `\(name)`") || api.contains("| `\(name){"), "docs/HTTP-API.md's table of metrics has \(name)")
        }
    }

    // MARK: - The checks themselves

    func testVariablesAreReplacedAndAnUnknownOneFails() throws {
        XCTAssertEqual(
            try Self.substitute(#"rate(x{stream=~"$stream", i="${instance:regex}"}[$__rate_interval]) [[stream]]"#, values: ["stream": "s", "instance": "i"]),
            #"rate(x{stream=~"s", i="i"}[1m]) s"#)
        XCTAssertThrowsError(try Self.substitute(#"x{stream=~"$strem"}"#, values: ["stream": "s"]))
        XCTAssertEqual(Self.labelValuesSelector(#"label_values({__name__=~"a|b"}, stream)"#), #"{__name__=~"a|b"}"#)
        XCTAssertNil(Self.labelValuesSelector("label_names()"))
    }

    func testNamesAndTheirEnclosingFunctionsAreFound() throws {
        let names = try Self.metricNames(in: #"histogram_quantile(0.9, sum by (le) (rate(capture_a_bucket{x="capture_b"}[1m]))) / sum by (i) (capture_c)"#)
        XCTAssertEqual(names.map(\.name), ["capture_a_bucket", "capture_b", "capture_c"])
        XCTAssertEqual(names.map(\.function), ["rate", "rate", ""])
        let families = ["capture_h": "histogram", "capture_g": "gauge"]
        XCTAssertEqual(Self.family(of: "capture_h_sum", in: families)?.name, "capture_h")
        XCTAssertNil(Self.family(of: "capture_g_sum", in: families), "a gauge has no _sum")
        XCTAssertNil(Self.family(of: "capture_renamed", in: families))
    }
}
