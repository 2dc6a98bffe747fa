extension ReceiverMetrics {
    /// A live stream's latest levels, read at scrape time from what the receiver already keeps (its
    /// stream directory), so the receiver does no work for them per audio message. Rendered as
    /// `capture_stream_peak_dbfs{stream,channel}` (channels numbered from 1) and
    /// `capture_stream_short_term_lufs{stream}`.
    public struct StreamLevelReading: Sendable, Equatable {
        /// The stream's name, the `stream` label (as in `capture_stream_alarm`).
        public var stream: String
        /// Each channel's sample peak in dBFS, in channel order.
        public var peakDBFS: [Double]
        /// The EBU R128 short-term loudness in LUFS; nil when the sender does not measure it.
        public var shortTermLUFS: Double?

        public init(stream: String, peakDBFS: [Double], shortTermLUFS: Double? = nil) {
            self.stream = stream
            self.peakDBFS = peakDBFS
            self.shortTermLUFS = shortTermLUFS
        }

        /// The families' text (TYPE lines and series; `ExpositionText` adds the HELP lines and
        /// sorts). A stream name given twice keeps its first reading, so no series is repeated;
        /// values that are not finite are left out.
        static func exposition(_ readings: [StreamLevelReading]) -> String {
            var peaks: [String] = []
            var loudness: [String] = []
            var seen: Set<String> = []
            for reading in readings where seen.insert(reading.stream).inserted {
                let stream = ExpositionText.escapedLabelValue(reading.stream)
                for (index, peak) in reading.peakDBFS.enumerated() where peak.isFinite {
                    peaks.append("\(Name.streamPeakDBFS){stream=\"\(stream)\",channel=\"\(index + 1)\"} \(formatted(peak))")
                }
                if let lufs = reading.shortTermLUFS, lufs.isFinite {
                    loudness.append("\(Name.streamShortTermLUFS){stream=\"\(stream)\"} \(formatted(lufs))")
                }
            }
            var text = ""
            for (name, lines) in [(Name.streamPeakDBFS, peaks), (Name.streamShortTermLUFS, loudness)] where !lines.isEmpty {
                text += "# TYPE \(name) gauge\n" + lines.joined(separator: "\n") + "\n"
            }
            return text
        }

        /// A value as the registry writes gauges ("-6.02", "0.0"), full scale never as "-0.0".
        private static func formatted(_ value: Double) -> String { value == 0 ? "0.0" : "\(value)" }
    }
}
