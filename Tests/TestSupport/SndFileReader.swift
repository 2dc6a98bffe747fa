import CSndFile

/// An audio file as libsndfile reads it: its description and its samples.
public struct SndFileAudio: Sendable {
    /// Frames libsndfile reports.
    public var frames: Int
    /// Frames per second.
    public var sampleRate: Int
    /// Channels.
    public var channels: Int
    /// The major format (`SF_FORMAT_CAF`, `SF_FORMAT_WAV`, ...): `format & SF_FORMAT_TYPEMASK`.
    public var majorFormat: Int32
    /// The sample encoding (`SF_FORMAT_PCM_16`, `SF_FORMAT_PCM_24`, `SF_FORMAT_FLOAT`, ...):
    /// `format & SF_FORMAT_SUBMASK`.
    public var subtype: Int32
    /// The byte order bits (`SF_FORMAT_ENDMASK`).
    public var endianness: Int32
    /// Interleaved samples read with `sf_readf_int`. libsndfile scales integers to the full 32-bit range:
    /// a 16-bit sample `s` reads as `s << 16`, a 24-bit one as `s << 8`. See `nativeIntegerSamples`.
    public var int32Samples: [Int32]
    /// Interleaved samples read with `sf_readf_float` (float files unscaled, so exact; integer files
    /// normalized to -1...1).
    public var floatSamples: [Float]

    /// Bits per sample for integer PCM subtypes; `nil` for others.
    public var integerBits: Int? {
        switch subtype {
        case Int32(SF_FORMAT_PCM_S8), Int32(SF_FORMAT_PCM_U8): return 8
        case Int32(SF_FORMAT_PCM_16): return 16
        case Int32(SF_FORMAT_PCM_24): return 24
        case Int32(SF_FORMAT_PCM_32): return 32
        default: return nil
        }
    }

    /// Integer samples at the file's own width (a 16-bit sample as -32768...32767), exactly as stored;
    /// `nil` for non-integer subtypes.
    public var nativeIntegerSamples: [Int32]? {
        guard let bits = integerBits else { return nil }
        return int32Samples.map { $0 >> Int32(32 - bits) }
    }
}

/// Why libsndfile could not read a file.
public struct SndFileError: Error, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "libsndfile cannot read \(path): \(message)" }
}

/// Reads audio files with libsndfile, an independent reader for checking files our code writes.
public enum SndFileReader {
    /// Opens `path` with libsndfile and reads its description and all its samples.
    public static func read(path: String) throws(SndFileError) -> SndFileAudio {
        var info = SF_INFO()
        guard let handle = sf_open(path, Int32(SFM_READ), &info) else {
            throw SndFileError(path: path, message: String(cString: sf_strerror(nil)))
        }
        defer { sf_close(handle) }
        let channels = Int(info.channels)
        let frames = Int(info.frames)
        var ints = [Int32](repeating: 0, count: frames * channels)
        let intFrames = ints.withUnsafeMutableBufferPointer { sf_readf_int(handle, $0.baseAddress, sf_count_t(frames)) }
        guard sf_seek(handle, 0, SEEK_SET) == 0 else {
            throw SndFileError(path: path, message: "cannot seek back to the start: \(String(cString: sf_strerror(handle)))")
        }
        var floats = [Float](repeating: 0, count: frames * channels)
        let floatFrames = floats.withUnsafeMutableBufferPointer { sf_readf_float(handle, $0.baseAddress, sf_count_t(frames)) }
        guard intFrames == frames, floatFrames == frames else {
            throw SndFileError(path: path, message: "it reports \(frames) frames but only \(intFrames) could be read")
        }
        return SndFileAudio(
            frames: frames, sampleRate: Int(info.samplerate), channels: channels,
            majorFormat: info.format & Int32(SF_FORMAT_TYPEMASK), subtype: info.format & Int32(SF_FORMAT_SUBMASK),
            endianness: info.format & Int32(SF_FORMAT_ENDMASK), int32Samples: ints, floatSamples: floats
        )
    }
}
