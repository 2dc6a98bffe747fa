import CaptureCore
import Foundation

/// A Hello that passed the protocol's checks, with its fields in their Swift types.
public struct ValidatedHello: Sendable, Equatable {
    /// The message as received.
    public var message: Capture_V1_Hello
    /// The stream's identity, the same across reconnects.
    public var streamID: UUID
    /// The validated audio format.
    public var format: StreamFormat
    /// The capture this stream is one encoding of (Hello `capture`): the capture's id and the
    /// encoding's label; nil when the sender named none.
    public var capture: CaptureOfStream?

    /// The capture a stream is one encoding of, as a Hello names it.
    public struct CaptureOfStream: Sendable, Equatable {
        /// The capture's id, the same in every stream of the capture.
        public var id: UUID
        /// The encoding's label (`opus-64k-20ms`).
        public var encoding: String

        public init(id: UUID, encoding: String) {
            self.id = id
            self.encoding = encoding
        }
    }
    /// The end of the stream's sample timeline: no frame of it lies at or past this position
    /// (`start_sample_time` + `WireProtocol.maximumTimelineSeconds` at the sample rate).
    public var timelineEnd: Int64

    /// Limits on Hello fields that the receiver applies.
    public struct Limits: Sendable, Equatable {
        /// Largest `stream_name` in UTF-8 bytes.
        public var maxStreamNameBytes: Int
        /// Largest `auth_token` in UTF-8 bytes.
        public var maxAuthTokenBytes: Int
        /// Largest `magic_cookie` in bytes.
        public var maxMagicCookieBytes: Int
        /// Largest `source_host` in UTF-8 bytes (a DNS name has at most 253).
        public var maxSourceHostBytes: Int
        /// Largest `application` in UTF-8 bytes.
        public var maxApplicationBytes: Int

        public init(
            maxStreamNameBytes: Int = 255, maxAuthTokenBytes: Int = 1024, maxMagicCookieBytes: Int = 65_536,
            maxSourceHostBytes: Int = 255, maxApplicationBytes: Int = 255
        ) {
            self.maxStreamNameBytes = maxStreamNameBytes
            self.maxAuthTokenBytes = maxAuthTokenBytes
            self.maxMagicCookieBytes = maxMagicCookieBytes
            self.maxSourceHostBytes = maxSourceHostBytes
            self.maxApplicationBytes = maxApplicationBytes
        }
    }

