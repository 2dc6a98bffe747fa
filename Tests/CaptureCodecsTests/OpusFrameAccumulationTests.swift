import CaptureCodecs
import CaptureCore
import XCTest

/// Captured buffers of any size become whole Opus packets on a 48 kHz timeline, with no audio lost
/// or repeated, and the end of the stream is padded and reported exactly.
final class OpusFrameAccumulationTests: XCTestCase {
    /// 1 s + 123 frames at 48 kHz stereo: not a whole number of 20 ms frames.
    private let streamFrames = 48_123

    private func encodeChirp(
        chunkFrames: [Int], sample: PCMSampleFormat = .f32, sampleRate: Int = 48_000, channels: Int = 2,
        frames: Int? = nil, startSampleTime: Int64 = 0
    ) throws -> (source: [Float], encoder: OpusEncoder, stream: OpusTestTools.EncodedStream) {
        let frameCount = frames ?? streamFrames
        let source = OpusTestTools.chirp(frames: frameCount, channels: channels, sampleRate: Double(sampleRate))
        let format = StreamFormat.linearPCM(sampleRate: Double(sampleRate), channels: channels, sample: sample)
        let encoder = try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(bitrate: 128_000))
        let stream = try OpusTestTools.encode(
            OpusTestTools.bytes(source, as: sample), with: encoder, chunkFrames: chunkFrames, startSampleTime: startSampleTime
        )
        return (source, encoder, stream)
    }

    func testCaptureBuffersOf441FramesMakeWholePacketsWithNothingLost() throws {
        try checkAccumulation(chunkFrames: [441])
    }

    func testCaptureBuffersOf1000FramesMakeWholePacketsWithNothingLost() throws {
        try checkAccumulation(chunkFrames: [1000])
    }

    func testCaptureBuffersOf4096FramesMakeWholePacketsWithNothingLost() throws {
        try checkAccumulation(chunkFrames: [4096])
    }

    func testMixedBufferSizesAndIntegerInputsGiveTheSameTimeline() throws {
        try checkAccumulation(chunkFrames: [441, 1000, 4096, 1, 959, 960, 961], sample: .s16)
        try checkAccumulation(chunkFrames: [4096, 441], sample: .s24)
        try checkAccumulation(chunkFrames: [1000], sample: .s32)
    }

    private func checkAccumulation(
        chunkFrames: [Int], sample: PCMSampleFormat = .f32, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let (source, encoder, stream) = try encodeChirp(chunkFrames: chunkFrames, sample: sample)

        // libopus 1.3 looks 312 frames ahead at 48 kHz (2.5 ms + 4 ms delay compensation).
        XCTAssertEqual(encoder.primingFrames, 312, file: file, line: line)
        XCTAssertEqual(encoder.outputFormat, StreamFormat.opus(channels: 2, framesPerPacket: 960), file: file, line: line)
        // Enough packets to decode the input and the priming: ceil((48123 + 312) / 960) = 51.
        XCTAssertEqual(stream.packets.count, 51, file: file, line: line)
        XCTAssertEqual(stream.frameCounts.reduce(0, +), 51 * 960, "total frames", file: file, line: line)
        XCTAssertEqual(stream.remainderFrames, 51 * 960 - 312 - streamFrames, "remainder = padding past the input", file: file, line: line)
        XCTAssertEqual(stream.remainderFrames, 525, file: file, line: line)
        XCTAssertEqual(stream.tailPacketCount, 1, "finish() flushes the one partial frame", file: file, line: line)

        // Packets are contiguous on the timeline, starting at 0.
        var expectedTime: Int64 = 0
        for (time, frames) in zip(stream.firstSampleTimes, stream.frameCounts) {
            XCTAssertEqual(time, expectedTime, "packets follow each other without gap or overlap", file: file, line: line)
            expectedTime += Int64(frames)
        }
        for size in stream.packetSizes {
            XCTAssertLessThanOrEqual(Int(size), encoder.maximumPacketSize, file: file, line: line)
        }

        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 2)
        XCTAssertEqual(decoded.count, 51 * 960 * 2, file: file, line: line)
        let valid = Array(decoded[(312 * 2)..<((312 + streamFrames) * 2)])
        XCTAssertEqual(valid.count, source.count, "valid frames = total - priming - remainder = the source", file: file, line: line)
        // Aligned to the sample: a lost or repeated stretch anywhere would wreck a window's SNR.
        let worst = OpusTestTools.worstWindowSNR(valid, source, channels: 2, windowFrames: 2_000)
        XCTAssertGreaterThan(worst, 25, "every 2000-frame window matches the source (a one-frame slip gives about 16 dB)", file: file, line: line)
        // The remainder is silence (padding) after the source's end.
        let tail = decoded[((312 + streamFrames) * 2)...]
        XCTAssertEqual(tail.count, 525 * 2, file: file, line: line)
    }

    func testNoPaddingPacketWhenInputPlusPrimingIsWholeFrames() throws {
        // 50 packets of 960 frames hold 48000 frames: 312 of priming and 47688 of input.
        let (_, encoder, stream) = try encodeChirp(chunkFrames: [4096], frames: 48_000 - 312)
        XCTAssertEqual(encoder.primingFrames, 312)
        XCTAssertEqual(stream.packets.count, 50)
        XCTAssertEqual(stream.remainderFrames, 0)
        XCTAssertEqual(stream.tailPacketCount, 1, "the last partial frame (the priming's worth) is flushed, no extra packet")
    }

    func testInputOfWholeFramesStillFlushesTheLookAhead() throws {
        // 48000 frames = 50 whole frames, but the last 312 input frames are still in libopus's
        // look-ahead: one more packet brings them out, and 648 frames of it are padding.
        let (source, encoder, stream) = try encodeChirp(chunkFrames: [960], frames: 48_000)
        XCTAssertEqual(stream.packets.count, 51)
        XCTAssertEqual(stream.remainderFrames, 51 * 960 - 312 - 48_000)
        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 2)
        let valid = Array(decoded[(312 * 2)..<((312 + 48_000) * 2)])
        XCTAssertGreaterThan(OpusTestTools.snr(valid[(47_000 * 2)...], source[(47_000 * 2)...]), 20, "the end of the input is there")
    }

    func testSixteenKilohertzInputIsDescribedOnTheFortyEightKilohertzTimeline() throws {
        // 16 kHz: 320 input frames per 20 ms packet, each counting 960 on the 48 kHz timeline.
        let inputFrames = 16_041
        let (source, encoder, stream) = try encodeChirp(
            chunkFrames: [441, 1000], sampleRate: 16_000, channels: 1, frames: inputFrames, startSampleTime: 1_000
        )
        XCTAssertEqual(encoder.timelineScale, 3)
        XCTAssertEqual(encoder.outputFormat.sampleRate, 48_000)
        XCTAssertEqual(encoder.outputFormat.framesPerPacket, 960)
        XCTAssertEqual(encoder.primingFrames % 3, 0, "the look-ahead in 16 kHz frames, times 3")
        let primingInput = encoder.primingFrames / 3
        let packetCount = (inputFrames + primingInput + 319) / 320
        XCTAssertEqual(stream.packets.count, packetCount)
        XCTAssertEqual(stream.firstSampleTimes.first, 3_000, "input sample 1000 is 48 kHz frame 3000")
        XCTAssertEqual(stream.remainderFrames, packetCount * 960 - encoder.primingFrames - inputFrames * 3)

        // Decoded at the input rate, the look-ahead in input frames lines the output up with the source.
        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 1, sampleRate: 16_000)
        XCTAssertEqual(decoded.count, packetCount * 320)
        let valid = Array(decoded[primingInput..<(primingInput + inputFrames)])
        XCTAssertGreaterThan(OpusTestTools.worstWindowSNR(valid, source, channels: 1, windowFrames: 1_000), 15)
    }

    func testAnOverrunGapIsFilledWithSilenceSoPacketsStayOnTheCaptureTimeline() throws {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .f32)
        let encoder = try OpusEncoder(inputFormat: format)
        let tone = OpusTestTools.bytes(OpusTestTools.twoTone(frames: 1_000, channels: 1, sampleRate: 48_000), as: .f32)
        var stream = OpusTestTools.EncodedStream()
        try tone.withUnsafeBytes { bytes in
            // 1000 frames at 0, then 1000 frames at 5000: 4000 frames were lost in between.
            for start: Int64 in [0, 5_000] {
                let buffer = CapturedBuffer(
                    bytes: bytes, startTime: CaptureTimestamp(sampleTime: start, hostTime: 0), packetCount: 1_000,
                    framesLostBefore: start == 0 ? 0 : 4_000
                )
                if let packets = try encoder.encode(buffer) { stream.add(packets) }
            }
        }
        let tail = try encoder.finish()
        if let packets = tail.packets { stream.add(packets) }
        // 6000 timeline frames + 312 priming = 6312 → 7 packets; remainder 6720 - 312 - 6000.
        XCTAssertEqual(stream.packets.count, 7)
        XCTAssertEqual(tail.remainderFrames, 408)
        XCTAssertEqual(stream.firstSampleTimes, [0, 960, 5_760], "one packet, five more after the gap, one from finish()")

        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 1)
        let afterGap = OpusTestTools.twoTone(frames: 1_000, channels: 1, sampleRate: 48_000)
        XCTAssertGreaterThan(
            OpusTestTools.snr(decoded[(312 + 5_200)..<(312 + 6_000)], afterGap[200...]), 15,
            "the audio after the gap sits at its capture time"
        )
        let gap = decoded[(312 + 1_500)..<(312 + 4_500)]
        let gapPeak = gap.map { abs($0) }.max() ?? 1
        XCTAssertLessThan(gapPeak, 0.01, "the lost stretch decodes as silence")
    }

    func testFramesLostBeforeTheFirstBufferAreSilenceAtTheStartOfTheTimeline() throws {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .f32)
        let encoder = try OpusEncoder(inputFormat: format)
        XCTAssertTrue(encoder.fillsLostFrames, "Opus covers lost frames itself: the caller records no gap")
        XCTAssertFalse(try PCMEncoder(inputFormat: format).fillsLostFrames, "PCM skips them: the caller records a gap")
        let tone = OpusTestTools.twoTone(frames: 1_000, channels: 1, sampleRate: 48_000)
        var stream = OpusTestTools.EncodedStream()
        try OpusTestTools.bytes(tone, as: .f32).withUnsafeBytes { bytes in
            // The stream's first 3000 frames were lost before its first buffer.
            let buffer = CapturedBuffer(
                bytes: bytes, startTime: CaptureTimestamp(sampleTime: 3_000, hostTime: 0), packetCount: 1_000,
                framesLostBefore: 3_000
            )
            if let packets = try encoder.encode(buffer) { stream.add(packets) }
        }
        let tail = try encoder.finish()
        if let packets = tail.packets { stream.add(packets) }
        // 4000 timeline frames + 312 priming = 4312 → 5 packets; remainder 4800 - 312 - 4000.
        XCTAssertEqual(stream.firstSampleTimes, [0, 3_840], "the packets start at sample 0, where the stream began")
        XCTAssertEqual(stream.packets.count, 5)
        XCTAssertEqual(tail.remainderFrames, 488)

        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 1)
        let lostPeak = decoded[312..<(312 + 2_800)].map { abs($0) }.max() ?? 1
        XCTAssertLessThan(lostPeak, 0.01, "the lost stretch decodes as silence")
        XCTAssertGreaterThan(
            OpusTestTools.snr(decoded[(312 + 3_200)..<(312 + 4_000)], tone[200...]), 15,
            "the first buffer's audio sits at its capture time"
        )
    }

    func testSampleTimesGoingBackwardAreRefused() throws {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16)
        let encoder = try OpusEncoder(inputFormat: format)
        let silence = [UInt8](repeating: 0, count: 2_000)
        try silence.withUnsafeBytes { bytes in
            _ = try encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 1_000))
            XCTAssertThrowsError(
                try encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 500, hostTime: 0), packetCount: 1_000))
            ) { error in
                XCTAssertEqual(
                    error as? EncoderError,
                    .invalidConfiguration("a captured buffer starts at sample 500, before the end of the previous one (1000): sample times must not go backward")
                )
            }
        }
    }

    func testFinishWithoutAudioGivesNothingAndEncodeAfterFinishIsRefused() throws {
        let encoder = try OpusEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        XCTAssertEqual(try encoder.finish(), EncoderTail(packets: nil, remainderFrames: 0))
        let silence = [UInt8](repeating: 0, count: 400)
        try silence.withUnsafeBytes { bytes in
            XCTAssertThrowsError(
                try encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 100))
            ) { error in
                XCTAssertEqual(
                    error as? EncoderError,
                    .invalidConfiguration("the Opus encoder has finished its stream: create a new encoder for a new stream")
                )
            }
        }
    }
}
