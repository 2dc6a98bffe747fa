import CAF
import Foundation

/// What a recording's `info` chunk says about where it lies in time (written by capture-recv, see
/// docs/RECORDINGS.md), in the forms exports need.
struct RecordingFacts: Equatable {
    /// UTC time of the first valid sample, ns since 1970 (nil when the file does not say).
    var firstSampleTime: Int64?
    /// The first valid sample's index in its stream.
    var firstValidSample: Int64?
    var title: String
    var streamID: String
    var sourceHost: String
    var clockSynchronized: String

    /// The facts of the `info` chunk of the recording at `path`. A first sample time outside what
    /// nanoseconds since 1970 hold in 64 bits (1677 to 2262) is damage, refused.
    init(info: [(key: String, value: String)], path: String) throws(ExportError) {
        func value(_ key: String) -> String? { info.first(where: { $0.key == key })?.value }
        let text = value("first sample time") ?? value("recorded date")
        if let text, let date = (try? Self.withMilliseconds.parse(text)) ?? (try? Self.wholeSeconds.parse(text)) {
            // Microseconds survive the Date round trip; the text carries milliseconds.
            guard let microseconds = Int64(exactly: (date.timeIntervalSince1970 * 1e6).rounded()),
                case (let nanoseconds, false) = microseconds.multipliedReportingOverflow(by: 1_000)
            else {
                throw .unreadable("cannot export \(path): its first sample time \(ExportError.oneLine(text, limit: 64)) lies outside 1677 to 2262, the years an export's times can carry; the file's info chunk is damaged")
            }
            firstSampleTime = nanoseconds
        }
        firstValidSample = value("first valid sample").flatMap { Int64($0) }
        title = value("title") ?? ""
        streamID = value("stream id") ?? ""
        sourceHost = value("source host") ?? ""
        clockSynchronized = value("clock synchronized") ?? "unknown"
    }

    /// Samples at `rate` since the UTC midnight before the first valid sample (bext TimeReference).
    func timeReference(rate: Int) -> UInt64? {
        guard let firstSampleTime else { return nil }
        let day: Int64 = 86_400_000_000_000
        let sinceMidnight = ((firstSampleTime % day) + day) % day
        return UInt64((Int128(sinceMidnight) * Int128(rate) + 500_000_000) / 1_000_000_000)
    }

    /// `yyyy-mm-dd` and `hh:mm:ss` of the first valid sample, UTC.
    var originationDateAndTime: (date: String, time: String)? {
        guard let firstSampleTime else { return nil }
        var seconds = time_t(firstSampleTime / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return (
            String(format: "%04d-%02d-%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday),
            String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
        )
    }

    /// ISO 8601 UTC with milliseconds.
    var isoTime: String? {
        guard let firstSampleTime else { return nil }
        return Self.withMilliseconds.format(Date(timeIntervalSince1970: Double(firstSampleTime) / 1e9))
    }

    /// The times of `info` (`2026-11-24T10:00:01.500Z`, or without the milliseconds).
    private static let withMilliseconds = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let wholeSeconds = Date.ISO8601FormatStyle()

    /// One line for a description field: what, from where, when, how far to trust the time.
    func summary(timeReference: UInt64?) -> String {
        var parts: [String] = []
        if !title.isEmpty { parts.append("stream \(title)") }
        if !streamID.isEmpty { parts.append("id \(streamID)") }
        if !sourceHost.isEmpty { parts.append("from \(sourceHost)") }
        if let isoTime { parts.append("first sample \(isoTime)") }
        if let firstValidSample { parts.append("sample index \(firstValidSample)") }
        if let timeReference { parts.append("time reference \(timeReference)") }
        parts.append("clock synchronized: \(clockSynchronized)")
        return parts.joined(separator: "; ")
    }
}
