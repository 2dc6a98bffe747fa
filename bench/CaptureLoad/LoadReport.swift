import Foundation

/// The figures of one run, for people (a table) and for scripts (one JSON object).
struct LoadReport: Codable, Sendable {
    var streams: Int
    var completed: Int
    var failed: Int
    /// Failed streams by the code of what failed them.
    var failures: [String: Int]
    /// Error frames received from the receiver, by code, including retried ones.
    var receiverErrors: [String: Int]
    var audioMessagesSent: Int
    var audioMessagesResent: Int
    var reconnects: Int
    var injectedDisconnects: Int
    var ackLatencyP50Ms: Double?
    var ackLatencyP99Ms: Double?
    var ackLatencyMaxMs: Double?
    var ackLatencySamples: Int
    var wallSeconds: Double
    /// The generator's own CPU time (user + system), seconds.
    var generatorCPUSeconds: Double
    var verified: Int?
    var verificationProblems: Int?
    /// The first failure messages, one per failed stream (at most 20).
    var firstFailures: [String]

    init(results: [StreamResult], wallSeconds: Double, cpuSeconds: Double) {
        streams = results.count
        let failedResults = results.filter { $0.failure != nil }
        completed = results.count - failedResults.count
        failed = failedResults.count
        failures = failedResults.reduce(into: [:]) { $0[$1.failureCode ?? "UNKNOWN", default: 0] += 1 }
        receiverErrors = results.reduce(into: [:]) { counts, result in
            for (code, count) in result.receivedErrors { counts[code, default: 0] += count }
        }
        audioMessagesSent = results.reduce(0) { $0 + $1.messagesSent }
        audioMessagesResent = results.reduce(0) { $0 + $1.messagesResent }
        reconnects = results.reduce(0) { $0 + $1.reconnects }
        injectedDisconnects = results.reduce(0) { $0 + $1.injectedDisconnects }
        var latencies = results.flatMap(\.ackLatenciesMicroseconds)
        latencies.sort()
        ackLatencySamples = latencies.count
        func percentile(_ fraction: Double) -> Double? {
            guard !latencies.isEmpty else { return nil }
            let index = min(latencies.count - 1, Int((Double(latencies.count) * fraction).rounded(.up)) - 1)
            return (Double(latencies[max(0, index)]) / 1_000 * 10).rounded() / 10
        }
        ackLatencyP50Ms = percentile(0.50)
        ackLatencyP99Ms = percentile(0.99)
        ackLatencyMaxMs = latencies.last.map { (Double($0) / 1_000 * 10).rounded() / 10 }
        self.wallSeconds = (wallSeconds * 100).rounded() / 100
        generatorCPUSeconds = (cpuSeconds * 100).rounded() / 100
        firstFailures = failedResults.sorted { $0.index < $1.index }.prefix(20).map { "stream \($0.name): \($0.failure ?? "")" }
    }

    /// The human table.
    var table: String {
        func milliseconds(_ value: Double?) -> String { value.map { String(format: "%.1f ms", $0) } ?? "n/a" }
        func counts(_ values: [String: Int]) -> String {
            values.isEmpty ? "none" : values.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        var rows: [(String, String)] = [
            ("streams", "\(streams)"),
            ("completed", "\(completed)"),
            ("failed", failed == 0 ? "0" : "\(failed) (\(counts(failures)))"),
            ("errors from the receiver", counts(receiverErrors)),
            ("AudioData sent", "\(audioMessagesSent) (\(audioMessagesResent) resent)"),
            ("reconnects", "\(reconnects) (\(injectedDisconnects) links dropped on purpose)"),
            ("ack latency p50", milliseconds(ackLatencyP50Ms)),
            ("ack latency p99", milliseconds(ackLatencyP99Ms)),
            ("ack latency max", milliseconds(ackLatencyMaxMs)),
            ("wall time", String(format: "%.2f s", wallSeconds)),
            ("generator CPU", String(format: "%.2f s (%.2f cores)", generatorCPUSeconds, wallSeconds > 0 ? generatorCPUSeconds / wallSeconds : 0)),
        ]
        if let verified, let verificationProblems {
            rows.append(("files verified", "\(verified) of \(streams)\(verificationProblems > 0 ? ", \(verificationProblems) differ or are missing" : "")"))
        }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    }

    /// The report as one line of JSON, keys sorted.
    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// The process's own CPU time, user plus system, from getrusage.
enum ProcessCPUTime {
    static func seconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return user + system
    }
}

