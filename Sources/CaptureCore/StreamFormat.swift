/// A four-character audio data format identifier, as `mFormatID` in Core Audio's
/// `AudioStreamBasicDescription` and in a CAF `desc` chunk (`'lpcm'`, `'opus'`).
public struct AudioFormatID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Creates an identifier from its four ASCII characters, for example `"lpcm"`.
    public init?(fourCC: String) {
        let bytes = Array(fourCC.utf8)
        guard bytes.count == 4 else { return nil }
        rawValue = bytes.reduce(0) { ($0 << 8) | UInt32($1) }
    }

    /// Linear PCM (`'lpcm'`).
    public static let linearPCM = AudioFormatID(rawValue: 0x6C70_636D)
    /// Opus (`'opus'`).
    public static let opus = AudioFormatID(rawValue: 0x6F70_7573)

    /// The four characters, or the hexadecimal value when they are not printable ASCII.
    public var description: String {
        let bytes = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: rawValue >> $0) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        return "0x" + String(rawValue, radix: 16)
    }
}

/// Format flags with the bit values of Core Audio's `AudioFormatFlags`
/// (`kAudioFormatFlagIsFloat` = 1, `IsBigEndian` = 2, `IsSignedInteger` = 4, `IsPacked` = 8,
/// `IsAlignedHigh` = 16, `IsNonInterleaved` = 32).
///
/// Note that a CAF `desc` chunk stores linear PCM flags with a different meaning
/// (bit 1 there is *little*-endian); the CAF module converts.
public struct AudioFormatFlags: OptionSet, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let isFloat = AudioFormatFlags(rawValue: 1 << 0)
    public static let isBigEndian = AudioFormatFlags(rawValue: 1 << 1)
    public static let isSignedInteger = AudioFormatFlags(rawValue: 1 << 2)
    public static let isPacked = AudioFormatFlags(rawValue: 1 << 3)
    public static let isAlignedHigh = AudioFormatFlags(rawValue: 1 << 4)
    public static let isNonInterleaved = AudioFormatFlags(rawValue: 1 << 5)
}

/// The sample encodings that capture-send carries as linear PCM: interleaved, packed, little-endian.
public enum PCMSampleFormat: String, CaseIterable, Sendable, CustomStringConvertible {
    /// 16-bit signed integer.
    case s16
    /// 24-bit signed integer, packed into 3 bytes.
    case s24
    /// 32-bit signed integer.
    case s32
    /// 32-bit IEEE float, nominal range -1...1.
    case f32

    /// Bits per sample.
    public var bitsPerChannel: Int {
        switch self {
        case .s16: return 16
        case .s24: return 24
        case .s32, .f32: return 32
        }
    }

    /// Bytes per sample.
    public var bytesPerSample: Int { bitsPerChannel / 8 }

    /// Whether samples are floating point.
    public var isFloat: Bool { self == .f32 }

    public var description: String { rawValue }
}

/// An audio stream's format, with the fields and meaning of Core Audio's `AudioStreamBasicDescription`.
///
/// It describes what the capture source really delivers, what travels in the handshake, and what a
/// CAF `desc` chunk stores. Linear PCM is constant bit rate (`bytesPerPacket` = `bytesPerFrame`,
/// one frame per packet); a variable bit rate format such as Opus has `bytesPerPacket` = 0 and a
/// fixed `framesPerPacket`.
public struct StreamFormat: Hashable, Sendable, CustomStringConvertible {
    /// Frames per second (`mSampleRate`).
    public var sampleRate: Double
    /// The data format (`mFormatID`).
    public var formatID: AudioFormatID
    /// Format flags (`mFormatFlags`), Core Audio meaning.
    public var formatFlags: AudioFormatFlags
    /// Bytes in a packet; 0 for variable packet sizes (`mBytesPerPacket`).
    public var bytesPerPacket: UInt32
    /// Frames in a packet; 1 for linear PCM (`mFramesPerPacket`).
    public var framesPerPacket: UInt32
    /// Bytes from one frame to the next; 0 for compressed formats (`mBytesPerFrame`).
    public var bytesPerFrame: UInt32
    /// Channels in a frame (`mChannelsPerFrame`).
    public var channelsPerFrame: UInt32
    /// Bits of sample data per channel; 0 for compressed formats (`mBitsPerChannel`).
    public var bitsPerChannel: UInt32

    /// Creates a format from all its fields; call `validate()` before relying on it.
    public init(
        sampleRate: Double, formatID: AudioFormatID, formatFlags: AudioFormatFlags,
        bytesPerPacket: UInt32, framesPerPacket: UInt32, bytesPerFrame: UInt32,
        channelsPerFrame: UInt32, bitsPerChannel: UInt32
    ) {
        self.sampleRate = sampleRate
        self.formatID = formatID
        self.formatFlags = formatFlags
        self.bytesPerPacket = bytesPerPacket
        self.framesPerPacket = framesPerPacket
        self.bytesPerFrame = bytesPerFrame
        self.channelsPerFrame = channelsPerFrame
        self.bitsPerChannel = bitsPerChannel
    }

