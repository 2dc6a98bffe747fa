import CaptureCore
import CaptureErrorText
import CaptureSecurity
import CaptureWire
import CaptureWireNIO
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// What every simulated sender of a run shares: where to connect, how, and how to behave.
struct SenderSettings: Sendable {
    var host: String
    var port: Int
    /// The receiver's address, resolved once for all streams.
    var address: SocketAddress
    var tls: NIOSSLContext?
    var tlsTrust: PeerCertificateVerifier.Trust?
    var authToken: String
    var disconnectProbability: Double
    var reconnectDelay: TimeAmount
    var maxConsecutiveFailures: Int
    var deadline: NIODeadline
}

/// One simulated capture-send: paced AudioData from its `StreamPlan`, acks, heartbeats, random link
/// drops, reconnect and resume as PROTOCOL.md §8 says. All its state lives on one event loop, and
/// every method runs there (the checked `loop.preconditionInEventLoop()` guards the entry points),
/// which is why the class can be handed to that loop's tasks.
final class SimulatedSender: @unchecked Sendable {
    private enum Phase { case waiting, connecting, handshaking, streaming, finished }

    let plan: StreamPlan
    let loop: EventLoop
    private let settings: SenderSettings
    /// The wall-clock time of the stream's first frame, set when it starts.
    private var startTimeUnixNs: Int64 = 0
    private let onFinish: @Sendable (StreamResult) -> Void

    private var phase = Phase.waiting
    private var channel: Channel?
    /// Increases with every connection attempt; events of older connections are ignored.
    private var generation = 0
    private var connectionCount = 0
    private var startedAt = NIODeadline.now()
    /// The highest sequence whose audio has been "captured" by now.
    private var produced: UInt64 = 0
    /// The highest sequence the receiver has acknowledged as durable.
    private var acknowledged: UInt64 = 0
    /// The next sequence to write on this connection.
    private var nextToSend: UInt64 = 1
    /// The highest sequence ever written (so later writes count as resends).
    private var highestEverSent: UInt64 = 0
    private var endSent = false
    /// When each AudioData not yet acknowledged was written (uptime nanoseconds), by sequence.
    private var writeTimes: [UInt64: UInt64] = [:]
    private var lastSent = NIODeadline.now()
    private var lastReceived = NIODeadline.now()
    private var consecutiveFailures = 0
    private var lastFailure = ""
    private var tick: RepeatedTask?
    private var result: StreamResult
    private var random: PayloadGenerator

    init(plan: StreamPlan, loop: EventLoop, settings: SenderSettings, onFinish: @escaping @Sendable (StreamResult) -> Void) {
        self.plan = plan
        self.loop = loop
        self.settings = settings
        self.onFinish = onFinish
        self.result = StreamResult(index: plan.index, name: plan.name)
        self.random = PayloadGenerator(seed: plan.seed ^ 0x5EED, stream: plan.index, item: 42)
    }

    /// Starts the stream at `delay` from now (the ramp).
    func start(after delay: TimeAmount) {
        loop.scheduleTask(in: delay) { self.begin() }
    }

