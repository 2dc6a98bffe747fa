import CaptureCore
import Foundation

/// Turns a `SenderStatusSnapshot` into text, in one of three styles:
///
/// - terminal: one line that fits a given width, redrawn in place, with a bar per channel:
///   `L ▇▇▇▇▇▆--|- -6.0/-9.0 dB CLIP  R … │ S -18.2 LUFS │ streaming+TLS │ cap 12.3s ack 12.1s │ spool 0.2s 37.5 KiB │ 1.54 Mb/s │ xruns 0`
///   (with backup receivers, `│ backup reconnecting 12.3s` after the main link: its state and the
///   seconds it has not acknowledged; with a local copy, `│ rec 12.3s`, or `│ REC STOPPED 12.3s`;
///   with several encodings, `│ opus-64k-20ms ack 12.1s +0.2s │ pcm-s16-48000 ack 3.0s +9.3s` after
///   the spool: each encoding's acknowledged seconds and backlog, the backlog alone on narrow lines);
///   (peak/RMS in dBFS of the most recent audio; the bar shows the peak and `|` the held peak;
///   `CLIP` when a sample reached full scale; `-∞` for silence; `S` the EBU R128 short-term
///   loudness of the last 3 s; `no ack for N s` in place of `streaming` while acknowledgements are
///   overdue);
/// - plain: a stable `key=value` line for logs:
///   `status link=streaming tls=yes captured_s=12.34 acked_s=12.10 backlog_bytes=38400 backlog_s=0.20 bitrate_bps=1536000 overruns=0 peak_dbfs=-6.0,-6.0 rms_dbfs=-9.0,-9.0 clipped=no,no no_ack_s=0 short_term_lufs=-18.2`,
///   then, with backup receivers only, `backups=HOST:PORT/LINK/SECONDS_BEHIND,...`, and with a
///   local copy only (`--record`), `record_s=SECONDS record_stopped=no`, and with several encodings
///   only, `encodings=LABEL/ACKED_S/BACKLOG_S,...`;
/// - JSON: the plain line's keys and values as one JSON object, with the log lines' `time`,
///   `level`, `logger` and `message` (`"status"`), for `--log-format json`.
public struct StatusLineRenderer: Sendable {
    /// Moves the cursor to the start of the line (before a redraw).
    public static let carriageReturn = "\r"
    /// Clears from the cursor to the end of the line (ANSI EL0), after a redraw that may be shorter.
    public static let clearToEndOfLine = "\u{1B}[K"

    /// The lowest level the bars show; quieter reads as an empty bar.
    public var barFloorDBFS: Double

    public init(barFloorDBFS: Double = -60) {
        self.barFloorDBFS = barFloorDBFS
    }

    // MARK: Terminal style

    /// The terminal line for `snapshot`, at most `width` characters.
    ///
    /// What matters most stays longest: the link (or `no ack for N s`), the acknowledged seconds,
    /// the backlog in seconds and the overruns. As the width requires, first the spool's byte
    /// count, the bit rate, the loudness and the captured seconds go, while the meters shrink from
    /// bars with peak/RMS to peak/RMS only, to peaks only, to one cell per channel with the loudest peak;
    /// then the meters go, then the overruns, then the `+TLS` mark, then the seconds' decimals;
    /// past that the line is cut. Room
    /// left over once the meters have shrunk is given back to the loudness, the captured seconds,
    /// the bit rate and the spool's byte count, in that order.
    public func terminalLine(_ snapshot: SenderStatusSnapshot, width: Int) -> String {
        guard width > 0 else { return "" }
        for layout in Self.layouts {
            let line = terminalLine(snapshot, layout: layout)
            if line.count <= width { return refilled(snapshot, layout: layout, width: width) }
        }
        return String(terminalLine(snapshot, layout: Self.layouts[Self.layouts.count - 1]).prefix(width))
    }

    /// What a terminal receives to redraw the status line in place: carriage return, the line, and
    /// clear to end of line.
    public func terminalRedraw(_ snapshot: SenderStatusSnapshot, width: Int) -> String {
        Self.carriageReturn + terminalLine(snapshot, width: width) + Self.clearToEndOfLine
    }

    /// How the level meters are drawn.
    enum MeterStyle: Equatable {
        /// Per channel: name, a bar of `barCells`, the peak (and RMS), the unit and a clip slot.
        case perChannel(barCells: Int, showsRMS: Bool, showsUnit: Bool)
        /// One bar cell per channel, then the loudest channel's peak.
        case compact
        /// No meters.
        case none
    }

