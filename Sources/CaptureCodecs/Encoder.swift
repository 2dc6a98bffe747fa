import CaptureCore

/// Packets an encoder produced from captured audio, ready for the packet log.
public struct EncodedPackets: Equatable, Sendable {
    /// The packets, back to back.
    public var payload: [UInt8]
    /// Number of packets (for PCM, frames).
    public var packetCount: Int
    /// The size of each packet, for variable bit rate formats; empty for CBR.
    public var packetSizes: [UInt32]
    /// Index of the first frame on the output format's timeline.
    public var firstSampleTime: Int64
    /// Frames the packets decode to, in the output format.
    public var frameCount: Int

    public init(payload: [UInt8], packetCount: Int, packetSizes: [UInt32], firstSampleTime: Int64, frameCount: Int) {
        self.payload = payload
        self.packetCount = packetCount
        self.packetSizes = packetSizes
        self.firstSampleTime = firstSampleTime
        self.frameCount = frameCount
    }
}

/// The end of an encoded stream: what `finish()` flushed and how the last packet was padded.
public struct EncoderTail: Equatable, Sendable {
    /// Packets still held by the encoder (a padded last frame), possibly none.
    public var packets: EncodedPackets?
    /// Padding frames at the end of the last packet (CAF `mRemainderFrames`); 0 for PCM.
    public var remainderFrames: Int

    public init(packets: EncodedPackets?, remainderFrames: Int) {
        self.packets = packets
        self.remainderFrames = remainderFrames
    }
}

/// The stage between the capture queue's callback and the packet log: turns captured PCM into the
/// packets that travel and are stored (PCM as it is, or Opus).
///
/// An encoder is used from the queue's delivery thread only; it may allocate.
public protocol AudioEncoder: AnyObject {
    /// The format the encoder accepts (the capture source's format).
    var inputFormat: StreamFormat { get }
    /// The format of the packets it produces, as the handshake and the CAF `desc` describe them.
    var outputFormat: StreamFormat { get }
    /// The codec configuration the decoder needs (the magic cookie); empty when none.
    var magicCookie: [UInt8] { get }
    /// Frames of encoder delay at the start of the stream (CAF `mPrimingFrames`); 0 for PCM.
    var primingFrames: Int { get }
    /// The largest packet the encoder can produce, in bytes.
    var maximumPacketSize: Int { get }

    /// Whether the packets themselves cover frames lost in an overrun or paused (as encoded silence),
    /// so that the caller must not record a Gap for them (a Gap would cover the same frames again and
    /// the receiver would refuse the stream) but a filled gap, which only labels them. True for Opus,
    /// false for PCM.
    var fillsLostFrames: Bool { get }

    /// A short name of the encoding, the same for encoders that produce the same packets from the
    /// same capture: `pcm-s16-48000`, `opus-64k-20ms`. It names the encoding's stream when a capture
    /// feeds several (`CaptureLink`).
    var encodingLabel: String { get }

    /// The position on the output timeline of the input (capture) timeline's `sampleTime`: the same
    /// for PCM, × 48000 / rate for Opus (rounded when that is not an integer).
    func outputSampleTime(ofInput sampleTime: Int64) -> Int64

    /// Encodes one captured buffer; returns the whole packets it completed (possibly none, when the
    /// buffer did not complete a frame).
    ///
    /// How frames lost or paused before the buffer (`framesLostBefore`, `framesPausedBefore`) show
    /// depends on the format: `PCMEncoder` returns each buffer at its own `startTime.sampleTime`, so
    /// `firstSampleTime` jumps over them and the caller records a gap of exactly those frames there;
    /// `OpusEncoder` encodes the stretch as silence (`fillsLostFrames`) so that its packets stay
    /// contiguous on the capture timeline (an Opus packet stream has no way to skip time), and the
    /// caller labels it with a filled gap. An encoder that fills lost frames also takes an empty
    /// buffer (a paused queue's report, `packetCount` 0): it fills up to the buffer's start.
    func encode(_ buffer: CapturedBuffer) throws(EncoderError) -> EncodedPackets?

    /// Ends the stream: pads and encodes any partial frame and reports the padding.
    func finish() throws(EncoderError) -> EncoderTail
}

/// Why encoding could not be set up or go on. Each message says what to do.
public enum EncoderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The settings cannot work with this input (rate, channels, bitrate...).
    case invalidConfiguration(String)
    /// The codec library reported an error.
    case codecFailed(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let message), .codecFailed(let message): return message
        }
    }
}
