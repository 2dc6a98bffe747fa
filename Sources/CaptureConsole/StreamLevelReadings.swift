import CaptureMetrics
import CaptureReceiver
import Foundation

extension ReceiverMetrics.StreamLevelReading {
    /// The latest levels of the live streams among `rows` (a `StreamDirectory` snapshot), for a
    /// scrape: reconnecting and finished streams, and streams whose sender sends no levels, have
    /// none. Where live streams share a name, the one whose audio arrived last stands for it.
    public static func live(in rows: [StreamSnapshot]) -> [Self] {
        rows.filter { $0.state == .live && $0.levels != nil }
            .sorted { ($0.lastAudioReceived ?? .distantPast) > ($1.lastAudioReceived ?? .distantPast) }
            .compactMap { row in
                row.levels.map { Self(stream: row.name, peakDBFS: $0.peakDBFS, shortTermLUFS: $0.shortTermLUFS) }
            }
    }
}
