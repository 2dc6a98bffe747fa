import CaptureCore

/// Turns a `SenderStatusSnapshot` into text, in one of two styles:
///
/// - terminal: one line that fits a given width, redrawn in place, with a bar per channel:
///   `L ▇▇▇▇▇▆---- -6.0/-9.0 dB CLIP  R … │ streaming+TLS │ cap 12.3s ack 12.1s │ spool 0.2s 37.5 KiB │ 1.54 Mb/s │ xruns 0`
///   (peak/RMS in dBFS; the bar shows the peak; `CLIP` when a sample reached full scale; `-∞` for silence);
/// - plain: a stable `key=value` line for logs:
///   `status link=streaming tls=yes captured_s=12.34 acked_s=12.10 backlog_bytes=38400 backlog_s=0.20 bitrate_bps=1536000 overruns=0 peak_dbfs=-6.0,-6.0 rms_dbfs=-9.0,-9.0 clipped=no,no`.
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

    /// The terminal line for `snapshot`, at most `width` characters. As the width requires, the
    /// bars shrink and go, then the spool's byte count, the bit rate, the acknowledged seconds, and
    /// finally the spool and overruns, leaving levels, link and captured seconds; past that the line
    /// is cut.
    public func terminalLine(_ snapshot: SenderStatusSnapshot, width: Int) -> String {
        guard width > 0 else { return "" }
        for layout in Self.layouts {
            let line = terminalLine(snapshot, layout: layout)
            if line.count <= width { return line }
        }
        return String(terminalLine(snapshot, layout: Self.layouts[Self.layouts.count - 1]).prefix(width))
    }

    /// What a terminal receives to redraw the status line in place: carriage return, the line, and
    /// clear to end of line.
    public func terminalRedraw(_ snapshot: SenderStatusSnapshot, width: Int) -> String {
        Self.carriageReturn + terminalLine(snapshot, width: width) + Self.clearToEndOfLine
    }

    /// How much a terminal line shows, from the richest to the most compact.
    struct Layout {
        var barCells: Int
        var decibelUnit: Bool
        var showsAcknowledged: Bool
        var showsSpool: Bool
        var showsSpoolBytes: Bool
        var showsBitRate: Bool
        var showsOverruns: Bool
    }

    static let layouts: [Layout] = [
        Layout(barCells: 10, decibelUnit: true, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: true, showsBitRate: true, showsOverruns: true),
        Layout(barCells: 6, decibelUnit: true, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: true, showsBitRate: true, showsOverruns: true),
        Layout(barCells: 6, decibelUnit: false, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: false, showsBitRate: true, showsOverruns: true),
        Layout(barCells: 3, decibelUnit: false, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: false, showsBitRate: true, showsOverruns: true),
        Layout(barCells: 0, decibelUnit: false, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: false, showsBitRate: true, showsOverruns: true),
        Layout(barCells: 0, decibelUnit: false, showsAcknowledged: true, showsSpool: true, showsSpoolBytes: false, showsBitRate: false, showsOverruns: true),
        Layout(barCells: 0, decibelUnit: false, showsAcknowledged: false, showsSpool: true, showsSpoolBytes: false, showsBitRate: false, showsOverruns: true),
        Layout(barCells: 0, decibelUnit: false, showsAcknowledged: false, showsSpool: false, showsSpoolBytes: false, showsBitRate: false, showsOverruns: false),
    ]

    func terminalLine(_ snapshot: SenderStatusSnapshot, layout: Layout) -> String {
        var fields: [String] = []
        if let levels = snapshot.levels, !levels.channels.isEmpty {
            let names = Self.channelNames(count: levels.channels.count)
            let meters = zip(names, levels.channels).map { name, level in
                channelMeter(name: name, level: level, layout: layout)
            }
            fields.append(meters.joined(separator: "  "))
        }
        fields.append(snapshot.linkDescription)
        var progress = "cap " + StatusFormatting.fixed(snapshot.secondsCaptured, decimals: 1) + "s"
        if layout.showsAcknowledged {
            progress += " ack " + StatusFormatting.fixed(snapshot.secondsAcknowledged, decimals: 1) + "s"
        }
        fields.append(progress)
        if layout.showsSpool {
            var spool = "spool " + StatusFormatting.fixed(snapshot.backlogSeconds, decimals: 1) + "s"
            if layout.showsSpoolBytes { spool += " " + StatusFormatting.bytes(snapshot.backlogBytes) }
            fields.append(spool)
        }
        if layout.showsBitRate { fields.append(StatusFormatting.bitRate(snapshot.bitsPerSecond)) }
        if layout.showsOverruns { fields.append("xruns \(snapshot.overruns)") }
        return fields.joined(separator: " │ ")
    }

    private func channelMeter(name: String, level: LevelMeter.ChannelLevel, layout: Layout) -> String {
        var text = name + " "
        if layout.barCells > 0 {
            text += LevelBar(cells: layout.barCells, floorDBFS: barFloorDBFS).render(dBFS: level.peakDBFS) + " "
        }
        let peak = StatusFormatting.decibels(level.peakDBFS, infinity: "-∞")
        let rms = StatusFormatting.decibels(level.rmsDBFS, infinity: "-∞")
        text += StatusFormatting.leftPadded(peak, to: 5) + "/" + StatusFormatting.leftPadded(rms, to: 5)
        if layout.decibelUnit { text += " dB" }
        // The clip marker keeps its place when absent, so the line does not jump.
        text += level.clipped ? " CLIP" : (layout.decibelUnit ? "     " : "")
        return text
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
    /// comma-separated per channel, `-inf` for silence, `none` when nothing was metered.
    public func plainLine(_ snapshot: SenderStatusSnapshot) -> String {
        var pairs: [(String, String)] = [
            ("link", snapshot.link.rawValue),
            ("tls", snapshot.usesTLS ? "yes" : "no"),
            ("captured_s", StatusFormatting.fixed(snapshot.secondsCaptured, decimals: 2)),
            ("acked_s", StatusFormatting.fixed(snapshot.secondsAcknowledged, decimals: 2)),
            ("backlog_bytes", "\(max(0, snapshot.backlogBytes))"),
            ("backlog_s", StatusFormatting.fixed(snapshot.backlogSeconds, decimals: 2)),
            ("bitrate_bps", StatusFormatting.fixed(max(0, snapshot.bitsPerSecond), decimals: 0)),
            ("overruns", "\(snapshot.overruns)"),
        ]
        if let levels = snapshot.levels, !levels.channels.isEmpty {
            let channels = levels.channels
            pairs.append(("peak_dbfs", channels.map { StatusFormatting.decibels($0.peakDBFS, infinity: "-inf") }.joined(separator: ",")))
            pairs.append(("rms_dbfs", channels.map { StatusFormatting.decibels($0.rmsDBFS, infinity: "-inf") }.joined(separator: ",")))
            pairs.append(("clipped", channels.map { $0.clipped ? "yes" : "no" }.joined(separator: ",")))
        } else {
            pairs.append(("peak_dbfs", "none"))
            pairs.append(("rms_dbfs", "none"))
            pairs.append(("clipped", "none"))
        }
        return "status " + pairs.map { "\($0.0)=\($0.1)" }.joined(separator: " ")
    }
}
