import CAF
import CSndFile
import CaptureCore
import CaptureErrorText
import Foundation

/// One file of a local copy, written from the copy's writer thread only.
protocol LocalCopyFile: AnyObject {
    /// Appends `frames` frames of the capture's PCM.
    func append(_ bytes: UnsafeRawBufferPointer, frames: Int) throws(LocalCopyFailure)
    /// Appends `frames` frames of silence.
    func appendSilence(frames: Int64) throws(LocalCopyFailure)
    /// Records a gap of `length` frames (not captured) beginning at `position`, a frame of this file.
    func markGap(at position: Int64, length: Int64, reason: String) throws(LocalCopyFailure)
    /// Finishes the file (sizes, markers) and closes it.
    func finish() throws(LocalCopyFailure)
    /// Closes the file as it is (after a failure).
    func abandon()
}

/// Why writing a local copy stopped: the message names the file and the cause.
struct LocalCopyFailure: Error, Equatable {
    var reason: String
}

/// A CAF file through `CAFWriter`, each buffer written at once (no write-behind) and followed by the
/// data chunk's size (`publishDataSize`), so that after a crash the file holds every buffer the copy
/// took and says so: ffmpeg and libsndfile (which refuses a size of -1) read it as it is, and
/// `capture-recv recover` finishes it (the gap markers from its journal).
final class CAFLocalCopyFile: LocalCopyFile {
    private let writer: CAFWriter
    private let path: String

    init(path: String, format: StreamFormat, info: [(key: String, value: String)]) throws(LocalCopyError) {
        do throws(CAFError) {
            writer = try CAFWriter(path: path, format: format, info: info, synchronizing: false)
        } catch {
            throw .cannotCreate(path: path, reason: error.description)
        }
        self.path = path
    }

    func append(_ bytes: UnsafeRawBufferPointer, frames: Int) throws(LocalCopyFailure) {
        do throws(CAFError) {
            try writer.append(bytes, packetSizes: [], frameCount: frames)
            try writer.publishDataSize()
        } catch {
            throw LocalCopyFailure(reason: error.description)
        }
    }

    func appendSilence(frames: Int64) throws(LocalCopyFailure) {
        do throws(CAFError) {
            try writer.appendSilence(frameCount: frames)
            try writer.publishDataSize()
        } catch {
            throw LocalCopyFailure(reason: error.description)
        }
    }

    func markGap(at position: Int64, length: Int64, reason: String) throws(LocalCopyFailure) {
        do throws(CAFError) {
            _ = try writer.addMarker(framePosition: position, name: CAFMarker.gapName(length: length, reason: reason))
        } catch {
            throw LocalCopyFailure(reason: error.description)
        }
    }

    func finish() throws(LocalCopyFailure) {
        do throws(CAFError) { try writer.finalize() } catch { throw LocalCopyFailure(reason: error.description) }
    }

    /// Leaves the file as a crash would, but without what a failed write left past the audio
    /// (its published size then covers every byte of audio).
    func abandon() {
        try? writer.discardUnwrittenTail()
        writer.close()
    }
}

/// A WAV or FLAC file through libsndfile. WAV's header is rewritten with every write
/// (`SFC_SET_UPDATE_HEADER_AUTO`), so a crash leaves a file whose sizes count every buffer written;
/// FLAC frames are complete as they are written (a crash leaves a stream without its total length,
/// which decoders read to its end). Gaps are silence; these files carry no gap markers.
final class SoundFileLocalCopyFile: LocalCopyFile {
    private let handle: OpaquePointer
    private let path: String
    private let sample: PCMSampleFormat
    private let channels: Int
    private var ints: [Int32] = []
    private var floats: [Float] = []
    /// Silence for `appendSilence`, made at its first use.
    private var zeros: [Int32] = []
    private var closed = false