    private func begin() {
        loop.preconditionInEventLoop()
        startedAt = .now()
        startTimeUnixNs = Int64(Date().timeIntervalSince1970 * 1e9)
        let interval = TimeAmount.nanoseconds(Int64(plan.messageSeconds * 1e9))
        tick = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in self.onTick() }
        connect()
    }

    /// Set CAPTURE_LOAD_TRACE=1 to log every stream's connection events to standard error.
    private static let tracing = ProcessInfo.processInfo.environment["CAPTURE_LOAD_TRACE"] == "1"

    private func trace(_ text: @autoclosure () -> String) {
        guard Self.tracing else { return }
        FileHandle.standardError.write(Data("\(plan.name) gen \(generation): \(text())\n".utf8))
    }

    // MARK: Connection

    private func connect() {
        guard phase != .finished else { return }
        if NIODeadline.now() > settings.deadline {
            finish(failure: "did not finish before the run's time limit (last problem: \(lastFailure.isEmpty ? "none" : lastFailure))", code: "TIMEOUT")
            return
        }
        phase = .connecting
        generation += 1
        let myGeneration = generation
        let settings = self.settings
        let report = TLSVerificationReport()
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context = settings.tls, let trust = settings.tlsTrust {
                        let verifier = PeerCertificateVerifier(trust: trust, peerName: "the receiver", authority: .certificateAuthority)
                        let isAddress = (try? SocketAddress(ipAddress: settings.host, port: 0)) != nil
                        let handler = try NIOSSLClientHandler(
                            context: context, serverHostname: isAddress ? nil : settings.host,
                            customVerificationCallback: verifier.callback(report: report))
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(WireFrameDecoder(role: .sender)),
                        MessageToByteHandler(WireFrameEncoder(sendsPreamble: true)),
                        SimulatedSenderHandler(sender: self, generation: myGeneration, report: report),
                    ])
                }
            }
        bootstrap.connect(to: settings.address).whenComplete { outcome in
            guard myGeneration == self.generation else {
                if case .success(let stale) = outcome { stale.close(promise: nil) }
                return
            }
            switch outcome {
            case .success(let channel):
                self.trace("connected \(channel.localAddress?.description ?? "")")
                self.channel = channel
                self.connectionCount += 1
                if self.connectionCount > 1 { self.result.reconnects += 1 }
                self.sendHello()
            case .failure(let error):
                self.connectionFailed("cannot connect to \(settings.host):\(settings.port): \(Self.connectReason(error))", code: "CONNECT")
            }
        }
    }

    /// Why a connection attempt failed, in a user's words ("connection refused").
    private static func connectReason(_ error: Error) -> String {
        if let connection = error as? NIOConnectionError, let first = connection.connectionErrors.first {
            return SystemErrorText.describe(first.error)
        }
        return SystemErrorText.describe(error)
    }

    private func sendHello() {
        phase = .handshaking
        var hello = Capture_V1_Hello()
        hello.protocolVersion = UInt32(WireProtocol.version)
        hello.streamID = plan.streamID.wireBytes
        hello.streamName = plan.name
        hello.authToken = settings.authToken
        hello.format = Capture_V1_StreamFormat(plan.format)
        if plan.codec == .opus {
            hello.magicCookie = plan.opusHead
            hello.primingFrames = UInt32(plan.primingFrames)
        }
        hello.startTimeUnixNs = startTimeUnixNs
        hello.startSampleTime = 0
        hello.resumeSecret = plan.resumeSecret
        hello.resumeFromSequence = connectionCount > 1 ? acknowledged + 1 : 0
        // A new connection repeats EndOfStream if the last one ended before EndAccepted.
        endSent = false
        hello.sourceHost = "capture-load"
        hello.application = "capture-load"
        write(.hello(hello))
        channel?.flush()
    }

    /// A connection attempt or a connection ended without finishing the stream: try again later,
    /// unless it has failed too often in a row.
    private func connectionFailed(_ reason: String, code: String, countsAsFailure: Bool = true) {
        guard phase != .finished else { return }
        // Forget the connection before closing it: closing fires its handler's events at once.
        let closing = channel
        channel = nil
        generation += 1
        closing?.close(promise: nil)
        lastFailure = reason
        trace("connection failed: \(reason)")
        if countsAsFailure { consecutiveFailures += 1 }
        guard consecutiveFailures < settings.maxConsecutiveFailures else {
            let attempts = consecutiveFailures == 1 ? "1 failed connection" : "\(consecutiveFailures) failed connections in a row"
            finish(failure: "gave up after \(attempts): \(reason)", code: code)
            return
        }
        phase = .waiting
        // Like a real sender, back off while the receiver keeps refusing: the delay doubles with each
        // failed connection in a row (up to 64 times, at most 15 s), plus up to 0.2 s of jitter.
        let doubled = settings.reconnectDelay.nanoseconds << Int64(min(max(consecutiveFailures - 1, 0), 6))
        let delay = TimeAmount.nanoseconds(min(doubled, TimeAmount.seconds(15).nanoseconds))
        let jitter = TimeAmount.milliseconds(Int64(random.next() % 200))
        loop.scheduleTask(in: delay + jitter) { self.connect() }
    }

    // MARK: Events from the handler

    func received(_ message: WireMessage, generation: Int) {
        guard generation == self.generation, phase != .finished else { return }
        trace("received \(message.type)")
        lastReceived = .now()
        switch message {
        case .helloAccepted(let accepted):
            guard phase == .handshaking else { return protocolFailure("HelloAccepted arrived twice") }
            let next = accepted.nextSequence
            guard next >= acknowledged + 1, next <= produced + 1 else {
                return protocolFailure("the receiver wants sequence \(next), but only \(acknowledged + 1)...\(produced + 1) are possible")
            }
            acknowledged = next - 1
            writeTimes = writeTimes.filter { $0.key >= next }
            nextToSend = next
            consecutiveFailures = 0
            phase = .streaming
            sendAvailable(mayDisconnect: false)
        case .ack(let ack):
            let durable = ack.durableSequence
            guard durable < nextToSend || durable <= acknowledged else {
                return protocolFailure("an Ack for sequence \(durable) arrived, but only up to \(nextToSend - 1) was sent")
            }
            if durable > acknowledged {
                let now = UInt64(NIODeadline.now().uptimeNanoseconds)
                for sequence in (acknowledged + 1)...durable {
                    guard let written = writeTimes.removeValue(forKey: sequence) else { continue }
                    let micros = (now &- written) / 1_000
                    result.ackLatenciesMicroseconds.append(UInt32(min(micros, UInt64(UInt32.max))))
                }
                acknowledged = durable
            }
        case .endAccepted(let accepted):
            if accepted.totalPackets != UInt64(plan.packetCount) {
                finish(failure: "EndAccepted reports \(accepted.totalPackets) packets, \(plan.packetCount) were sent", code: "END_MISMATCH")
            } else {
                finish(failure: nil, code: nil)
            }
        case .error(let error):
            let name = ErrorCodeName.of(error.code)
            result.receivedErrors[name, default: 0] += 1
            let reason = "the receiver sent \(name): \(error.message)"
            if error.code == .streamBusy || error.code == .timeout {
                connectionFailed(reason, code: name)
            } else {
                finish(failure: reason, code: name)
            }
        case .heartbeat:
            break
        case .hello, .audioData, .gap, .marker, .filledGap, .endOfStream:
            protocolFailure("the receiver sent a \(message.type), which only senders send")
        }
    }

    func connectionClosed(generation: Int, error: String?) {
        guard generation == self.generation, phase != .finished else { return }
        let code = error == nil ? "CLOSED" : (error?.hasPrefix("TLS") == true ? "TLS" : "CONNECTION")
        connectionFailed(error ?? "the receiver closed the connection", code: code)
    }

    private func protocolFailure(_ reason: String) {
        var error = Capture_V1_Error()
        error.code = .invalidMessage
        error.message = reason
        error.fatal = true
        write(.error(error))
        channel?.flush()
        finish(failure: reason, code: "PROTOCOL")
    }

    // MARK: Sending

    private func onTick() {
        guard phase != .finished else { return }
        let elapsed = Double((NIODeadline.now() - startedAt).nanoseconds) / 1e9
        produced = min(UInt64(plan.messageCount), UInt64(max(0, elapsed / plan.messageSeconds + 1e-6)))
        let now = NIODeadline.now()
        if now > settings.deadline {
            finish(failure: "did not finish before the run's time limit (last problem: \(lastFailure.isEmpty ? "none" : lastFailure))", code: "TIMEOUT")
            return
        }
        guard phase == .streaming else { return }
        if now - lastReceived > .nanoseconds(WireProtocol.peerSilenceTimeout.components.seconds * 1_000_000_000) {
            return connectionFailed("the receiver sent nothing for 20 s", code: "TIMEOUT")
        }
        sendAvailable(mayDisconnect: true)
        if now - lastSent >= .seconds(5) {
            var heartbeat = Capture_V1_Heartbeat()
            heartbeat.sentUnixNs = Int64(Date().timeIntervalSince1970 * 1e9)
            write(.heartbeat(heartbeat))
            channel?.flush()
        }
    }

    /// Writes every produced sequence not yet written on this connection, then EndOfStream once all are.
    private func sendAvailable(mayDisconnect: Bool) {
        guard phase == .streaming, let channel else { return }
        var wrote = false
        while nextToSend <= produced {
            let sequence = nextToSend
            write(.audioData(plan.audioData(sequence: sequence)))
            writeTimes[sequence] = UInt64(NIODeadline.now().uptimeNanoseconds)
            result.messagesSent += 1
            if sequence <= highestEverSent { result.messagesResent += 1 }
            highestEverSent = max(highestEverSent, sequence)
            nextToSend += 1
            wrote = true
        }
        if nextToSend > UInt64(plan.messageCount) && !endSent {
            var end = Capture_V1_EndOfStream()
            end.lastSequence = UInt64(plan.messageCount)
            end.endSampleTime = plan.endSampleTime
            end.remainderFrames = UInt32(plan.remainderFrames)
            end.reason = "duration"
            write(.endOfStream(end))
            endSent = true
            wrote = true
        }
        guard wrote else { return }
        channel.flush()
        // A link drop, only while audio is still flowing (never after EndOfStream).
        if mayDisconnect, !endSent, settings.disconnectProbability > 0,
           Double(random.next() >> 11) / Double(1 << 53) < settings.disconnectProbability {
            result.injectedDisconnects += 1
            connectionFailed("link dropped on purpose", code: "DROP", countsAsFailure: false)
        }
    }

    private func write(_ message: WireMessage) {
        channel?.write(message, promise: nil)
        lastSent = .now()
    }

    private func finish(failure: String?, code: String?) {
        guard phase != .finished else { return }
        phase = .finished
        generation += 1
        tick?.cancel()
        let closing = channel
        channel = nil
        closing?.close(promise: nil)
        result.failure = failure
        result.failureCode = code
        onFinish(result)
    }

    /// Ends the stream from outside (the run's time limit), on its loop.
    func abandon(reason: String) {
        loop.execute { self.finish(failure: reason, code: "TIMEOUT") }
    }

    /// Whether the stream has ended (on its loop).
    var isFinished: Bool { phase == .finished }
}

