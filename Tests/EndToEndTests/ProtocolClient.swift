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
