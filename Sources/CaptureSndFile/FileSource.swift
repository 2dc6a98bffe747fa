import CSndFile
import CaptureCore

/// A capture source that reads an audio file (WAV, AIFF, FLAC, CAF and the other formats libsndfile
/// reads) in the file's own sample format, paced in real time like a device unless asked not to be.
///
/// 16-bit files are delivered as s16, 24-bit as s24, 32-bit integer as s32, float as f32; 8-bit files
/// are widened to s16 (exactly). Double-precision files are delivered as f32 (the only lossy case).
public final class FileSource: AudioSource {
    public let format: StreamFormat
    public var isRealTime: Bool { paced }
    /// Frames in the file.
    public let fileFrames: Int64
    /// The file's path.
    public let path: String
    /// The file's channel layout, when it has one that a channel mask can say (a WAVE_FORMAT_EXTENSIBLE
    /// mask, or the channel map of a CAF, AIFF or FLAC file): the channels' positions in ascending order.
    public let channelLayout: ChannelLayout?

    private let paced: Bool
    private let sample: PCMSampleFormat
    private let channels: Int
    private var file: OpaquePointer?
    private var pacer: RealTimePacer
    /// Frames to read at most (the file's length or a requested duration).
    private let frameLimit: Int64
    private var framesRead: Int64 = 0
    /// 32-bit scratch for 24-bit files, which libsndfile reads left-justified in an int; a read
    /// goes through it in pieces of `wideScratchFrames`, small enough to stay in the CPU's cache.
    private let wideScratch: UnsafeMutablePointer<Int32>
    private let wideScratchFrames: Int
    private static let wideScratchPiece = 4_096
    /// The file's samples are stored exactly as they are delivered (little-endian PCM or float in an
    /// uncompressed container): they are read as raw bytes, with no conversion.
    private let readsRaw: Bool

    /// Opens `path`; reads at most `duration` of audio when given.
    ///
    /// - Parameters:
    ///   - path: the audio file.
    ///   - paced: deliver at the pace of real time (default), or as fast as the queue takes it.
    ///   - duration: stop after this much audio (the whole file when `nil`; nothing when zero or less).
    public init(path: String, paced: Bool = true, duration: Duration? = nil) throws(CaptureError) {
        var info = SF_INFO()
        guard let handle = sf_open(path, Int32(SFM_READ), &info) else {
            let reason = String(cString: sf_strerror(nil))
            throw .openFailed("cannot open audio file \(path): \(reason); check the path and that it is WAV, AIFF, FLAC, CAF or another format libsndfile reads")
        }
        let subtype = info.format & Int32(SF_FORMAT_SUBMASK)
        let chosen: PCMSampleFormat
        switch subtype {
        case Int32(SF_FORMAT_PCM_S8), Int32(SF_FORMAT_PCM_U8), Int32(SF_FORMAT_PCM_16): chosen = .s16
        case Int32(SF_FORMAT_PCM_24): chosen = .s24
        case Int32(SF_FORMAT_PCM_32): chosen = .s32
        case Int32(SF_FORMAT_FLOAT), Int32(SF_FORMAT_DOUBLE): chosen = .f32
        default: chosen = .s16  // compressed or companded files decode to 16 bits of resolution or less
        }
        let format = StreamFormat.linearPCM(sampleRate: Double(info.samplerate), channels: Int(info.channels), sample: chosen)
        do { try format.validate() } catch {
            sf_close(handle)
            throw .unsupportedFormat("audio file \(path) cannot be streamed: \(error.description)")
        }
        self.path = path
        self.format = format
        self.paced = paced
        self.sample = chosen
        self.channels = Int(info.channels)
        self.file = handle
        self.fileFrames = Int64(info.frames)
        self.channelLayout = Self.channelLayout(of: handle, channels: Int(info.channels))
        if let duration {
            // Compared as a Double first: a duration beyond the file is the whole file.
            let wanted = (duration.inSeconds * Double(info.samplerate)).rounded()
            frameLimit = wanted < Double(info.frames) ? Int64(max(wanted, 0)) : Int64(info.frames)
        } else {
            frameLimit = Int64(info.frames)
        }
        pacer = RealTimePacer(sampleRate: Double(info.samplerate))
        readsRaw = Self.storesDeliveredBytes(handle, format: info.format)
        wideScratchFrames = chosen == .s24 ? Self.wideScratchPiece : 0
        wideScratch = UnsafeMutablePointer<Int32>.allocate(capacity: max(wideScratchFrames * Int(info.channels), 1))
    }

