import CaptureWire
import Foundation

/// Fuzz target 1: bytes as a receiver reads them from a connection (preamble, then frames), fed
/// through `FrameDecoder` and the receiver's `ReceiverStreamState`, accepting the first Hello as a
/// new stream. Invariants: every message the decoder produces encodes back to a frame that decodes
/// to the same message, and the state machine never loses track (once it fails, every later
/// message fails too; sequences and sample times only move forward).
public enum FrameChecks {
    public static func check(_ data: Data) {
        var decoder = FrameDecoder(role: .receiver, maxFrameBytes: 1 << 16)
        var state = ReceiverStreamState()
        var failed = false
        // Split the bytes where the input says, so reads of every size are tried.
        let cut = data.isEmpty ? 0 : Int(data[data.startIndex]) % max(1, data.count)
        for piece in [data.prefix(cut), data.dropFirst(cut)] {
            let messages: [WireMessage]
            do {
                messages = try decoder.decode(Array(piece))
            } catch {
                return
            }
            if decoder.preambleVersion != nil, state.phase == .awaitingPreamble {
                do { try state.receivePreamble(version: decoder.preambleVersion ?? 0) } catch { failed = true }
            }
            for message in messages {
                checkRoundTrip(message)
                let before = (state.nextSequence, state.nextSampleTime)
                do {
                    let action = try state.receive(message, atUnixNanoseconds: 1_800_000_000_000_000_000)
                    precondition(!failed, "the state machine accepted a message after it failed")
                    if case .decideOnHello(let hello) = action {
                        try? state.accept(resumingAt: .beginning(of: hello))
                    }
                } catch {
                    failed = true
                }
                precondition(state.nextSequence >= before.0, "the expected sequence went backwards")
                precondition(state.nextSampleTime >= before.1, "the sample timeline went backwards")
            }
        }
    }

    /// A decoded message encodes to a frame that decodes to one message encoding to the same bytes
    /// (compared as bytes: a NaN sample rate is not equal to itself).
    private static func checkRoundTrip(_ message: WireMessage) {
        guard let frame = try? message.encode() else { return }
        let role: WireRole = [.hello, .audioData, .gap, .endOfStream].contains(message.type) ? .receiver : .sender
        var decoder = FrameDecoder(role: role, maxFrameBytes: Int.max)
        let again = try? decoder.decode((role == .receiver ? WirePreamble.bytes() : []) + frame)
        precondition(again?.count == 1, "a decoded \(message.type) does not decode again from its own encoding")
        precondition((try? again?.first?.encode()) == frame, "a decoded \(message.type) does not encode to the same bytes twice")
    }
}