/// The pipeline's last handler: hands decoded messages and the connection's end to its sender.
final class SimulatedSenderHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = WireMessage

    private let sender: SimulatedSender
    private let generation: Int
    private let report: TLSVerificationReport
    private var error: String?

    init(sender: SimulatedSender, generation: Int, report: TLSVerificationReport) {
        self.sender = sender
        self.generation = generation
        self.report = report
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        sender.received(unwrapInboundIn(data), generation: generation)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if self.error == nil {
            if let failure = report.failure {
                self.error = "TLS: \(failure.message(naming: LoadSettingNames()))"
            } else if let wire = error as? WireError {
                self.error = "\(wire)"
            } else if error is NIOSSLError || error is BoringSSLError {
                self.error = "TLS: \(TLSErrorText.reason(of: error))"
            } else {
                self.error = SystemErrorText.describe(error)
            }
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        sender.connectionClosed(generation: generation, error: error)
    }
}

/// capture-load's flags for the settings its refusals name (--ca, --pin); the library's words for the rest.
struct LoadSettingNames: SettingNaming {
    func name(of setting: Setting) -> String {
        switch setting {
        case .certificateAuthority: "--ca"
        case .certificatePin: "--pin"
        default: LibrarySettingNames().name(of: setting)
        }
    }
}
