import ArgumentParser
import CaptureCLISupport
import CaptureCodecs
import CaptureSender
import Foundation
import Logging
import NIOCore

/// capture-send's options for getting every packet delivered (see docs/DURABILITY.md).
struct DeliveryOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Folder for the disk spool: every packet stays there until the receiver acknowledges it, and a restarted capture-send delivers what earlier runs left for the same receiver (default: $XDG_STATE_HOME/capture-send/spool or ~/.local/state/capture-send/spool).",
        valueName: "DIR"))
    var spool: String?

    @Flag(name: .long, help: "Keep unacknowledged packets in memory only (they do not survive a crash of capture-send).")
    var noSpool = false

    @Option(name: .long, help: ArgumentHelp(
        "Unacknowledged audio kept at most, in bytes (K, M, G suffixes accepted); beyond it capture continues into an overflow CAF file beside the spool and the stream records a gap naming it.",
        valueName: "BYTES"))
    var spoolMax = "4G"

    @Option(name: .long, help: ArgumentHelp("First delay before reconnecting, in seconds; it doubles per failed attempt (with jitter).", valueName: "SECONDS"))
    var reconnectMin = 0.5

    @Option(name: .long, help: ArgumentHelp("Longest delay between reconnection attempts, in seconds.", valueName: "SECONDS"))
    var reconnectMax = 30.0

    @Option(name: .long, help: ArgumentHelp("Seconds without any data from the receiver after which the connection is considered dead and re-established (heartbeats are sent at a quarter of it).", valueName: "SECONDS"))
    var idleTimeout = 20.0

    func validate() throws {
        if noSpool, spool != nil { throw ValidationError("--spool and --no-spool exclude each other") }
        guard let bytes = Self.parseBytes(spoolMax), bytes >= 1 << 20 else {
            throw ValidationError("--spool-max \(spoolMax) is not a size of at least 1M (write it like 500M or 4G)")
        }
        guard reconnectMin > 0, reconnectMax >= reconnectMin else {
            throw ValidationError("--reconnect-min must be above 0 and --reconnect-max at least as large")
        }
        guard idleTimeout >= 1 else { throw ValidationError("--idle-timeout must be at least 1 second") }
    }

    /// The spool root in use, nil with --no-spool.
    var spoolRoot: String? { noSpool ? nil : (spool ?? StreamSpool.defaultRoot) }

    /// --spool-max in bytes.
    var capacityBytes: Int { Self.parseBytes(spoolMax) ?? (4 << 30) }

    /// "4G", "500M", "64K" or plain bytes.
    static func parseBytes(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let trimmed = text.trimmingCharacters(in: .whitespaces).uppercased()
        if let last = trimmed.last, let unit = units[last] {
            guard let value = Double(trimmed.dropLast()), value > 0 else { return nil }
            return Int(value * Double(unit))
        }
        return Int(trimmed)
    }

    /// Applies the spool, reconnect and timeout settings to a streamer's configuration.
    func apply(to configuration: inout CaptureStreamer.Configuration) {
        configuration.spoolRoot = spoolRoot
        configuration.spoolCapacity = capacityBytes
        configuration.reconnect = ReconnectPolicy(initial: reconnectMin, maximum: reconnectMax)
        configuration.idleTimeout = .milliseconds(Int64(idleTimeout * 1_000))
        configuration.heartbeatInterval = .milliseconds(Int64(max(0.25, idleTimeout / 4) * 1_000))
    }
}
