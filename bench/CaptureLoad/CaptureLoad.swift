import CaptureCore
import ArgumentParser
import CaptureSecurity
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// capture-load: many simulated capture-send streams in one process against one capture-recv,
/// and the check of the files they leave (README "Load testing").
@main
struct CaptureLoad: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture-load",
        abstract: "Plays many simulated senders against one capture-recv and checks the files they leave.",
        discussion: """
            Every stream speaks the real protocol (proto/PROTOCOL.md) with paced, deterministic audio, so \
            `capture-load verify` (or `run --verify DIR`) can later check each file packet by packet. \
            Give `verify` the same stream flags as the run. `capture-load run --help` lists the run's flags.             Set CAPTURE_LOAD_TRACE=1 to log every stream's connections and messages to standard error.
            """,
        version: "capture-load \(BuildStamp.version) (commit \(BuildStamp.commit))",
        subcommands: [Run.self, Verify.self],
        defaultSubcommand: Run.self
    )
}

/// The flags that decide what every stream sends; `run` and `verify` must be given the same ones.
struct StreamShapeOptions: ParsableArguments {
    @Option(name: .long, help: "Number of simulated streams.")
    var streams = 10

    @Option(name: .long, help: ArgumentHelp("Seconds of audio per stream.", valueName: "SECONDS"))
    var duration = 10.0

    @Option(name: .long, help: "Stream shape: opus (Opus-shaped VBR, 48 kHz stereo, 20 ms packets; bytes are not real Opus) or pcm (48 kHz signed 16-bit stereo).")
    var codec: LoadCodec = .opus

    @Option(name: .long, help: ArgumentHelp("Average bit rate of Opus-shaped streams, bits per second.", valueName: "BPS"))
    var bitrate = 130_000

    @Option(name: .long, help: ArgumentHelp("Seconds of audio per AudioData message.", valueName: "SECONDS"))
    var frameSeconds = 0.5

    @Option(name: .long, help: "Stream names are PREFIX-000000, PREFIX-000001, ....")
    var namePrefix = "load"

    @Option(name: .long, help: "Seed of the deterministic payloads and stream ids.")
    var seed: UInt64 = 1

    @Flag(name: .long, help: "Send levels and loudness with every AudioData, as capture-send does for a steady tone at -12 dBFS (the receiver's alarms then run on them) (default: none, as an older sender).")
    var levels = false

    func validate() throws {
        guard streams >= 1 else { throw ValidationError("--streams must be at least 1") }
        guard duration > 0, duration.isFinite, duration <= 86_400 else { throw ValidationError("--duration must be between 0 and 86400 seconds") }
        guard frameSeconds >= 0.02, frameSeconds <= 5 else { throw ValidationError("--frame-seconds must be between 0.02 and 5") }
        guard bitrate >= 6_000, bitrate <= 510_000 else { throw ValidationError("--bitrate must be between 6000 and 510000 (Opus's range)") }
        guard !namePrefix.isEmpty, namePrefix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw ValidationError("--name-prefix may hold only ASCII letters, digits and '-'")
        }
    }

    var shape: StreamShape {
        StreamShape(
            codec: codec, durationSeconds: duration, frameSeconds: frameSeconds, bitrate: bitrate, namePrefix: namePrefix, seed: seed, sendsLevels: levels)
    }

    var plans: [StreamPlan] { (0..<streams).map { StreamPlan(index: $0, shape: shape) } }
}

extension LoadCodec: ExpressibleByArgument {}