    /// Whether the file stores its samples as the bytes this source delivers: 16-, 24- or 32-bit
    /// integers or 32-bit floats, little-endian, in a container without compression (WAV, WAVE
    /// extensible, W64, RF64, AIFF-C, CAF).
    private static func storesDeliveredBytes(_ handle: OpaquePointer, format: Int32) -> Bool {
        let containers = [SF_FORMAT_WAV, SF_FORMAT_WAVEX, SF_FORMAT_W64, SF_FORMAT_RF64, SF_FORMAT_AIFF, SF_FORMAT_CAF].map { Int32($0) }
        let encodings = [SF_FORMAT_PCM_16, SF_FORMAT_PCM_24, SF_FORMAT_PCM_32, SF_FORMAT_FLOAT].map { Int32($0) }
        guard containers.contains(format & Int32(SF_FORMAT_TYPEMASK)), encodings.contains(format & Int32(SF_FORMAT_SUBMASK)) else { return false }
        return sf_command(handle, Int32(SFC_RAW_DATA_NEEDS_ENDSWAP), nil, 0) == Int32(SF_FALSE)
    }

    /// The file's channel map as a channel mask layout (`SndFileChannelMask`); nil without one.
    private static func channelLayout(of handle: OpaquePointer, channels: Int) -> ChannelLayout? {
        var map = [Int32](repeating: 0, count: channels)
        let known = map.withUnsafeMutableBytes { sf_command(handle, Int32(SFC_GET_CHANNEL_MAP_INFO), $0.baseAddress, Int32($0.count)) }
        guard known == Int32(SF_TRUE), let mask = SndFileChannelMask.mask(of: map) else { return nil }
        return ChannelLayout(channelMask: mask)
    }

    deinit {
        close()
        wideScratch.deallocate()
    }

    public func start() throws(CaptureError) { pacer.start() }

    public func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        guard let file else { throw .readFailed("audio file \(path) is closed") }
        let wanted = Int(min(Int64(frameCapacity), frameLimit - framesRead))
        guard wanted > 0, let base = buffer.baseAddress else { return .endOfStream }
        let got: Int
        switch sample {
        case _ where readsRaw:
            // libsndfile stops raw reads at the end of the audio data, as it does frame reads.
            let frameBytes = channels * sample.bytesPerSample
            let bytes = Int(sf_read_raw(file, base, sf_count_t(wanted * frameBytes)))
            got = bytes > 0 ? bytes / frameBytes : bytes
        case .s16:
            got = Int(sf_readf_short(file, base.assumingMemoryBound(to: Int16.self), sf_count_t(wanted)))
        case .s32:
            got = Int(sf_readf_int(file, base.assumingMemoryBound(to: Int32.self), sf_count_t(wanted)))
        case .f32:
            got = Int(sf_readf_float(file, base.assumingMemoryBound(to: Float.self), sf_count_t(wanted)))
        case .s24:
            got = readPacked24(file, into: buffer, frames: wanted)
        }
        if got <= 0 {
            let code = sf_error(file)
            if code != 0 {
                throw .readFailed("reading \(path) failed: \(String(cString: sf_error_number(code)))")
            }
            return .endOfStream
        }
        framesRead += Int64(got)
        if paced { pacer.waitForFrames(got) }
        return .frames(got)
    }

    /// Reads up to `frames` frames of 24-bit samples (left-justified in 32 bits by libsndfile), piece
    /// by piece through the scratch, and packs them into 3 bytes each. Returns the frames read, or
    /// libsndfile's result when the first piece fails.
    private func readPacked24(_ file: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer, frames: Int) -> Int {
        var total = 0
        var offset = 0
        while total < frames {
            let got = Int(sf_readf_int(file, wideScratch, sf_count_t(min(frames - total, wideScratchFrames))))
            guard got > 0 else { return total > 0 ? total : got }
            for index in 0..<(got * channels) {
                let value = UInt32(bitPattern: wideScratch[index]) >> 8
                buffer[offset] = UInt8(truncatingIfNeeded: value)
                buffer[offset + 1] = UInt8(truncatingIfNeeded: value >> 8)
                buffer[offset + 2] = UInt8(truncatingIfNeeded: value >> 16)
                offset += 3
            }
            total += got
        }
        return total
    }

    public func stop() {}

    public func close() {
        if let file {
            sf_close(file)
            self.file = nil
        }
    }
}