    /// How much a terminal line shows, from the richest to the most compact.
    struct Layout {
        var meters: MeterStyle
        var showsCaptured = true
        var showsSpoolBytes = true
        var showsBitRate = true
        var showsOverruns = true
        /// The short-term loudness, `S -18.2 LUFS`, when measured.
        var showsLoudness = true
        var showsTLS = true
        /// Seconds without decimals (`ack 3600s`), for the narrowest lines.
        var wholeSeconds = false

        /// Only what matters most: link, acknowledged seconds, backlog seconds, overruns.
        static func essential(_ meters: MeterStyle) -> Layout {
            Layout(meters: meters, showsCaptured: false, showsSpoolBytes: false, showsBitRate: false, showsLoudness: false)
        }
    }

    static let layouts: [Layout] = [
        Layout(meters: .perChannel(barCells: 10, showsRMS: true, showsUnit: true)),
        Layout(meters: .perChannel(barCells: 6, showsRMS: true, showsUnit: true)),
        Layout(meters: .perChannel(barCells: 6, showsRMS: true, showsUnit: true), showsSpoolBytes: false),
        Layout(meters: .perChannel(barCells: 6, showsRMS: true, showsUnit: false), showsSpoolBytes: false, showsBitRate: false, showsLoudness: false),
        .essential(.perChannel(barCells: 6, showsRMS: true, showsUnit: false)),
        .essential(.perChannel(barCells: 3, showsRMS: true, showsUnit: false)),
        .essential(.perChannel(barCells: 0, showsRMS: true, showsUnit: false)),
        .essential(.perChannel(barCells: 4, showsRMS: false, showsUnit: false)),
        .essential(.perChannel(barCells: 0, showsRMS: false, showsUnit: false)),
        .essential(.compact),
        .essential(.none),
        Layout(meters: .none, showsCaptured: false, showsSpoolBytes: false, showsBitRate: false, showsOverruns: false, showsLoudness: false),
        Layout(meters: .none, showsCaptured: false, showsSpoolBytes: false, showsBitRate: false, showsOverruns: false, showsLoudness: false, showsTLS: false),
        Layout(meters: .none, showsCaptured: false, showsSpoolBytes: false, showsBitRate: false, showsOverruns: false, showsLoudness: false, showsTLS: false, wholeSeconds: true),
    ]

    /// `layout` with the fields it dropped given back, one by one, as long as the line still fits.
    private func refilled(_ snapshot: SenderStatusSnapshot, layout: Layout, width: Int) -> String {
        var best = layout
        let additions: [WritableKeyPath<Layout, Bool>] = [\.showsLoudness, \.showsCaptured, \.showsBitRate, \.showsSpoolBytes]
        for field in additions where !best[keyPath: field] {
            var candidate = best
            candidate[keyPath: field] = true
            if terminalLine(snapshot, layout: candidate).count <= width { best = candidate }
        }
        return terminalLine(snapshot, layout: best)
    }

    func terminalLine(_ snapshot: SenderStatusSnapshot, layout: Layout) -> String {
        var fields: [String] = []
        if let levels = snapshot.levels, !levels.channels.isEmpty, let meters = meters(levels, held: snapshot.heldPeaksDBFS, style: layout.meters) {
            fields.append(meters)
        }
        if layout.showsLoudness, let shortTerm = snapshot.shortTermLUFS {
            fields.append("S " + StatusFormatting.decibels(shortTerm, infinity: "-∞") + " LUFS")
        }
        fields.append(snapshot.linkDescription(showingTLS: layout.showsTLS))
        let decimals = layout.wholeSeconds ? 0 : 1
        fields += snapshot.backupDescriptions(decimals: decimals)
        if let copy = snapshot.localCopyDescription(decimals: decimals) { fields.append(copy) }
        var progress = "ack " + StatusFormatting.fixed(snapshot.secondsAcknowledged, decimals: decimals) + "s"
        if layout.showsCaptured {
            progress = "cap " + StatusFormatting.fixed(snapshot.secondsCaptured, decimals: decimals) + "s " + progress
        }
        fields.append(progress)
        var spool = "spool " + StatusFormatting.fixed(snapshot.backlogSeconds, decimals: decimals) + "s"
        if layout.showsSpoolBytes { spool += " " + StatusFormatting.bytes(snapshot.backlogBytes) }
        fields.append(spool)
        if snapshot.encodings.count > 1 {
            // One field per encoding: its acknowledged seconds (rich layouts) and its backlog.
            for encoding in snapshot.encodings {
                let backlog = "+" + StatusFormatting.fixed(encoding.backlogSeconds, decimals: decimals) + "s"
                fields.append(layout.showsCaptured
                    ? "\(encoding.label) ack " + StatusFormatting.fixed(encoding.secondsAcknowledged, decimals: decimals) + "s " + backlog
                    : "\(encoding.label) " + backlog)
            }
        }
        if layout.showsBitRate { fields.append(StatusFormatting.bitRate(snapshot.bitsPerSecond)) }
        if layout.showsOverruns { fields.append("xruns \(snapshot.overruns)") }
        return fields.joined(separator: " │ ")
    }

