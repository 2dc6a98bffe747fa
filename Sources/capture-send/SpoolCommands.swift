import CaptureCore
import ArgumentParser
import CaptureCLISupport
import CaptureSender
import Dispatch
import Foundation
import Logging

/// `capture-send spool`: the streams waiting in the spool, each bound to the receiver it was sent to.
struct SpoolCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture-send spool",
        abstract: "List, deliver or discard the streams earlier runs left in the spool.",
        discussion: """
            Every stream in the spool belongs to the receiver it was sent to (HOST:PORT as given and, with \
            TLS, the pin or CA and host name it was verified against); capture-send HOST:PORT delivers only \
            the earlier streams of that same destination. See docs/DURABILITY.md.
            """,
        version: ProgramVersion.line(for: "capture-send"),
        subcommands: [SpoolList.self, SpoolDeliver.self, SpoolDiscard.self]
    )
}

/// `--spool DIR` for the spool subcommands.
struct SpoolRootOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The spool folder (default: $XDG_STATE_HOME/capture-send/spool or ~/.local/state/capture-send/spool).", valueName: "DIR"))
    var spool: String?

    /// The spool root in use.
    var root: String { spool ?? StreamSpool.defaultRoot }

    /// The streams named by `ids` (a full stream id or a unique start of one), in the order given.
    func select(_ ids: [String]) throws(CLIError) -> [SpooledStreamSummary] {
        let streams = SpooledStreams.list(root: root)
        var selected: [SpooledStreamSummary] = []
        for id in ids {
            let wanted = id.lowercased()
            let matches = streams.filter { $0.streamID.uuidString.lowercased().hasPrefix(wanted) }
            guard !wanted.isEmpty, !matches.isEmpty else { throw CLIError("no stream \(id) in the spool \(root); capture-send spool list shows what is there") }
            guard matches.count == 1 else { throw CLIError("\(id) is the start of \(matches.count) stream ids; give more of it") }
            if !selected.contains(where: { $0.streamID == matches[0].streamID }) { selected.append(matches[0]) }
        }
        return selected
    }
}

/// `capture-send spool list`.
struct SpoolList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Show every stream in the spool: id, name, receiver, captured span, bytes not yet acknowledged, state and last delivery error.",
        discussion: "Columns are separated by at least two spaces; a missing value is shown as -. STATE is waiting, empty, in use by pid N, or damaged: and what the damage cost (the seconds lost, or the field of meta.json that is wrong)."
    )

    @OptionGroup var location: SpoolRootOption

    func run() throws {
        let streams = SpooledStreams.list(root: location.root)
        guard !streams.isEmpty else {
            print("no streams in the spool \(location.root)")
            return
        }
        print(SpoolTable.render(streams))
    }
}