/// Plays the streams.
struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Plays the streams against a receiver (the default subcommand).")

    @Argument(help: ArgumentHelp("The receiver's address: HOST:PORT, or [IPV6]:PORT.", valueName: "HOST:PORT"))
    var address: String

    @OptionGroup var shape: StreamShapeOptions

    @Option(name: .long, help: ArgumentHelp("Stream starts are spread evenly over this many seconds.", valueName: "SECONDS"))
    var rampSeconds = 5.0

    @Option(name: .long, help: ArgumentHelp("Probability that a link drops right after an AudioData message; the stream reconnects and resumes.", valueName: "P"))
    var disconnectProbability = 0.0

    @Option(name: .long, help: ArgumentHelp("Seconds before reconnecting after a link drop, doubling with each failed connection in a row up to 15 s, plus up to 0.2 s of jitter.", valueName: "SECONDS"))
    var reconnectDelay = 0.5

    @Option(name: .long, help: "A stream fails after this many failed connections in a row.")
    var maxFailures = 20

    @Option(name: .long, help: ArgumentHelp("Seconds after which unfinished streams count as failed (default: duration + ramp + 60).", valueName: "SECONDS"))
    var timeout: Double?

    @Option(name: .long, help: "Event-loop threads.")
    var threads = 1

    @Flag(name: .long, help: "Connect with TLS; the receiver's certificate is checked against --ca or --pin (default: plaintext).")
    var tls = false

    @Option(name: .long, help: ArgumentHelp("With --tls: PEM file of the CA that signed the receiver's certificate (default: the system trust store).", valueName: "PEM"))
    var ca: String?

    @Option(name: .long, help: ArgumentHelp("With --tls: accept exactly the receiver certificate with this SHA-256 fingerprint, as `capture-recv gen-cert` prints it (default: none).", valueName: "SHA256"))
    var pin: String?

    @Option(name: .long, help: ArgumentHelp("File whose first token is sent in every Hello (default: the CAPTURE_TOKEN environment variable, else none).", valueName: "FILE"))
    var tokenFile: String?

    @Option(name: .long, help: ArgumentHelp("After the run, check the receiver's output folder DIR as `verify` does (default: no check).", valueName: "DIR"))
    var verify: String?

    @Flag(name: .long, help: "Print the report as one JSON object instead of a table (default: table).")
    var json = false

    func validate() throws {
        guard rampSeconds >= 0, rampSeconds.isFinite else { throw ValidationError("--ramp-seconds must be 0 or more") }
        guard disconnectProbability >= 0, disconnectProbability < 1 else { throw ValidationError("--disconnect-probability must be at least 0 and below 1") }
        guard reconnectDelay >= 0, reconnectDelay <= 60 else { throw ValidationError("--reconnect-delay must be between 0 and 60 seconds") }
        guard maxFailures >= 1 else { throw ValidationError("--max-failures must be at least 1") }
        guard (1...64).contains(threads) else { throw ValidationError("--threads must be between 1 and 64") }
        if !tls, ca != nil || pin != nil { throw ValidationError("--ca and --pin go with --tls; add --tls to connect with TLS") }
        if ca != nil, pin != nil { throw ValidationError("give either --ca or --pin, not both") }
        if let pin {
            do { _ = try CertificateFingerprint(parsing: pin) } catch { throw ValidationError(error.description) }
        }
        _ = try ReceiverAddress(parsing: address)
    }

    func run() throws {
        let target = try ReceiverAddress(parsing: address)
        // Descriptors needed besides the streams: event loops, standard streams, files.
        let limit = UInt64(OpenFileLimit.raiseSoftToHard().now)
        let needed = UInt64(shape.streams + 64)
        guard limit >= needed else {
            throw LoadFailure("\(shape.streams) streams need about \(needed) open files, but this process may open only \(limit);"
                + " raise the hard limit (ulimit -Hn \(needed), or prlimit --nofile) or use fewer --streams")
        }
        let plans = shape.plans
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        defer { try? group.syncShutdownGracefully() }
        let limitSeconds = timeout ?? (shape.duration + rampSeconds + 60)
        let settings = SenderSettings(
            host: target.host, port: target.port, address: try target.resolve(), tls: try tlsContext(), tlsTrust: try tlsTrust(),
            authToken: try authToken(), disconnectProbability: disconnectProbability,
            reconnectDelay: .nanoseconds(Int64(reconnectDelay * 1e9)), maxConsecutiveFailures: maxFailures,
            deadline: .now() + .nanoseconds(Int64(limitSeconds * 1e9)))
        let collector = ResultCollector(expected: plans.count)
        let cpuBefore = ProcessCPUTime.seconds()
        let started = Date()
        var senders: [SimulatedSender] = []
        senders.reserveCapacity(plans.count)
        for plan in plans {
            let sender = SimulatedSender(plan: plan, loop: group.next(), settings: settings) { collector.add($0) }
            senders.append(sender)
            let offset = plans.count > 1 ? rampSeconds * Double(plan.index) / Double(plans.count - 1) : 0
            sender.start(after: .nanoseconds(Int64(offset * 1e9)))
        }
        if !collector.wait(seconds: limitSeconds + 15) {
            for sender in senders { sender.abandon(reason: "did not finish within \(Int(limitSeconds)) s") }
            _ = collector.wait(seconds: 10)
        }
        let wall = Date().timeIntervalSince(started)
        let cpu = ProcessCPUTime.seconds() - cpuBefore
        var report = LoadReport(results: collector.results, wallSeconds: wall, cpuSeconds: cpu)
        var problems: [String] = []
        if let verify {
            let outcome = StreamVerifier(directory: verify, plans: plans).run()
            report.verified = outcome.verified
            report.verificationProblems = outcome.problems.count
            problems = outcome.problems
        }
        print(json ? report.json() : report.table)
        for line in report.firstFailures { FileHandle.standardError.write(Data("capture-load: \(line)\n".utf8)) }
        for line in problems.prefix(20) { FileHandle.standardError.write(Data("capture-load: \(line)\n".utf8)) }
        if report.failed > 0 {
            throw LoadFailure("\(report.failed) of \(report.streams) streams failed (\(report.failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))")
        }
        if !problems.isEmpty {
            throw LoadFailure("verification failed: \(problems.count) of \(report.streams) files are missing or differ from what was sent")
        }
    }

    private func tlsTrust() throws -> PeerCertificateVerifier.Trust? {
        guard tls else { return nil }
        do throws(SecurityError) {
            if let pin { return .pin(try CertificateFingerprint(parsing: pin)) }
            if let ca { return .authorities(try PEMFiles.certificateAuthorities(at: ca)) }
            return .systemStore
        } catch {
            throw LoadFailure(error.description)
        }
    }

    private func tlsContext() throws -> NIOSSLContext? {
        guard tls else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = pin != nil ? .noHostnameVerification : .fullVerification
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw LoadFailure("cannot set up TLS: \(TLSErrorText.reason(of: error))")
        }
    }

    private func authToken() throws -> String {
        if let tokenFile {
            do throws(SecurityError) {
                return try AuthTokens.load(path: tokenFile).tokens[0]
            } catch {
                throw LoadFailure(error.description)
            }
        }
        return ProcessInfo.processInfo.environment["CAPTURE_TOKEN"]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}

