import CaptureWire
import Foundation

/// Fuzz target 4: arbitrary bytes as a Hello's body, decoded (protobuf) and validated. Invariants: a
/// Hello that validates has a 16-byte id that round-trips through its UUID, a supported format, a
/// resume secret of an allowed size, and a continuation the rules allow; validating it again gives
/// the same result; its new-stream resume point never overflows.
public enum HelloChecks {
    public static func check(_ data: Data) {
        guard let hello = try? Capture_V1_Hello(serializedBytes: data) else { return }
        guard let validated = try? ValidatedHello(hello) else { return }
        precondition(validated.streamID.wireBytes == hello.streamID, "the stream id does not round-trip")
        precondition((try? validated.format.validate()) != nil, "a validated Hello carries an invalid format")
        precondition(hello.resumeSecret.isEmpty || WireProtocol.resumeSecretLengths.contains(hello.resumeSecret.count))
        if hello.hasContinues {
            precondition(hello.continues.firstSequence >= 1 && hello.continues.firstSequence <= WireProtocol.maximumSequence)
            precondition(hello.continues.streamID != hello.streamID)
        }
        let resume = ResumePoint.newStream(validated)
        precondition(resume.nextSequence >= 1 && resume.nextSampleTime >= 0)
        precondition((try? ValidatedHello(hello)) == validated, "validation is not deterministic")
    }
}
