import CaptureCore
import CaptureWire
import Foundation

/// Realistic messages shared by the tests and the test vectors.
enum WireFixtures {
    static let streamID = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()
    static let pcmFormat = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
    static let opusFormat = StreamFormat.opus(channels: 2, framesPerPacket: 960)

    /// 2026-01-01T00:00:00Z in nanoseconds since 1970.
    static let startUnixNs: Int64 = 1_767_225_600_000_000_000

    static func hello(format: StreamFormat = pcmFormat, resumeFrom: UInt64 = 0) -> Capture_V1_Hello {
        var hello = Capture_V1_Hello()
        hello.protocolVersion = 1
        hello.streamID = streamID.wireBytes
        hello.streamName = "studio-a"
        hello.format = Capture_V1_StreamFormat(format)
        hello.startTimeUnixNs = startUnixNs
        hello.startSampleTime = 0
        hello.resumeFromSequence = resumeFrom
        hello.sourceHost = "field-recorder-1"
        hello.application = "capture-send 0.1.0"
        return hello
    }

    static func helloAccepted(next: UInt64 = 1, sampleTime: Int64 = 0, resumed: Bool = false) -> Capture_V1_HelloAccepted {
        var accepted = Capture_V1_HelloAccepted()
        accepted.nextSequence = next
        accepted.nextSampleTime = sampleTime
        accepted.heartbeatIntervalMs = 5000
        accepted.maxFrameBytes = UInt32(WireProtocol.defaultMaxFrameBytes)
        accepted.fileName = "studio-a/20260101T000000Z-studio-a.caf"
        accepted.resumed = resumed
        return accepted
    }

    /// Four s16 stereo frames: (0, 0), (1000, -1000), (2000, -2000), (32767, -32768).
    static let pcmSamples: [Int16] = [0, 0, 1000, -1000, 2000, -2000, 32767, -32768]

    static var pcmPayload: Data {
        Data(pcmSamples.flatMap { sample in
            [UInt8(truncatingIfNeeded: sample), UInt8(truncatingIfNeeded: sample >> 8)]
        })
    }

    static func pcmAudio(sequence: UInt64 = 1, firstSampleTime: Int64 = 0, frames: Int = 4) -> Capture_V1_AudioData {
        var audio = Capture_V1_AudioData()
        audio.sequence = sequence
        audio.firstSampleTime = firstSampleTime
        audio.packetCount = UInt32(frames)
        let payload = pcmPayload
        audio.payload = Data((0..<(frames * 4)).map { payload[$0 % payload.count] })
        audio.frameCount = UInt32(frames)
        return audio
    }

    /// `pcmAudio()` with the levels the sender measures for its payload: both channels peak at
    /// 0 dBFS (32767 and -32768 round to full scale) with an RMS of -6.00 dBFS.
    static func pcmAudioWithLevels() -> Capture_V1_AudioData {
        var audio = pcmAudio()
        audio.levels = .with {
            $0.peak = [0, 0]
            $0.rms = [600, 600]
        }
        return audio
    }

    /// `pcmAudio()` with levels a stereo stream's receiver must ignore: one channel's worth.
    static func pcmAudioWithBadLevels() -> Capture_V1_AudioData {
        var audio = pcmAudio()
        audio.levels = .with {
            $0.peak = [1200]
            $0.rms = [1500]
        }
        return audio
    }

    /// Three Opus packets of 960 frames (20 ms each), 5 + 3 + 4 bytes.
    static func vbrAudio(sequence: UInt64 = 7, firstSampleTime: Int64 = 17_280) -> Capture_V1_AudioData {
        var audio = Capture_V1_AudioData()
        audio.sequence = sequence
        audio.firstSampleTime = firstSampleTime
        audio.packetCount = 3
        audio.packetSizes = [5, 3, 4]
        audio.payload = Data([0xFC, 0xFF, 0xFE, 0x01, 0x02, 0xFC, 0xFF, 0xFE, 0xFC, 0xFF, 0xFE, 0x00])
        audio.frameCount = 2880
        return audio
    }

    static func gap(sequence: UInt64 = 2, sampleTime: Int64 = 4, length: UInt64 = 480) -> Capture_V1_Gap {
        var gap = Capture_V1_Gap()
        gap.sequence = sequence
        gap.sampleTime = sampleTime
        gap.lengthFrames = length
        gap.reason = "overrun"
        return gap
    }

    /// A receiver's protocol machine that accepted the fixture Hello as a new stream and took
    /// AudioData 1 (frames 0..<4): where the table tests of Marker and FilledGap start.
    static func streamingAfterFirstAudio() throws -> ReceiverStreamState {
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        guard case .decideOnHello(let hello) = try state.receive(.hello(hello())) else {
            throw UnexpectedAction(description: "the fixture Hello was not accepted")
        }
        try state.accept(resumingAt: .beginning(of: hello))
        _ = try state.receive(.audioData(pcmAudio()))
        return state
    }

    static func filledGap(sequence: UInt64 = 8, sampleTime: Int64 = 18_000, length: UInt64 = 1_920, reason: String = "paused") -> Capture_V1_FilledGap {
        var gap = Capture_V1_FilledGap()
        gap.sequence = sequence
        gap.sampleTime = sampleTime
        gap.lengthFrames = length
        gap.reason = reason
        return gap
    }

    static func marker(sequence: UInt64 = 3, sampleTime: Int64 = 484, label: String = "interview starts") -> Capture_V1_Marker {
        var marker = Capture_V1_Marker()
        marker.sequence = sequence
        marker.sampleTime = sampleTime
        marker.label = label
        return marker
    }

    static func ack(_ sequence: UInt64, sampleTime: Int64) -> Capture_V1_Ack {
        var ack = Capture_V1_Ack()
        ack.durableSequence = sequence
        ack.durableSampleTime = sampleTime
        return ack
    }

    static func heartbeat(_ ns: Int64 = startUnixNs + 5_000_000_000) -> Capture_V1_Heartbeat {
        var heartbeat = Capture_V1_Heartbeat()
        heartbeat.sentUnixNs = ns
        return heartbeat
    }

    static func endOfStream(last: UInt64 = 3, endSampleTime: Int64 = 488) -> Capture_V1_EndOfStream {
        var end = Capture_V1_EndOfStream()
        end.lastSequence = last
        end.endSampleTime = endSampleTime
        end.reason = "duration"
        return end
    }

    static func endAccepted() -> Capture_V1_EndAccepted {
        var accepted = Capture_V1_EndAccepted()
        accepted.fileName = "studio-a/20260101T000000Z-studio-a.caf"
        accepted.totalFrames = 488
        accepted.totalPackets = 8
        accepted.lastSequence = 3
        accepted.endSampleTime = 488
        return accepted
    }

    static func error() -> Capture_V1_Error {
        WireError.sequenceGap(expected: 5, received: 7).errorFrame
    }
}
