import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

/// A sender resuming a stream the receiver has no file of is refused before anything is created
/// (issue 19, item 14): no empty CAF, journal, position log or index entry is left, so nothing is
/// registered as waiting after a restart either.
final class ResumeRefusalTests: XCTestCase {
    func testRefusedResumesOfUnknownStreamsLeaveNoFiles() throws {
        let receiver = try ReceiverUnderTest()
        for attempt in 0..<20 {
            let hello = WirePreamble.bytes() + (try WireMessage.hello(.with {
                $0.protocolVersion = 1
                $0.streamID = withUnsafeBytes(of: UUID().uuid) { Data($0) }
                $0.streamName = "ghost-\(attempt)"
                $0.resumeFromSequence = 41
                $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            }).encode())
            let reply = try RawClient.exchange(port: receiver.port, sending: hello)
            var decoder = FrameDecoder(role: .sender)
            let messages = try decoder.decode(reply)
            guard case .error(let error)? = messages.first else { return XCTFail("attempt \(attempt): an Error frame, got \(messages)") }
            XCTAssertEqual(error.code, .sequenceGap, "attempt \(attempt): \(error.message)")
        }
        let out = receiver.directory.path
        // The stream index and the receiver's own commit log are there from the start.
        let names = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0 != ".streams" && $0 != ".commit-log" }
        XCTAssertEqual(names, [], "nothing created for refused resumes")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: out + "/.streams"), [], "and nothing in the stream index")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
