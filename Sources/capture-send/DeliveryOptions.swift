import CaptureCore
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

    @Option(
        name: .long,
        help: SendRanges.spoolMax.help(
            "Unacknowledged audio kept at most, in bytes (K, M, G, T suffixes accepted); beyond it capture continues into an overflow CAF file beside the spool and the stream records a gap naming it.",
            valueName: "BYTES", default: "4G"),
        transform: SendRanges.spoolMax.checked)
    var spoolMax = "4G"

    @Option(
        name: .long,
        help: SendRanges.reconnectMin.help("First delay before reconnecting, in seconds; it doubles per failed attempt (with jitter).", valueName: "SECONDS", default: "0.5"),
        transform: SendRanges.reconnectMin.real)
    var reconnectMin = 0.5

    @Option(
        name: .long, help: SendRanges.reconnectMax.help("Longest delay between reconnection attempts, in seconds.", valueName: "SECONDS", default: "30"),
        transform: SendRanges.reconnectMax.real)
    var reconnectMax = 30.0

    @Option(
        name: .long,
        help: SendRanges.idleTimeout.help(
            "Seconds without any data from the receiver after which the connection is considered dead and re-established (heartbeats are sent at a quarter of it).",
            valueName: "SECONDS", default: "20"),
        transform: SendRanges.idleTimeout.real)
    var idleTimeout = 20.0

    func validate() throws {
        if noSpool, spool != nil { throw ValidationError("--spool and --no-spool exclude each other") }
        guard reconnectMax >= reconnectMin else {
            throw ValidationError("--reconnect-max \(NumericOption.number(reconnectMax)) is below --reconnect-min \(NumericOption.number(reconnectMin)): the longest delay cannot be shorter than the first")
        }
    }

    /// The spool root in use, nil with --no-spool.
    var spoolRoot: String? { noSpool ? nil : (spool ?? StreamSpool.defaultRoot) }

    /// --spool-max in bytes (parsing checked it: 1M to 16T, a whole number of bytes).
    var capacityBytes: Int { SendRanges.spoolMax.value(spoolMax).flatMap { Int(exactly: $0) } ?? (4 << 30) }

    /// --reconnect-min and --reconnect-max.
    var reconnectPolicy: ReconnectPolicy {
        ReconnectPolicy(
            initial: .nanoseconds(Saturating.nanoseconds(seconds: reconnectMin)), maximum: .nanoseconds(Saturating.nanoseconds(seconds: reconnectMax)))
    }

    /// --idle-timeout as a time amount.
    var idleTimeoutAmount: Duration { .nanoseconds(Saturating.nanoseconds(seconds: idleTimeout)) }

    /// Heartbeats at a quarter of --idle-timeout, at most 4 a second.
    var heartbeatInterval: Duration { .nanoseconds(Saturating.nanoseconds(seconds: max(0.25, idleTimeout / 4))) }

    /// Applies the spool, reconnect and timeout settings to a streamer's configuration.
    func apply(to configuration: inout CaptureStreamer.Configuration) {
        configuration.spoolRoot = spoolRoot
        configuration.spoolCapacity = capacityBytes
        configuration.reconnect = reconnectPolicy
        configuration.idleTimeout = idleTimeoutAmount
        configuration.heartbeatInterval = heartbeatInterval
    }
}
