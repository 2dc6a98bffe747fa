/// The fixed numbers of the capture streaming protocol, version 1 (proto/PROTOCOL.md).
public enum WireProtocol {
    /// The protocol version this build speaks; it travels in the preamble and in `Hello.protocol_version`.
    public static let version: UInt8 = 1
    /// The seven ASCII bytes `CAPSTRM` that open every connection, followed by the version byte.
    public static let magic: [UInt8] = Array("CAPSTRM".utf8)
    /// Bytes in the connection preamble: the magic and one version byte.
    public static let preambleLength = 8
    /// Bytes before a frame's body: the 4-byte big-endian length and the type byte.
    public static let frameHeaderLength = 5
    /// The default largest accepted frame length (the value of the length field: type byte + body),
    /// 1 MiB of audio plus 64 KiB for the message fields around it.
    public static let defaultMaxFrameBytes = 1_048_576 + 65_536
    /// The largest first frame (the Hello) a receiver reads before the stream is authenticated:
    /// a 64 KiB magic cookie and 16 KiB for every other field. A peer cannot make the receiver
    /// buffer a megabyte per unauthenticated connection.
    public static let maxHelloFrameBytes = 65_536 + 16_384
    /// Bytes in `Hello.stream_id` (a UUID).
    public static let streamIDLength = 16
    /// The sizes a Hello's `resume_secret` may have, in bytes (PROTOCOL.md §6.1.1); capture-send makes 32.
    public static let resumeSecretLengths = 16...64
    /// The largest sequence a stream may start at (`Hello.continues.first_sequence`): far beyond any
    /// real stream (2^62 messages), and far from the end of the counter, so no sequence can overflow.
    public static let maximumSequence: UInt64 = 1 << 62
    /// The latest start a Hello may state (`start_time_unix_ns`): 2100-01-01T00:00:00Z. With the
    /// longest timeline (`maximumTimelineSeconds`) every time a receiver computes stays below
    /// 2200, far inside Int64 nanoseconds (which end in 2262), and names a file with a four-digit
    /// year (PROTOCOL.md §6.1.4).
    public static let latestStartTimeUnixNanoseconds: Int64 = 4_102_444_800 * 1_000_000_000
    /// The largest `start_sample_time`: 2^53, so that every position of a stream is exactly a
    /// Double too, and far from Int64's end (PROTOCOL.md §6.1.4).
    public static let maximumStartSampleTime: Int64 = 1 << 53
    /// The longest a stream's sample timeline may run past its Hello's `start_sample_time`: 100
    /// years of 365.25 days, in seconds at the stream's sample rate (PROTOCOL.md §6.1.4).
    public static let maximumTimelineSeconds: Int64 = 3_155_760_000
    /// The first sequence number of a stream; sequence 0 means "nothing" in acks.
    public static let firstSequence: UInt64 = 1
    /// The longest marker label, in UTF-8 bytes (PROTOCOL.md §6.10).
    public static let maximumMarkerLabelBytes = 255
    /// The frame types a receiver of this version accepts beyond version 1's first nine; it lists
    /// them in `HelloAccepted.accepted_frame_types` (PROTOCOL.md §12).
    public static let extendedFrameTypes: [WireMessageType] = [.marker, .filledGap]
    /// How often each side sends a Heartbeat when it has sent nothing else.
    public static let heartbeatInterval: Duration = .seconds(5)
    /// Silence after which a peer declares the connection dead.
    public static let peerSilenceTimeout: Duration = .seconds(20)
    /// Time from TCP connect to HelloAccepted after which the receiver closes the connection.
    public static let handshakeTimeout: Duration = .seconds(10)
}

/// Which end of a connection this code runs at.
public enum WireRole: Sendable, Equatable {
    /// The end that sends the stream (capture-send): it writes the preamble and reads only frames.
    case sender
    /// The end that receives the stream (capture-recv): it reads and checks the preamble first.
    case receiver
}