    /// Checks a Hello: version, stream id (16 bytes), field lengths, format, cookie and priming
    /// rules, and the range of every number (PROTOCOL.md §6.1.4), so that nothing the receiver
    /// computes from an accepted Hello can overflow.
    public init(_ hello: Capture_V1_Hello, limits: Limits = Limits()) throws(WireError) {
        guard hello.protocolVersion == UInt32(WireProtocol.version) else {
            throw .unsupportedVersion(received: hello.protocolVersion, supported: UInt32(WireProtocol.version))
        }
        guard hello.streamID.count == WireProtocol.streamIDLength else {
            throw .invalidField(
                message: .hello, field: "stream_id",
                reason: "\(hello.streamID.count) bytes; a stream id is a 16-byte UUID")
        }
        try Self.checkLength(hello.streamName.utf8.count, limit: limits.maxStreamNameBytes, field: "stream_name")
        try Self.checkLength(hello.authToken.utf8.count, limit: limits.maxAuthTokenBytes, field: "auth_token")
        try Self.checkLength(hello.magicCookie.count, limit: limits.maxMagicCookieBytes, field: "magic_cookie")
        try Self.checkLength(hello.sourceHost.utf8.count, limit: limits.maxSourceHostBytes, field: "source_host")
        try Self.checkLength(hello.application.utf8.count, limit: limits.maxApplicationBytes, field: "application")
        try Self.checkNumbers(hello)
        guard hello.resumeSecret.isEmpty || WireProtocol.resumeSecretLengths.contains(hello.resumeSecret.count) else {
            throw .invalidField(
                message: .hello, field: "resume_secret",
                reason: "\(hello.resumeSecret.count) bytes; a resume secret is \(WireProtocol.resumeSecretLengths.lowerBound) to \(WireProtocol.resumeSecretLengths.upperBound) random bytes")
        }
        if hello.hasContinues {
            guard hello.continues.streamID.count == WireProtocol.streamIDLength, hello.continues.streamID != hello.streamID else {
                throw .invalidField(message: .hello, field: "continues.stream_id", reason: "a continued stream is named by another 16-byte stream id")
            }
            guard hello.continues.firstSequence >= WireProtocol.firstSequence, hello.continues.firstSequence <= WireProtocol.maximumSequence,
                  hello.continues.firstSequence == max(hello.resumeFromSequence, 1)
            else {
                throw .invalidField(
                    message: .hello, field: "continues.first_sequence",
                    reason: "\(hello.continues.firstSequence); a continuing stream starts at the oldest sequence its sender holds (resume_from_sequence \(hello.resumeFromSequence))")
            }
            if hello.continues.hasLostFromSampleTime {
                let lostFrom = hello.continues.lostFromSampleTime
                guard lostFrom >= 0, lostFrom < hello.startSampleTime else {
                    throw .invalidField(
                        message: .hello, field: "continues.lost_from_sample_time",
                        reason: "\(lostFrom); the lost audio lies before the stream's first frame (start_sample_time \(hello.startSampleTime)) and at or after sample 0")
                }
            }
        }
        guard hello.hasFormat else { throw .missingFormat }
        let format = try StreamFormat(wire: hello.format)
        if format.isLinearPCM {
            guard hello.magicCookie.isEmpty else {
                throw .invalidField(message: .hello, field: "magic_cookie", reason: "linear PCM has no magic cookie")
            }
            guard hello.primingFrames == 0 else {
                throw .invalidField(message: .hello, field: "priming_frames", reason: "linear PCM has no priming frames")
            }
        }
        if format.formatID == .opus {
            try Self.checkOpus(hello, format: format)
        }
        if hello.hasChannelLayout {
            try Self.checkChannelLayout(hello.channelLayout, channels: format.channelCount)
        }
        if hello.hasCapture {
            guard let captureID = UUID(wireBytes: hello.capture.captureID) else {
                throw .invalidField(message: .hello, field: "capture.capture_id", reason: "\(hello.capture.captureID.count) bytes; a capture id is 16 bytes (a UUID)")
            }
            let encoding = hello.capture.encoding
            guard (1...64).contains(encoding.utf8.count), encoding.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw .invalidField(message: .hello, field: "capture.encoding", reason: "an encoding label is 1 to 64 bytes of printable ASCII without spaces, like opus-64k-20ms")
            }
            capture = CaptureOfStream(id: captureID, encoding: encoding)
        } else {
            capture = nil
        }
        guard let uuid = UUID(wireBytes: hello.streamID) else { throw .sendOutOfOrder("the stream id was checked to be 16 bytes") }
        self.message = hello
        self.streamID = uuid
        self.format = format
        // Within the checked ranges: at most 2^53 + 3.2e9 × 192,000 (< 2^54).
        timelineEnd = hello.startSampleTime + WireProtocol.maximumTimelineSeconds * Int64(format.sampleRate.rounded(.down))
    }

    /// The numbers of a Hello within the ranges PROTOCOL.md §6.1.4 gives and explains: a start time
    /// from 1970 to 2100, a start sample time from 0 to 2^53, sequences at most 2^62.
    private static func checkNumbers(_ hello: Capture_V1_Hello) throws(WireError) {
        guard (0...WireProtocol.latestStartTimeUnixNanoseconds).contains(hello.startTimeUnixNs) else {
            throw .invalidField(
                message: .hello, field: "start_time_unix_ns",
                reason: "\(hello.startTimeUnixNs) is not a time from 1970-01-01 to 2100-01-01T00:00:00Z (0 to \(WireProtocol.latestStartTimeUnixNanoseconds) ns)")
        }
        guard (0...WireProtocol.maximumStartSampleTime).contains(hello.startSampleTime) else {
            throw .invalidField(
                message: .hello, field: "start_sample_time",
                reason: "\(hello.startSampleTime) is not a sample index from 0 to 2^53 (\(WireProtocol.maximumStartSampleTime))")
        }
        guard hello.resumeFromSequence <= WireProtocol.maximumSequence else {
            throw .invalidField(
                message: .hello, field: "resume_from_sequence",
                reason: "\(hello.resumeFromSequence) is beyond 2^62 (\(WireProtocol.maximumSequence)), the largest sequence a stream may hold")
        }
    }

    /// Opus (PROTOCOL.md §11.2): whole Opus frames per packet (2.5 ms steps, at most 120 ms), a
    /// priming of at most a second, and an OpusHead that matches the format, required for 3–8
    /// channels (their channel mapping is nowhere else).
    private static func checkOpus(_ hello: Capture_V1_Hello, format: StreamFormat) throws(WireError) {
        let framesPerPacket = format.framesPerPacket
        guard framesPerPacket % 120 == 0, framesPerPacket <= 5_760 else {
            throw .invalidField(
                message: .hello, field: "format.frames_per_packet",
                reason: "\(framesPerPacket) frames is no Opus packet: a multiple of 120 (2.5 ms at 48 kHz) up to 5760 (120 ms)")
        }
        guard hello.primingFrames <= 48_000 else {
            throw .invalidField(message: .hello, field: "priming_frames", reason: "\(hello.primingFrames) frames; Opus priming is at most 48000 (1 s)")
        }
        let channels = Int(format.channelsPerFrame)
        let cookie = [UInt8](hello.magicCookie)
        guard !cookie.isEmpty else {
            guard channels <= 2 else {
                throw .invalidField(
                    message: .hello, field: "magic_cookie",
                    reason: "\(channels)-channel Opus needs its OpusHead (RFC 7845 channel mapping family 1): the channel mapping is nowhere else")
            }
            return
        }
        func invalid(_ reason: String) -> WireError { .invalidField(message: .hello, field: "magic_cookie", reason: reason) }
        guard cookie.count >= 19, cookie.starts(with: Array("OpusHead".utf8)), (1...15).contains(cookie[8]) else {
            throw invalid("not an RFC 7845 OpusHead (magic \"OpusHead\", version 1, at least 19 bytes)")
        }
        guard Int(cookie[9]) == channels else {
            throw invalid("the OpusHead has \(cookie[9]) channels but the format \(channels)")
        }
        switch cookie[18] {
        case 0:
            guard channels <= 2, cookie.count == 19 else { throw invalid("channel mapping family 0 is for 1 or 2 channels, in 19 bytes") }
        case 1:
            guard cookie.count == 21 + channels else { throw invalid("channel mapping family 1 needs \(21 + channels) bytes, not \(cookie.count)") }
            let streams = Int(cookie[19]), coupled = Int(cookie[20])
            guard streams >= 1, coupled <= streams, streams + coupled <= 255,
                  cookie[21...].allSatisfy({ $0 == 255 || Int($0) < streams + coupled })
            else { throw invalid("the channel mapping table names streams that do not exist") }
        default:
            throw invalid("channel mapping family \(cookie[18]) is not one this receiver stores (0 or 1)")
        }
    }

    /// Core Audio's tag for a layout given as a channel bitmap (`kAudioChannelLayoutTag_UseChannelBitmap`).
    public static let channelBitmapLayoutTag: UInt32 = 0x10000

    /// A channel layout (PROTOCOL.md §6.1.3) must describe exactly the format's channels: a bitmap
    /// with one bit per channel, or a predefined Core Audio tag whose low 16 bits are the channel count.
    private static func checkChannelLayout(_ layout: Capture_V1_ChannelLayout, channels: Int) throws(WireError) {
        if layout.tag == channelBitmapLayoutTag {
            guard layout.bitmap.nonzeroBitCount == channels, layout.bitmap < (1 << 18) else {
                throw .invalidField(
                    message: .hello, field: "channel_layout.bitmap",
                    reason: "0x\(String(layout.bitmap, radix: 16)) names \(layout.bitmap.nonzeroBitCount) channels (of the 18 defined) but the format has \(channels)")
            }
            return
        }
        guard layout.tag > channelBitmapLayoutTag, Int(layout.tag & 0xFFFF) == channels, layout.bitmap == 0 else {
            throw .invalidField(
                message: .hello, field: "channel_layout.tag",
                reason: "0x\(String(layout.tag, radix: 16)) is no Core Audio layout tag for \(channels) channels (a predefined tag's low 16 bits are its channel count; 0x10000 takes a bitmap)")
        }
    }

    private static func checkLength(_ count: Int, limit: Int, field: String) throws(WireError) {
        guard count <= limit else {
            throw .invalidField(message: .hello, field: field, reason: "\(count) bytes exceeds the limit of \(limit) bytes")
        }
    }
}

extension UUID {
    /// The 16 bytes of the UUID, as `Hello.stream_id` carries them.
    public var wireBytes: Data {
        withUnsafeBytes(of: uuid) { Data($0) }
    }

    /// The UUID of 16 wire bytes (`Hello.stream_id`); nil for any other length.
    public init?(wireBytes id: Data) {
        guard id.count == WireProtocol.streamIDLength else { return nil }
        let b = Array(id)
        self.init(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}