    private func meters(_ levels: LevelMeter.Reading, held: [Double], style: MeterStyle) -> String? {
        let channels = levels.channels
        switch style {
        case .none:
            return nil
        case .compact:
            let cells = channels.map { LevelBar(cells: 1, floorDBFS: barFloorDBFS).render(dBFS: $0.peakDBFS) }.joined()
            let loudest = channels.map(\.peakDBFS).max() ?? -.infinity
            let clip = channels.contains { $0.clipped } ? " CLIP" : ""
            return cells + " " + StatusFormatting.decibels(loudest, infinity: "-∞") + clip
        case .perChannel(let barCells, let showsRMS, let showsUnit):
            let names = Self.channelNames(count: channels.count)
            return channels.indices.map { index in
                var text = names[index] + " "
                let level = channels[index]
                if barCells > 0 {
                    let heldPeak = index < held.count ? held[index] : nil
                    text += LevelBar(cells: barCells, floorDBFS: barFloorDBFS).render(dBFS: level.peakDBFS, heldDBFS: heldPeak) + " "
                }
                text += StatusFormatting.leftPadded(StatusFormatting.decibels(level.peakDBFS, infinity: "-∞"), to: 5)
                if showsRMS {
                    text += "/" + StatusFormatting.leftPadded(StatusFormatting.decibels(level.rmsDBFS, infinity: "-∞"), to: 5)
                }
                if showsUnit { text += " dB" }
                // With the unit, the clip marker keeps its place when absent, so the line does not jump.
                text += level.clipped ? " CLIP" : (showsUnit ? "     " : "")
                return text
            }.joined(separator: "  ")
        }
    }

    /// Channel names: `M` for mono, `L`/`R` for stereo, `1`…`n` otherwise.
    static func channelNames(count: Int) -> [String] {
        switch count {
        case 1: return ["M"]
        case 2: return ["L", "R"]
        default: return (1...max(1, count)).map(String.init)
        }
    }

    // MARK: Plain style

    /// The plain `key=value` line for `snapshot`. Keys and their order never change; levels are
    /// comma-separated per channel, `-inf` for silence, `none` when nothing was metered;
    /// `no_ack_s` is the whole seconds without an acknowledgement once that is overdue, else 0;
    /// `short_term_lufs` the EBU R128 short-term loudness (`-inf` for silence, `none` when not
    /// measured).
    public func plainLine(_ snapshot: SenderStatusSnapshot) -> String {
        "status " + plainPairs(snapshot).map { "\($0.key)=\($0.value.plain)" }.joined(separator: " ")
    }

    // MARK: JSON style

