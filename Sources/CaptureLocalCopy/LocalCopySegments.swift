import Foundation

/// Where a segmented local copy is cut and what each file is called: a pure calculation on the
/// capture's timeline (frames since its first sample, at `sampleRate`, the first at `startTime`).
///
/// Boundaries fall at UTC times that are whole multiples of `length` counted from each UTC
/// midnight (a midnight is always one), as the receiver's `--segment` puts them.
public struct LocalCopySegments: Sendable, Equatable {
    /// The segment lengths a local copy takes (in whole seconds): 1 s to 24 h.
    public static let allowedLengths: ClosedRange<Duration> = .seconds(1) ... .seconds(86_400)

    /// The UTC time of the capture's first sample.
    public var startTime: Date
    /// The capture's frames per second.
    public var sampleRate: Double
    /// How long each file is: whole seconds within `allowedLengths`.
    public var length: Duration

    public init(startTime: Date, sampleRate: Double, length: Duration) {
        self.startTime = startTime
        self.sampleRate = sampleRate
        self.length = length
    }

    /// The UTC time of `position`.
    public func time(of position: Int64) -> Date {
        startTime.addingTimeInterval(Double(position) / sampleRate)
    }

    /// The first boundary strictly after `position`: the position of the first frame of the next file.
    public func boundary(after position: Int64) -> Int64 {
        let now = time(of: position).timeIntervalSince1970
        let midnight = (now / 86_400).rounded(.down) * 86_400
        let intoDay = now - midnight
        let step = Double(length.components.seconds)
        var next = midnight + ((intoDay / step).rounded(.down) + 1) * step
        next = min(next, midnight + 86_400)
        // The frame at or after that time.
        var boundary = Int64(((next - startTime.timeIntervalSince1970) * sampleRate).rounded(.up))
        if boundary <= position { boundary = position + 1 }
        return boundary
    }

    /// The file of the segment whose first frame is `position`: `base`'s name with the UTC time of that
    /// frame (`take.caf` → `take_20261128T041500Z.caf`).
    public func path(base: String, firstFrame position: Int64) -> String {
        let url = URL(fileURLWithPath: base)
        let stem = url.deletingPathExtension().lastPathComponent
        let folder = url.deletingLastPathComponent().path
        let name = "\(stem)_\(Self.stamp(time(of: position).addingTimeInterval(0.000_5))).\(url.pathExtension)"
        return (folder as NSString).appendingPathComponent(name)
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC, seconds rounded down.
    static func stamp(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        return "\(parts.year ?? 0)\(two(parts.month))\(two(parts.day))T\(two(parts.hour))\(two(parts.minute))\(two(parts.second))Z"
    }
}