    init(path: String, format: StreamFormat, container: LocalCopySettings.Container) throws(LocalCopyError) {
        guard let sample = format.pcmSampleFormat else { throw .unsupportedFormat("the local copy takes linear PCM") }
        let subtype: Int32
        switch sample {
        case .s16: subtype = Int32(SF_FORMAT_PCM_16)
        case .s24: subtype = Int32(SF_FORMAT_PCM_24)
        case .s32: subtype = Int32(SF_FORMAT_PCM_32)
        case .f32: subtype = Int32(SF_FORMAT_FLOAT)
        }
        let major = container == .flac ? Int32(SF_FORMAT_FLAC) : Int32(format.channelCount > 2 ? SF_FORMAT_WAVEX : SF_FORMAT_WAV)
        var info = SF_INFO(frames: 0, samplerate: Int32(format.sampleRate.rounded()), channels: Int32(format.channelCount), format: major | subtype, sections: 0, seekable: 0)
        if FileManager.default.fileExists(atPath: path) {
            throw .cannotCreate(path: path, reason: "the file exists (a local copy never overwrites one)")
        }
        errno = 0
        guard let handle = sf_open(path, Int32(SFM_WRITE), &info) else {
            let reason = errno != 0 ? SystemErrorText.errno(errno) : String(cString: sf_strerror(nil))
            throw .cannotCreate(path: path, reason: reason)
        }
        if container == .wav { sf_command(handle, Int32(SFC_SET_UPDATE_HEADER_AUTO), nil, Int32(SF_TRUE)) }
        self.handle = handle
        self.path = path
        self.sample = sample
        self.channels = format.channelCount
    }

    deinit { if !closed { sf_close(handle) } }

    func append(_ bytes: UnsafeRawBufferPointer, frames: Int) throws(LocalCopyFailure) {
        let count = frames * channels
        let written: sf_count_t
        switch sample {
        case .f32:
            floats.removeAll(keepingCapacity: true)
            for index in 0..<count { floats.append(Float(bitPattern: UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self)))) }
            written = floats.withUnsafeBufferPointer { sf_writef_float(handle, $0.baseAddress, sf_count_t(frames)) }
        case .s16, .s24, .s32:
            ints.removeAll(keepingCapacity: true)
            for index in 0..<count { ints.append(Self.leftJustified(bytes, index: index, sample: sample)) }
            written = ints.withUnsafeBufferPointer { sf_writef_int(handle, $0.baseAddress, sf_count_t(frames)) }
        }
        try check(written, frames: Int64(frames))
    }

    func appendSilence(frames: Int64) throws(LocalCopyFailure) {
        var left = frames
        let chunk = 4_096
        if zeros.isEmpty { zeros = [Int32](repeating: 0, count: chunk * channels) }
        while left > 0 {
            let now = Int(min(Int64(chunk), left))
            let written = zeros.withUnsafeBufferPointer { sf_writef_int(handle, $0.baseAddress, sf_count_t(now)) }
            try check(written, frames: Int64(now))
            left -= Int64(now)
        }
    }

    func markGap(at position: Int64, length: Int64, reason: String) throws(LocalCopyFailure) {}

    func finish() throws(LocalCopyFailure) {
        closed = true
        let result = sf_close(handle)
        guard result == 0 else { throw LocalCopyFailure(reason: "closing \(path): \(String(cString: sf_error_number(result)))") }
    }

    func abandon() {
        guard !closed else { return }
        closed = true
        sf_close(handle)
    }

    private func check(_ written: sf_count_t, frames: Int64) throws(LocalCopyFailure) {
        guard Int64(written) == frames else {
            let detail = String(cString: sf_strerror(handle))
            let folder = (path as NSString).deletingLastPathComponent
            throw LocalCopyFailure(reason: "writing \(path): \(errno == ENOSPC ? "the disk is full: free space in \(folder)" : detail)")
        }
    }

    /// Sample `index` of `bytes` as a 32-bit integer with its bits at the top, as `sf_writef_int` takes it.
    private static func leftJustified(_ bytes: UnsafeRawBufferPointer, index: Int, sample: PCMSampleFormat) -> Int32 {
        switch sample {
        case .s16:
            return Int32(Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))) << 16
        case .s24:
            let offset = index * 3
            let value = UInt32(bytes[offset]) << 8 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 24
            return Int32(bitPattern: value)
        case .s32, .f32:
            return Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))
        }
    }
}
