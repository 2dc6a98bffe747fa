import CaptureWire
import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A hand-driven sender for end-to-end tests: it speaks the protocol frame by frame over a real
/// loopback connection, so a test can play a lying, half-finished or hostile peer against a real
/// receiver and read each answer as it comes.
final class ProtocolClient {
    private let socket: Int32
    private var decoder = FrameDecoder(role: .sender)
    private var pending: [WireMessage] = []

    /// Connects to 127.0.0.1:`port`; a read waits at most `timeout` seconds.
    init(port: Int, timeout: Double = 10) throws {
        socket = try LoopbackSocket.connect(port: port, receiveTimeout: timeout)
    }

    deinit { close(socket) }

    /// Sends the preamble.
    func sendPreamble() throws { try send(WirePreamble.bytes()) }

    /// Sends messages, each as one frame.
    func send(_ messages: WireMessage...) throws {
        try send(messages.flatMap { try $0.encode() })
    }

    /// Sends raw bytes.
    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let result = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard result > 0 else { throw TestFailure("the receiver closed the connection while we were sending") }
            sent += result
        }
    }

    /// The next message from the receiver; nil when it closed the connection (or the wait ran out).
    func next() throws -> WireMessage? {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while pending.isEmpty {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            pending = try decoder.decode(chunk[0..<count])
        }
        return pending.removeFirst()
    }

    /// The next message that is not a Heartbeat or an Ack.
    func nextAnswer() throws -> WireMessage? {
        while let message = try next() {
            switch message {
            case .heartbeat, .ack: continue
            default: return message
            }
        }
        return nil
    }

    /// Everything the receiver sends until it closes the connection.
    func remainingMessages() throws -> [WireMessage] {
        var messages: [WireMessage] = []
        while let message = try next() { messages.append(message) }
        return messages
    }
}

/// A hand-driven receiver for end-to-end tests: it listens on 127.0.0.1, and for each connection a
/// real capture-send makes, reads the preamble and Hello and answers with whatever frames the test
/// scripts (a lying or broken receiver), then closes.
final class ScriptedReceiver: @unchecked Sendable {
    /// The port it listens on.
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var served = 0
    private var stopped = false
    private var sent: [[UInt8]] = []

    /// Listens; each connection gets `answer(hello)` once its Hello has arrived, after `delay` seconds.
    init(delay: Double = 0, answer: @escaping @Sendable (Capture_V1_Hello) -> [WireMessage]) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard ready else {
            close(listener)
            throw TestFailure("the scripted receiver cannot listen: \(errno)")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread { [self] in
                    serve(connection, delay: delay, answer: answer)
                }.start()
            }
        }.start()
    }

    /// Connections whose Hello was answered.
    var connectionsServed: Int { lock.withLock { served } }

    /// What each finished connection's sender sent, preamble included, in the order they ended.
    var bytesSent: [[UInt8]] { lock.withLock { sent } }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ connection: Int32, delay: Double, answer: @Sendable (Capture_V1_Hello) -> [WireMessage]) {
        defer { close(connection) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var hello: Capture_V1_Hello?
        while hello == nil {
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            received += chunk[0..<count]
            var decoder = FrameDecoder(role: .receiver)
            if case .hello(let message)? = (try? decoder.decode(received))?.first { hello = message }
        }
        guard let hello else { return }
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        let bytes = answer(hello).flatMap { (try? $0.encode()) ?? [] }
        _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        lock.withLock { served += 1 }
        // Read what the sender sends next until it closes, as a receiver that never answers again.
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += chunk[0..<count]
        }
        lock.withLock { sent.append(received) }
    }
}
