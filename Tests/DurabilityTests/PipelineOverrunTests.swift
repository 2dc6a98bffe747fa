import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureWire
import Foundation
import XCTest

/// What the sender sends after capture overruns: every AudioData and Gap the pipeline logs must be
/// accepted, in order, by the receiver's own rules (`ReceiverStreamState`), and sample positions must
/// stay true: a PCM gap covers exactly the frames lost, audio after it starts where it ends, and the
/// file's timeline equals the capture timeline. Opus fills the lost stretch with encoded silence
/// (an Opus packet stream cannot skip time), so its packets alone cover the timeline, and a filled
/// gap labels each stretch at the same sample time as PCM's Gap.
///
/// The overruns are scripted (a source that reports `overrun(lostFrames:)` at chosen points), so
/// nothing depends on the machine's load.
final class PipelineOverrunTests: XCTestCase {
    /// One read of the scripted source.
    enum Step: Equatable {
        /// This many frames of a tone are captured.
        case audio(Int)
        /// This many frames are lost (the device overran).
        case lost(Int)
    }

    /// A source that plays a script of captured and lost stretches, then ends.
    private final class ScriptedSource: AudioSource, @unchecked Sendable {
        let format: StreamFormat
        let isRealTime = false
        private let lock = NSLock()
        private var steps: [Step]
        private var framesMade = 0

        init(format: StreamFormat, steps: [Step]) {
            self.format = format
            self.steps = steps
        }

        func start() throws(CaptureError) {}

        func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
            let step: Step? = lock.withLock { steps.isEmpty ? nil : steps.removeFirst() }
            switch step {
            case nil:
                return .endOfStream
            case .lost(let frames):
                framesMade += frames
                return .overrun(lostFrames: frames)
            case .audio(let frames):
                precondition(frames <= frameCapacity, "the script's buffers must fit the queue's")
                let channels = format.channelCount
                for frame in 0..<frames {
                    let time = Double(framesMade + frame) / format.sampleRate
                    let value = Int16(8_000 * sin(2 * .pi * 440 * time))
                    for channel in 0..<channels {
                        let offset = (frame * channels + channel) * 2
                        buffer[offset] = UInt8(truncatingIfNeeded: value)
                        buffer[offset + 1] = UInt8(truncatingIfNeeded: value >> 8)
                    }
                }
                framesMade += frames
                return .frames(frames)
            }
        }

