import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation

/// The spool tests' stream: its description (48 kHz stereo s16) and packets of distinct bytes.
enum SpoolFixtures {
    static let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    /// The spool's record of a stream `id` bound to 127.0.0.1:7373.
    static func meta(_ id: UUID = UUID()) -> SpoolMeta {
        SpoolMeta(streamID: id, streamName: "test", destination: SpoolDestination(address: "127.0.0.1:7373"), description: StreamDescription(
            format: format, magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 1_800_000_000)),
            resumeSecret: Array(repeating: 0xA5, count: 32))
    }

    /// `frames` frames of distinct bytes starting at `first`.
    static func packets(first: Int64, frames: Int) -> EncodedPackets {
        let payload = (0..<(frames * 4)).map { UInt8(truncatingIfNeeded: Int(first) * 4 + $0 * 7) }
        return EncodedPackets(payload: payload, packetCount: frames, packetSizes: [], firstSampleTime: first, frameCount: frames)
    }
}