/// `capture-send spool deliver [ID…]`.
struct SpoolDeliver: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliver",
        abstract: "Deliver streams from the spool, each to the receiver it belongs to.",
        discussion: """
            Without IDs, every stream whose receiver is recorded is delivered. A stream from a spool \
            written before receivers were recorded goes only where --to names, and only when named by \
            its ID. TLS and the token work as when sending: a pinned stream uses its recorded pin, a stream \
            verified by a CA needs that CA again with --tls --ca. A token (--token-file or CAPTURE_TOKEN) \
            is only presented when every selected stream goes to one receiver. Exits 0 when every selected \
            stream was delivered whole. A stream whose spool is damaged is delivered without what the damage \
            cost (in its place the recording gets a spool-damaged gap): one line says which seconds were lost \
            and where the damaged bytes are kept, and the exit status is 1. A stream whose meta.json is \
            damaged is not delivered and stays in the spool.
            """
    )

    @Argument(help: ArgumentHelp("Stream ids (or unique starts of them) as spool list shows them (default: every stream with a recorded receiver).", valueName: "ID"))
    var ids: [String] = []

    @Option(
        name: .long, help: ArgumentHelp("The receiver for streams named by ID whose spool does not record one (default: none; such streams are not delivered).", valueName: "HOST:PORT"),
        transform: HostAndPort.remoteAddress)
    var to: HostAndPort?

    @Option(
        name: .long,
        help: SendRanges.timeout.help("Give up after this many seconds; what is not delivered by then stays in the spool.", valueName: "SECONDS", default: "300"),
        transform: SendRanges.timeout.real)
    var timeout = 300.0

    @OptionGroup var location: SpoolRootOption

    @OptionGroup(title: "TLS and authentication (docs/SECURITY.md)")
    var security: SenderSecurityOptions

    @Option(name: .long, help: LogLevelOption.help(default: .notice), transform: LogLevelOption.parse)
    var logLevel: Logger.Level = .notice

    func validate() throws {
        if to != nil, ids.isEmpty { throw ValidationError("--to goes with stream IDs: name the streams to send there") }
    }

    func run() throws {
        let logger = LoggingSetup.bootstrap(label: "capture-send", format: .text, level: logLevel)
        let selected = try ids.isEmpty ? SpooledStreams.list(root: location.root) : location.select(ids)
        var targets: [(stream: SpooledStreamSummary, configuration: SenderConfiguration)] = []
        var problems: [String] = []
        let token = try security.authToken(logger: logger)
        for stream in selected {
            let id = stream.streamID.uuidString.lowercased()
            if let unreadable = stream.unreadable {
                problems.append(unreadable.description)
                print("not delivered \(id): \(unreadable.description)")
                continue
            }
            do throws(CLIError) {
                targets.append((stream, try configuration(for: stream, id: id, token: token)))
            } catch {
                if ids.isEmpty, stream.destination == nil { print("skipped \(id): its spool does not record a receiver; deliver it with capture-send spool deliver \(id) --to HOST:PORT"); continue }
                problems.append(error.description)
                print("not delivered \(id): \(error.description)")
            }
        }
        let receivers = Set(targets.map { "\($0.configuration.host):\($0.configuration.port)" })
        if !token.isEmpty, receivers.count > 1 {
            throw CLIError("these streams go to \(receivers.count) receivers (\(receivers.sorted().joined(separator: ", "))) and a token is set; a token is only sent to one receiver: deliver one receiver's streams at a time by naming their IDs")
        }
        let deliveries = SpooledStreamDeliveries()
        var started = 0
        for target in targets {
            let id = target.stream.streamID.uuidString.lowercased()
            let claim: SpooledStreams.Claim
            do throws(SpoolError) {
                claim = try SpooledStreams.claim(directory: target.stream.directory)
            } catch {
                problems.append(error.description)
                print("not delivered \(id): \(error.description)")
                continue
            }
            switch claim {
            case .gone:
                print("gone \(id): delivered or discarded meanwhile")
            case .inUse(let owner):
                if ids.isEmpty {
                    print("skipped \(id): in use by \(owner)")
                } else {
                    problems.append("\(id) is in use")
                    print("not delivered \(id): in use by \(owner)")
                }
            case .removedEmpty:
                print("removed \(id): it held no captured audio")
            case .undeliverable(let meta, let report):
                let line = report.undelivered(streamName: meta.streamName)
                problems.append(line)
                print("not delivered \(id): \(line)")
            case .ready(let spool, let log):
                deliveries.start(spool: spool, log: log, configuration: target.configuration, logger: logger)
                started += 1
            }
        }
        guard started > 0 else {
            if !problems.isEmpty { throw ExitCode.failure }
            if selected.isEmpty { print("no streams in the spool \(location.root)") }
            return
        }
        let interrupted = SignalDelivery(signals: [.sigint, .sigterm]) { _ in deliveries.abandon() }
        defer { interrupted.cancel() }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { deliveries.abandon() }
        // This command's main thread has nothing else to do while the deliveries run.
        _ = WaitForTask.run { await deliveries.finished() }
        for result in deliveries.results {
            let id = result.streamID.uuidString.lowercased()
            let target = targets.first { $0.stream.streamID == result.streamID }
            let receiver = target.map { "\($0.configuration.host):\($0.configuration.port)" } ?? "?"
            let name = target?.stream.streamName ?? ""
            if let error = result.error {
                problems.append(error)
                print("not delivered \(id) to \(receiver): \(error); it stays in the spool")
                if let damage = result.damage { print("damaged \(id): \(damage.undelivered(streamName: name))") }
            } else if let damage = result.damage {
                let line = damage.delivered(streamName: name, receiver: receiver)
                problems.append(line)
                print("damaged \(id): \(line)")
            } else {
                print("delivered \(id) to \(receiver)")
            }
        }
        if !problems.isEmpty { throw ExitCode.failure }
    }

    /// Where and how a stream is delivered: its own destination, or --to for a stream without one.
    private func configuration(for stream: SpooledStreamSummary, id: String, token: String) throws(CLIError) -> SenderConfiguration {
        let address: HostAndPort
        var tls: SenderTLSConfiguration?
        if let destination = stream.destination {
            guard let parsed = HostAndPort(parsing: destination.address) else {
                throw CLIError("stream \(id) names a receiver that is not HOST:PORT (\(destination.address))")
            }
            if let to, to.description != destination.address {
                throw CLIError("stream \(id) belongs to \(destination.address), not \(to); it is only delivered to its own receiver")
            }
            address = parsed
            if let identity = destination.tls {
                tls = try security.tlsConfiguration(for: identity, stream: id)
            } else if security.tls {
                throw CLIError("stream \(id) was sent to \(destination.address) without TLS; deliver it without --tls")
            }
        } else {
            guard let to else {
                throw CLIError("stream \(id) has no recorded receiver (its spool predates them); name one with --to HOST:PORT")
            }
            address = to
            tls = try security.tlsConfiguration()
        }
        var configuration = SenderConfiguration(
            host: address.host, port: address.port, streamName: stream.streamName, streamID: stream.streamID,
            application: "capture-send \(ProgramVersion.version)", authToken: token)
        configuration.tls = tls
        configuration.settingNames = CommandLineSettingNames()
        configuration.reconnect = ReconnectPolicy(initial: .milliseconds(500), maximum: .seconds(5))
        return configuration
    }
}

