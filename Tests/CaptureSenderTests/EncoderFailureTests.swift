import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureWire
import XCTest

/// An encoder that fails in the middle of a capture: capture stops (asked from the queue's own
/// delivery thread, which must not wait for itself), the stream ends where the encoder stopped,
/// with the reason, and the pipeline's end says why.
final class EncoderFailureTests: XCTestCase {
    func testAnEncoderThatFailsStopsCaptureAndEndsTheStreamWhereItStopped() throws {
        let source = try ToneSource(settings: .init(frequency: 440, levelDBFS: -12, channels: 2, duration: .seconds(3_600), paced: false))
        let encoder = FailingEncoder(wrapping: try PCMEncoder(inputFormat: source.format), failingOnBuffer: 3)
        let log = PacketLog(producerIsRealTime: false)
        let pipeline = try CapturePipeline(source: source, encoder: encoder, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100)), log: log)
        try pipeline.start()
        // An hour of unpaced tone: only the failure ends this capture.
        guard case .failure(.encoderFailed(let reason)) = pipeline.waitAndFinish() else { return XCTFail("the encoder's failure ends the capture") }
        XCTAssertEqual(reason, "the test encoder fails on buffer 3")
        let end = try XCTUnwrap(log.streamEnd)
        XCTAssertEqual(end.reason, "encoder-failed")
        XCTAssertEqual(end.position.lastSequence, 2, "the two buffers encoded before the failure")
        XCTAssertEqual(end.position.endSampleTime, 2 * 4_800, "the stream ends where the encoder stopped")
    }
}

/// PCM, until the `failingOnBuffer`th buffer, which it refuses.
private final class FailingEncoder: AudioEncoder {
    private let wrapped: PCMEncoder
    private let failingOnBuffer: Int
    private var buffers = 0

    init(wrapping wrapped: PCMEncoder, failingOnBuffer: Int) {
        self.wrapped = wrapped
        self.failingOnBuffer = failingOnBuffer
    }

    var inputFormat: StreamFormat { wrapped.inputFormat }
    var outputFormat: StreamFormat { wrapped.outputFormat }
    var magicCookie: [UInt8] { wrapped.magicCookie }
    var primingFrames: Int { wrapped.primingFrames }
    var maximumPacketSize: Int { wrapped.maximumPacketSize }
    var fillsLostFrames: Bool { wrapped.fillsLostFrames }
    var encodingLabel: String { wrapped.encodingLabel }
    func outputSampleTime(ofInput sampleTime: Int64) -> Int64 { wrapped.outputSampleTime(ofInput: sampleTime) }

    func encode(_ buffer: CapturedBuffer) throws(EncoderError) -> EncodedPackets? {
        buffers += 1
        if buffers == failingOnBuffer { throw .codecFailed("the test encoder fails on buffer \(failingOnBuffer)") }
        return try wrapped.encode(buffer)
    }

    func finish() throws(EncoderError) -> EncoderTail { try wrapped.finish() }
}