    /// Interleaved, packed, little-endian linear PCM.
    public static func linearPCM(sampleRate: Double, channels: Int, sample: PCMSampleFormat) -> StreamFormat {
        let bytesPerFrame = UInt32(sample.bytesPerSample * channels)
        var flags: AudioFormatFlags = [.isPacked]
        flags.insert(sample.isFloat ? .isFloat : .isSignedInteger)
        return StreamFormat(
            sampleRate: sampleRate, formatID: .linearPCM, formatFlags: flags,
            bytesPerPacket: bytesPerFrame, framesPerPacket: 1, bytesPerFrame: bytesPerFrame,
            channelsPerFrame: UInt32(channels), bitsPerChannel: UInt32(sample.bitsPerChannel)
        )
    }

    /// Opus at 48 kHz (the rate Opus streams are always described at) with `framesPerPacket` frames a packet.
    public static func opus(channels: Int, framesPerPacket: Int) -> StreamFormat {
        StreamFormat(
            sampleRate: 48_000, formatID: .opus, formatFlags: [], bytesPerPacket: 0,
            framesPerPacket: UInt32(framesPerPacket), bytesPerFrame: 0,
            channelsPerFrame: UInt32(channels), bitsPerChannel: 0
        )
    }

    /// Whether this is linear PCM.
    public var isLinearPCM: Bool { formatID == .linearPCM }
    /// Whether packets vary in size and so need packet descriptions.
    public var isVariableBitRate: Bool { bytesPerPacket == 0 }
    /// Number of channels as an `Int`.
    public var channelCount: Int { Int(channelsPerFrame) }

    /// The PCM sample encoding, when this is interleaved, packed, little-endian linear PCM of a kind
    /// capture-send carries; `nil` otherwise.
    public var pcmSampleFormat: PCMSampleFormat? {
        guard isLinearPCM, !formatFlags.contains(.isBigEndian), !formatFlags.contains(.isNonInterleaved) else {
            return nil
        }
        if formatFlags.contains(.isFloat) { return bitsPerChannel == 32 ? .f32 : nil }
        guard formatFlags.contains(.isSignedInteger) else { return nil }
        switch bitsPerChannel {
        case 16: return .s16
        case 24: return bytesPerFrame == 3 * channelsPerFrame ? .s24 : nil
        case 32: return .s32
        default: return nil
        }
    }

    /// Checks that the fields are consistent and within what the system carries.
    public func validate() throws(StreamFormatError) {
        guard sampleRate.isFinite, sampleRate >= 8_000, sampleRate <= 192_000 else {
            throw .sampleRateOutOfRange(sampleRate)
        }
        guard channelsPerFrame >= 1, channelsPerFrame <= 8 else {
            throw .channelCountOutOfRange(Int(channelsPerFrame))
        }
        guard framesPerPacket >= 1 else { throw .inconsistent("frames per packet must be at least 1") }
        if isLinearPCM {
            guard pcmSampleFormat != nil else {
                throw .unsupportedPCM(bits: Int(bitsPerChannel), flags: formatFlags.rawValue)
            }
            let expectedFrame = UInt32(Int(bitsPerChannel) / 8) * channelsPerFrame
            guard bytesPerFrame == expectedFrame else {
                throw .inconsistent("bytes per frame is \(bytesPerFrame), expected \(expectedFrame) for \(channelsPerFrame) channels of \(bitsPerChannel) bits")
            }
            guard framesPerPacket == 1, bytesPerPacket == bytesPerFrame else {
                throw .inconsistent("linear PCM needs 1 frame per packet and bytes per packet equal to bytes per frame")
            }
        } else if formatID == .opus {
            guard bytesPerPacket == 0, bytesPerFrame == 0, bitsPerChannel == 0 else {
                throw .inconsistent("Opus is variable bit rate: bytes per packet, bytes per frame and bits per channel must be 0")
            }
            guard sampleRate == 48_000 else { throw .inconsistent("an Opus stream is described at 48000 Hz") }
        } else {
            throw .unsupportedFormatID(formatID)
        }
    }

    /// Seconds of audio in `frames` frames.
    public func seconds(frames: Int64) -> Double { Double(frames) / sampleRate }

    public var description: String {
        if let sample = pcmSampleFormat {
            return "\(sample) \(Int(sampleRate)) Hz \(channelsPerFrame) ch"
        }
        return "\(formatID) \(Int(sampleRate)) Hz \(channelsPerFrame) ch, \(framesPerPacket) frames/packet"
    }
}

/// Why a `StreamFormat` cannot be used.
public enum StreamFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case sampleRateOutOfRange(Double)
    case channelCountOutOfRange(Int)
    case unsupportedPCM(bits: Int, flags: UInt32)
    case unsupportedFormatID(AudioFormatID)
    case inconsistent(String)

    public var description: String {
        switch self {
        case .sampleRateOutOfRange(let rate):
            return "sample rate \(rate) Hz is out of range: use 8000 to 192000 Hz"
        case .channelCountOutOfRange(let count):
            return "\(count) channels is out of range: use 1 to 8 channels"
        case .unsupportedPCM(let bits, let flags):
            return "linear PCM with \(bits) bits and flags 0x\(String(flags, radix: 16)) is not supported: use s16, s24, s32 or f32, interleaved, little-endian"
        case .unsupportedFormatID(let id):
            return "audio format '\(id)' is not supported: use linear PCM or Opus"
        case .inconsistent(let why):
            return "inconsistent stream format: \(why)"
        }
    }
}