/// Checks the files of an earlier run.
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks that DIR holds, for every stream of a run with the same stream flags, one finished file with exactly the packets sent.")

    @Argument(help: ArgumentHelp("The receiver's output folder (its --out).", valueName: "DIR"))
    var directory: String

    @OptionGroup var shape: StreamShapeOptions

    func run() throws {
        let plans = shape.plans
        let outcome = StreamVerifier(directory: directory, plans: plans).run()
        for line in outcome.problems { FileHandle.standardError.write(Data("capture-load: \(line)\n".utf8)) }
        print("\(outcome.verified) of \(plans.count) files verified" + (outcome.foreignFiles > 0 ? " (\(outcome.foreignFiles) files of other streams ignored)" : ""))
        if !outcome.problems.isEmpty {
            throw LoadFailure("verification failed: \(outcome.problems.count) of \(plans.count) files are missing or differ from what was sent")
        }
    }
}

/// HOST:PORT or [IPV6]:PORT.
struct ReceiverAddress {
    let host: String
    let port: Int

    init(parsing text: String) throws {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[close...].dropFirst().drop { $0 == ":" }
        } else if let colon = text.lastIndex(of: ":") {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        } else {
            throw ValidationError("'\(text)' is not HOST:PORT; give the receiver's address, e.g. 127.0.0.1:7400")
        }
        guard !hostPart.isEmpty, let port = Int(portPart), (1...65_535).contains(port) else {
            throw ValidationError("'\(text)' is not HOST:PORT with a port from 1 to 65535")
        }
        self.host = String(hostPart)
        self.port = port
    }

    /// The socket address, resolved once.
    func resolve() throws -> SocketAddress {
        do {
            return try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw LoadFailure("cannot find the receiver's address \(host): \(error); give an IP address or a name this machine resolves")
        }
    }
}

/// A failed run or check, in one line; exits with status 1.
struct LoadFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Collects the streams' results from every event loop; `wait` returns once all have arrived.
final class ResultCollector: @unchecked Sendable {
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var collected: [StreamResult] = []
    private let expected: Int

    init(expected: Int) {
        self.expected = expected
        collected.reserveCapacity(expected)
    }

    func add(_ result: StreamResult) {
        let complete = lock.withLock { () -> Bool in
            collected.append(result)
            return collected.count == expected
        }
        if complete { done.signal() }
    }

    /// Waits for every result, at most `seconds`; false on timeout.
    func wait(seconds: Double) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }

    var results: [StreamResult] { lock.withLock { collected.sorted { $0.index < $1.index } } }
}