/// `capture-send spool discard ID…`.
struct SpoolDiscard: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discard",
        abstract: "Delete streams from the spool for good, after asking (or with --yes).",
        discussion: "Without --yes, each stream is confirmed on the terminal; when standard input is not a terminal, nothing is discarded without --yes."
    )

    @Argument(help: ArgumentHelp("Stream ids (or unique starts of them) as spool list shows them.", valueName: "ID"))
    var ids: [String]

    @Flag(name: .long, help: "Discard without asking.")
    var yes = false

    @OptionGroup var location: SpoolRootOption

    func validate() throws {
        if ids.isEmpty { throw ValidationError("name the streams to discard by their IDs (capture-send spool list shows them)") }
    }

    func run() throws {
        if !yes, isatty(STDIN_FILENO) == 0 {
            throw CLIError("not discarding anything: standard input is not a terminal to confirm on; add --yes to discard without asking")
        }
        let selected = try location.select(ids)
        var failed = false
        for stream in selected {
            let id = stream.streamID.uuidString.lowercased()
            let claim: StreamSpool.Claim
            do throws(SpoolError) {
                claim = try StreamSpool.claim(directory: stream.directory, toDiscard: true)
            } catch {
                print("not discarded \(id): \(error.description)")
                failed = true
                continue
            }
            switch claim {
            case .gone:
                print("gone \(id): delivered or discarded meanwhile")
            case .inUse(let owner):
                print("not discarded \(id): in use by \(owner)")
                failed = true
            case .claimed(let spool):
                if !yes {
                    let prompt = stream.unreadable == nil
                        ? "discard \(stream.unacknowledgedBytes) bytes of stream \(id) (\(stream.streamName), for \(stream.destination?.description ?? "an unknown receiver"))? [y/N] "
                        : "discard stream \(id), whose spool is \(stream.damage ?? "damaged")? [y/N] "
                    StandardStreams.writeOutput(prompt)
                    let answer = (readLine() ?? "").trimmingCharacters(in: .whitespaces).lowercased()
                    guard answer == "y" || answer == "yes" else {
                        spool.release()
                        print("kept \(id)")
                        continue
                    }
                }
                spool.removeAll()
                print("discarded \(id) (\(stream.unacknowledgedBytes) bytes)")
            }
        }
        if failed { throw ExitCode.failure }
    }
}

/// The table `spool list` prints: a header, then one row per stream; columns padded and separated
/// by at least two spaces, "-" for a missing value; no value holds two spaces in a row.
enum SpoolTable {
    static let header = ["STREAM", "NAME", "DESTINATION", "CAPTURED", "BYTES", "STATE", "LAST ERROR"]

    static func render(_ streams: [SpooledStreamSummary]) -> String {
        let formatter = ISO8601DateFormatter()
        let rows = streams.map { stream in
            [
                stream.streamID.uuidString.lowercased(),
                stream.streamName,
                stream.unreadable != nil ? "-" : stream.destination?.description ?? "unknown",
                stream.unreadable != nil ? "-" : "\(formatter.string(from: stream.startTime))+\(String(format: "%.3f", stream.capturedSeconds))s",
                "\(stream.unacknowledgedBytes)",
                stream.owner.map { "in use by \($0)" } ?? stream.damage ?? (stream.holdsCapturedAudio ? "waiting" : "empty"),
                stream.lastError ?? "-",
            ].map(clean)
        }
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.indices.map { column in
                column == row.count - 1 ? row[column] : row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// One line, no runs of spaces (they separate columns), "-" for nothing.
    private static func clean(_ value: String) -> String {
        var text = value.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\t", with: " ")
        while text.contains("  ") { text = text.replacingOccurrences(of: "  ", with: " ") }
        text = text.trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? "-" : text
    }
}