    /// The status as one JSON object on one line: `time` (ISO 8601, UTC), `level` (`info`), `logger`
    /// and `message` (`status`) as in the JSON log lines, then the plain line's keys in its order,
    /// with numbers as numbers, yes/no as booleans, per-channel values as arrays (`null` for
    /// silence's −∞) and `null` for levels when nothing was metered.
    public func jsonLine(_ snapshot: SenderStatusSnapshot, time: Date, logger: String) -> String {
        var members = [
            ("time", JSONText.string(Self.timestamp(time))), ("level", JSONText.string("info")),
            ("logger", JSONText.string(logger)), ("message", JSONText.string("status")),
        ]
        members += plainPairs(snapshot).map { ($0.key, $0.value.json) }
        return "{" + members.map { JSONText.string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    /// A value of the plain and JSON styles.
    private struct Value {
        var plain: String
        var json: String

        static func text(_ value: String) -> Value { Value(plain: value, json: JSONText.string(value)) }
        static func flag(_ value: Bool) -> Value { Value(plain: value ? "yes" : "no", json: value ? "true" : "false") }
        static func number(_ value: Double, decimals: Int) -> Value {
            let text = StatusFormatting.fixed(value, decimals: decimals)
            return Value(plain: text, json: text)
        }
        static func integer(_ value: Int) -> Value { Value(plain: "\(value)", json: "\(value)") }
        static func decibels(_ values: [Double]) -> Value {
            Value(
                plain: values.map { StatusFormatting.decibels($0, infinity: "-inf") }.joined(separator: ","),
                json: "[" + values.map { $0.isFinite ? StatusFormatting.decibels($0, infinity: "null") : "null" }.joined(separator: ",") + "]"
            )
        }
        static func decibel(_ value: Double) -> Value {
            Value(
                plain: StatusFormatting.decibels(value, infinity: "-inf"),
                json: value.isFinite ? StatusFormatting.decibels(value, infinity: "null") : "null"
            )
        }
        static func flags(_ values: [Bool]) -> Value {
            Value(
                plain: values.map { $0 ? "yes" : "no" }.joined(separator: ","),
                json: "[" + values.map { $0 ? "true" : "false" }.joined(separator: ",") + "]"
            )
        }
        static let none = Value(plain: "none", json: "null")
    }

    private func plainPairs(_ snapshot: SenderStatusSnapshot) -> [(key: String, value: Value)] {
        var pairs: [(key: String, value: Value)] = [
            ("link", .text(snapshot.link.rawValue)),
            ("tls", .flag(snapshot.usesTLS)),
            ("captured_s", .number(snapshot.secondsCaptured, decimals: 2)),
            ("acked_s", .number(snapshot.secondsAcknowledged, decimals: 2)),
            ("backlog_bytes", .integer(max(0, snapshot.backlogBytes))),
            ("backlog_s", .number(snapshot.backlogSeconds, decimals: 2)),
            ("bitrate_bps", .number(max(0, snapshot.bitsPerSecond), decimals: 0)),
            ("overruns", .integer(snapshot.overruns)),
        ]
        if let levels = snapshot.levels, !levels.channels.isEmpty {
            let channels = levels.channels
            pairs.append(("peak_dbfs", .decibels(channels.map(\.peakDBFS))))
            pairs.append(("rms_dbfs", .decibels(channels.map(\.rmsDBFS))))
            pairs.append(("clipped", .flags(channels.map(\.clipped))))
        } else {
            pairs.append(("peak_dbfs", .none))
            pairs.append(("rms_dbfs", .none))
            pairs.append(("clipped", .none))
        }
        pairs.append(("no_ack_s", .integer(snapshot.secondsWithoutAcknowledgement.map(SenderStatusSnapshot.wholeSeconds) ?? 0)))
        pairs.append(("short_term_lufs", snapshot.shortTermLUFS.map { .decibel($0) } ?? .none))
        if !snapshot.backups.isEmpty {
            // Only with --also: RECEIVER/LINK/SECONDS_BEHIND per backup, comma-separated.
            let backups = snapshot.backups
            pairs.append(("backups", Value(
                plain: backups.map { "\($0.receiver)/\($0.link.rawValue)/\(StatusFormatting.fixed($0.secondsBehind, decimals: 2))" }.joined(separator: ","),
                json: "[" + backups.map {
                    "{\"receiver\":\(JSONText.string($0.receiver)),\"link\":\(JSONText.string($0.link.rawValue)),\"behind_s\":\(StatusFormatting.fixed($0.secondsBehind, decimals: 2))}"
                }.joined(separator: ",") + "]")))
        }
        if snapshot.encodings.count > 1 {
            // Only with several encodings: LABEL/ACKED_SECONDS/BACKLOG_SECONDS per encoding.
            let encodings = snapshot.encodings
            pairs.append(("encodings", Value(
                plain: encodings.map {
                    "\($0.label)/\(StatusFormatting.fixed($0.secondsAcknowledged, decimals: 2))/\(StatusFormatting.fixed($0.backlogSeconds, decimals: 2))"
                }.joined(separator: ","),
                json: "[" + encodings.map {
                    "{\"encoding\":\(JSONText.string($0.label)),\"acked_s\":\(StatusFormatting.fixed($0.secondsAcknowledged, decimals: 2)),\"backlog_s\":\(StatusFormatting.fixed($0.backlogSeconds, decimals: 2))}"
                }.joined(separator: ",") + "]")))
        }
        switch snapshot.localCopy {
        case .writing(let seconds)?:
            // Only with --record: seconds in the local copy, and whether it stopped.
            pairs.append(("record_s", .number(seconds, decimals: 2)))
            pairs.append(("record_stopped", .flag(false)))
        case .stopped(let seconds)?:
            pairs.append(("record_s", .number(seconds, decimals: 2)))
            pairs.append(("record_stopped", .flag(true)))
        case nil:
            break
        }
        return pairs
    }

    /// ISO 8601 in UTC with milliseconds, as the log lines have it.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// JSON text of strings, escaped as RFC 8259 requires.
enum JSONText {
    static func string(_ value: String) -> String {
        var text = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case let control where control.value < 0x20:
                text += String(format: "\\u%04x", control.value)
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }
}