        func stop() {}
        func close() {}
    }

    /// Overrun scripts: mid-frame for Opus (the encoder holds a partial 20 ms frame), on Opus frame
    /// boundaries, before the first buffer, and at the very end.
    private let scripts: [(name: String, steps: [Step])] = [
        ("mid-frame", [.audio(1_000), .lost(500), .audio(1_000), .lost(37), .audio(2_000)]),
        ("on frame boundaries", [.audio(960), .lost(960), .audio(1_920), .lost(1_920), .audio(960)]),
        ("before the first buffer", [.lost(300), .audio(1_000), .audio(1_000)]),
        ("at the end", [.audio(1_000), .lost(500)]),
        ("no overrun", [.audio(1_000), .audio(1_000)]),
    ]

    private let stereo48k = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
    private let mono16k = StreamFormat.linearPCM(sampleRate: 16_000, channels: 1, sample: .s16)

    func testPCMOverrunsBecomeGapsOfExactlyTheLostFramesThatTheReceiverAccepts() throws {
        for format in [stereo48k, mono16k] {
            for script in scripts {
                let label = "PCM \(Int(format.sampleRate)) Hz, \(script.name)"
                let sent = try capture(script.steps, format: format, encoder: try PCMEncoder(inputFormat: format))
                try assertReceiverAccepts(sent, label: label)

                XCTAssertEqual(sent.gaps, Self.lostStretches(script.steps), "\(label): one gap per overrun, where it was")
                XCTAssertEqual(sent.entries.first?.startSampleTime, 0, "\(label): the stream starts at sample 0")
                let captured = script.steps.reduce(0) { total, step in
                    if case .audio(let frames) = step { return total + frames }
                    return total
                }
                XCTAssertEqual(sent.audioFrames, Int64(captured), "\(label): every captured frame is sent once")
                XCTAssertEqual(
                    sent.end.position.endSampleTime, Self.timelineLength(script.steps),
                    "\(label): audio and gaps make up the capture timeline")
            }
        }
    }

    func testOpusOverrunsAreFilledWithSilenceAndTheReceiverAcceptsEveryPacket() throws {
        for format in [stereo48k, mono16k] {
            let scale = Int64(48_000 / Int(format.sampleRate))
            for script in scripts {
                let label = "Opus \(Int(format.sampleRate)) Hz, \(script.name)"
                let encoder = try OpusEncoder(inputFormat: format)
                let sent = try capture(script.steps, format: format, encoder: encoder)
                try assertReceiverAccepts(sent, label: label)

                XCTAssertEqual(sent.gaps.count, 0, "\(label): the encoded silence covers the loss; a gap would overlap it")
                // Each loss is labelled where PCM's gap stands (at 48 kHz), except one at the very
                // end, which no packet covers.
                let captured = Self.timelineLength(script.steps) - (script.steps.last.map { if case .lost(let n) = $0 { return Int64(n) } else { return 0 } } ?? 0)
                let labelled = Self.lostStretches(script.steps).filter { $0[0] < captured }.map { [$0[0] * scale, $0[1] * scale] }
                XCTAssertEqual(sent.filledGaps, labelled, "\(label): one filled gap per overrun, where it was")
                for entry in sent.entries {
                    if case .filledGap(let position, let sampleTime, _, let reason) = entry.content {
                        XCTAssertEqual(reason, "overrun", label)
                        XCTAssertGreaterThanOrEqual(position, sampleTime, "\(label): a filled gap follows the packets that reach it")
                    }
                }
                XCTAssertEqual(sent.entries.first?.startSampleTime, 0, "\(label): the stream starts at sample 0")
                // The decoded file: every packet, less the priming at the start and the padding at the
                // end, is the capture timeline up to the last captured frame (a loss at the very end
                // has nothing after it to keep on the timeline).
                var lastCapturedEnd: Int64 = 0
                var position: Int64 = 0
                for step in script.steps {
                    switch step {
                    case .audio(let frames):
                        position += Int64(frames)
                        lastCapturedEnd = position
                    case .lost(let frames):
                        position += Int64(frames)
                    }
                }
                XCTAssertEqual(
                    sent.audioFrames - Int64(encoder.primingFrames) - Int64(sent.end.remainderFrames),
                    lastCapturedEnd * scale, "\(label): the file's timeline is the capture timeline")
            }
        }
    }

    /// One capture feeding PCM and Opus at once (two encodings of one pipeline): every overrun is a
    /// Gap in the PCM stream and a filled gap in the Opus stream at the same sample time and
    /// length, both streams are accepted by the receiver's rules, and each is exactly what the same
    /// encoder logs alone from the same capture.
    func testTwoEncodingsOfOneCaptureRecordEachOverrunAtTheSameSampleTime() throws {
        let script: [Step] = [.audio(1_000), .lost(500), .audio(1_000), .lost(37), .audio(2_000), .lost(960), .audio(960)]
        let source = ScriptedSource(format: stereo48k, steps: script)
        let pcmLog = PacketLog(producerIsRealTime: false)
        let opusLog = PacketLog(producerIsRealTime: false)
        let opus = try OpusEncoder(inputFormat: stereo48k)
        let pipeline = try CapturePipeline(
            source: source, encodings: [(try PCMEncoder(inputFormat: stereo48k), pcmLog), (opus, opusLog)],
            configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(250)))
        defer { pipeline.queue.dispose() }
        try pipeline.start()
        XCTAssertEqual(try pipeline.waitAndFinish().get(), .endOfStream)
        let pcm = Sent(entries: try pcmLog.entries(from: 1, maxCount: 10_000), end: try XCTUnwrap(pcmLog.streamEnd), format: stereo48k, magicCookie: [], primingFrames: 0)
        let coded = Sent(
            entries: try opusLog.entries(from: 1, maxCount: 10_000), end: try XCTUnwrap(opusLog.streamEnd), format: opus.outputFormat,
            magicCookie: opus.magicCookie, primingFrames: opus.primingFrames)
        try assertReceiverAccepts(pcm, label: "PCM of two encodings")
        try assertReceiverAccepts(coded, label: "Opus of two encodings")
        XCTAssertEqual(pcm.gaps, Self.lostStretches(script))
        XCTAssertEqual(coded.filledGaps, pcm.gaps, "the same sample times and lengths in both encodings")
        // Each encoding is what it would be alone.
        let alonePCM = try capture(script, format: stereo48k, encoder: try PCMEncoder(inputFormat: stereo48k))
        let aloneOpus = try capture(script, format: stereo48k, encoder: try OpusEncoder(inputFormat: stereo48k))
        XCTAssertEqual(pcm.entries.map(\.content), alonePCM.entries.map(\.content))
        XCTAssertEqual(coded.entries.map(\.content), aloneOpus.entries.map(\.content), "packet for packet")
        XCTAssertEqual(pcm.end, alonePCM.end)
        XCTAssertEqual(coded.end, aloneOpus.end)
    }

    // MARK: - Helpers

    /// What the pipeline logged for one run.
    private struct Sent {
        var entries: [LoggedPacket]
        var end: StreamEnd
        var format: StreamFormat
        var magicCookie: [UInt8]
        var primingFrames: Int

        /// The filled gaps, as (sample time, length).
        var filledGaps: [[Int64]] {
            entries.compactMap { entry in
                if case .filledGap(_, let sampleTime, let length, _) = entry.content { return [sampleTime, length] }
                return nil
            }
        }

        /// The gaps, as (sample time, length).
        var gaps: [[Int64]] {
            entries.compactMap { entry in
                if case .gap(let sampleTime, let length, _) = entry.content { return [sampleTime, length] }
                return nil
            }
        }

        /// Frames of all the audio entries.
        var audioFrames: Int64 {
            entries.reduce(0) { total, entry in
                if case .audio(let packets) = entry.content { return total + Int64(packets.frameCount) }
                return total
            }
        }
    }

    private func capture(_ steps: [Step], format: StreamFormat, encoder: any AudioEncoder) throws -> Sent {
        let source = ScriptedSource(format: format, steps: steps)
        let log = PacketLog(producerIsRealTime: source.isRealTime)
        let pipeline = try CapturePipeline(
            source: source, encoder: encoder, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(250)), log: log)
        defer { pipeline.queue.dispose() }
        try pipeline.start()
        let completion = try pipeline.waitAndFinish().get()
        XCTAssertEqual(completion, .endOfStream)
        let end = try XCTUnwrap(log.streamEnd)
        return Sent(
            entries: try log.entries(from: 1, maxCount: 10_000), end: end, format: pipeline.outputFormat,
            magicCookie: pipeline.magicCookie, primingFrames: pipeline.primingFrames)
    }

    /// Feeds a new stream's Hello, every logged entry and the EndOfStream to the receiver's protocol
    /// state, as a receiver that accepts the stream from its start would.
    private func assertReceiverAccepts(_ sent: Sent, label: String) throws {
        var receiver = ReceiverStreamState()
        try receiver.receivePreamble(version: WireProtocol.version)
        _ = try receiver.receive(.hello(.with {
            $0.protocolVersion = UInt32(WireProtocol.version)
            $0.streamID = UUID().wireBytes
            $0.streamName = "overrun-test"
            $0.format = Capture_V1_StreamFormat(sent.format)
            $0.magicCookie = Data(sent.magicCookie)
            $0.startSampleTime = 0
            $0.primingFrames = UInt32(sent.primingFrames)
        }))
        try receiver.accept(resumingAt: StreamPosition(nextSequence: WireProtocol.firstSequence, nextSampleTime: 0))
        for entry in sent.entries {
            do {
                _ = try receiver.receive(entry.wireMessage)
            } catch {
                return XCTFail("\(label): the receiver refused sequence \(entry.sequence) (\(entry.content.summary)): \(error)")
            }
        }
        do {
            _ = try receiver.receive(.endOfStream(.with {
                $0.lastSequence = sent.entries.last?.sequence ?? 0
                $0.endSampleTime = sent.end.position.endSampleTime
                $0.remainderFrames = UInt32(sent.end.remainderFrames)
                $0.reason = sent.end.reason
            }))
        } catch {
            XCTFail("\(label): the receiver refused the end of the stream: \(error)")
        }
    }

    /// Where each overrun of a script falls on the capture timeline, and how long it is.
    private static func lostStretches(_ steps: [Step]) -> [[Int64]] {
        var position: Int64 = 0
        var stretches: [[Int64]] = []
        for step in steps {
            switch step {
            case .audio(let frames):
                position += Int64(frames)
            case .lost(let frames):
                stretches.append([position, Int64(frames)])
                position += Int64(frames)
            }
        }
        return stretches
    }

    /// Captured plus lost frames.
    private static func timelineLength(_ steps: [Step]) -> Int64 {
        steps.reduce(0) { total, step in
            switch step {
            case .audio(let frames), .lost(let frames): return total + Int64(frames)
            }
        }
    }
}

extension LoggedPacket {
    /// The sample index the entry starts at.
    fileprivate var startSampleTime: Int64 {
        switch content {
        case .audio(let packets): return packets.firstSampleTime
        case .gap(let sampleTime, _, _): return sampleTime
        case .marker(let sampleTime, _): return sampleTime
        case .filledGap(let position, _, _, _): return position
        }
    }
}

extension LoggedPacket.Content {
    /// A short description for failure messages.
    fileprivate var summary: String {
        switch self {
        case .audio(let packets): return "audio at \(packets.firstSampleTime), \(packets.frameCount) frames"
        case .gap(let sampleTime, let length, _): return "gap at \(sampleTime), \(length) frames"
        case .marker(let sampleTime, let label): return "marker at \(sampleTime) \"\(label)\""
        case .filledGap(let position, let sampleTime, let length, let reason): return "filled gap at \(position): \(length) frames from \(sampleTime) (\(reason))"
        }
    }
}
