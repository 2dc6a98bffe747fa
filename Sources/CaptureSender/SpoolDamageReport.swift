import Foundation

/// What damage cost one stream, in the words `spool list`, `spool deliver` and a run that delivers
/// earlier streams all use: which seconds of the stream's timeline were lost, and where the damaged
/// bytes are kept.
public struct SpoolDamageReport: Sendable, Equatable {
    /// The damage found, in the order of the stream.
    public var damage: [SpoolDamage]
    /// The stream's sample rate (validated: 8000 to 192000 Hz).
    public var sampleRate: Double
    /// The folder the damaged bytes were copied to; nil before they were (or when there were none).
    public var keptIn: String?
    /// Why the stream cannot be delivered with this damage; nil when it can.
    public var undeliverable: String?

    public init(damage: [SpoolDamage], sampleRate: Double, keptIn: String?, undeliverable: String?) {
        self.damage = damage
        self.sampleRate = sampleRate
        self.keptIn = keptIn
        self.undeliverable = undeliverable
    }

    /// The report of what `contents()` found; nil when it found no damage.
    public init?(contents: SpoolContents, sampleRate: Double, keptIn: String?) {
        guard !contents.damage.isEmpty else { return nil }
        self.init(damage: contents.damage, sampleRate: sampleRate, keptIn: keptIn, undeliverable: contents.undeliverable)
    }

    /// Seconds on the stream's timeline to the millisecond ("1.500"). Frames are at most 2^62 and
    /// a stream's rate at least 8000 Hz, so the milliseconds fit an Int64 ("?" for any other rate).
    private func seconds(_ frames: Int64) -> String {
        let value = (Double(frames) / sampleRate * 1_000).rounded()
        guard value.isFinite, value >= 0, value < 9e15 else { return "?" }
        let milliseconds = Int64(value)
        let fraction = String(milliseconds % 1_000)
        return "\(milliseconds / 1_000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// The stretches lost, on the stream's timeline in seconds ("0.000-0.100", "from 3.400 to the
    /// end"); empty when the damage cost no audio.
    public var lostStretches: [String] {
        damage.compactMap { damage -> String? in
            switch damage.cost {
            case .nothing, .endRecord: return nil
            case .frames(let frames, _): return "\(seconds(frames.lowerBound))-\(seconds(frames.upperBound))"
            case .tail(let from, _): return from.map { "from \(seconds($0)) to the end" } ?? "an unknown stretch at the end"
            case .unplaceable(_, let until, _): return until.map { "an unknown stretch before \(seconds($0))" } ?? "an unknown stretch"
            }
        }
    }

    /// "seconds 0.000-0.100, 1.500-1.600", or nil when no audio was lost.
    public var lostSeconds: String? {
        let stretches = lostStretches
        return stretches.isEmpty ? nil : "seconds " + stretches.joined(separator: ", ")
    }

    /// What was damaged when no audio was lost.
    private var harmless: String {
        damage.contains { $0.cost == .endRecord } ? "only the record of its end" : "only bytes holding no audio the receiver still needed"
    }

    /// `spool list`'s STATE: "damaged: seconds 0.000-0.100 lost", "damaged: no audio lost" or
    /// "damaged: cannot be delivered (why)".
    public var state: String {
        if let undeliverable { return "damaged: cannot be delivered (\(undeliverable))" }
        guard let lostSeconds else { return "damaged: no audio lost" }
        return "damaged: \(lostSeconds) lost"
    }

    private var kept: String { keptIn.map { "the damaged bytes are kept in \($0)" } ?? "no damaged bytes were kept" }

    /// The line after the stream was delivered to `receiver`.
    public func delivered(streamName: String, receiver: String) -> String {
        guard let lostSeconds else {
            return "the spool of stream \(streamName) was damaged in \(harmless), so no audio was lost; it was delivered to \(receiver); \(kept)"
        }
        return "\(lostSeconds) of stream \(streamName) were lost to spool damage; the rest was delivered to \(receiver); \(kept)"
    }

    /// The line when the stream was not delivered (it stays in the spool).
    public func undelivered(streamName: String) -> String {
        let lost = lostSeconds.map { "\($0) of stream \(streamName) were lost to spool damage" } ?? "the spool of stream \(streamName) is damaged"
        let why = undeliverable.map { " and the rest cannot be delivered: \($0)" } ?? ""
        return "\(lost)\(why); it stays in the spool; \(kept)"
    }
}
