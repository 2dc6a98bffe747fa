import CAF
import CaptureErrorText
import CSndFile
import CaptureSndFile
import Foundation

/// Writes a recording's valid audio through libsndfile as Broadcast Wave (WAV or RF64) or FLAC:
/// `bext` with the origination date and time and TimeReference (samples since UTC midnight) of the
/// first valid sample, gap markers and the markers the person recording dropped as `cue` points
/// (libsndfile) labelled by a `LIST`/`adtl` chunk of `labl`s (appended here: libsndfile 1.2 writes
/// cue points without their names; a dropped marker's label is its label), the channel mask from
/// the CAF's channel bitmap, and the times as text (`LIST`/`INFO` in WAV, Vorbis comments in FLAC,
/// where the dropped markers are chapters too: `ExportChapters`).
enum SoundFileExport {
    /// Sample format of the export (libsndfile subtype) for a recording. FLAC holds at most 24 bits:
    /// 32-bit integer and float recordings become 24-bit. Decoded Opus becomes 24-bit.
    static func subtype(for file: CAFFile, as format: ExportFormat) -> Int32 {
        guard file.format.isLinearPCM else { return Int32(SF_FORMAT_PCM_24) }
        let isFloat = file.format.formatFlags.contains(.isFloat)
        switch (Int(file.format.bitsPerChannel), isFloat, format) {
        case (16, false, _): return Int32(SF_FORMAT_PCM_16)
        case (24, false, _): return Int32(SF_FORMAT_PCM_24)
        case (_, _, .flac): return Int32(SF_FORMAT_PCM_24)
        case (32, false, _): return Int32(SF_FORMAT_PCM_32)
        default: return Int32(SF_FORMAT_FLOAT)
        }
    }

    /// Why libsndfile stopped writing: the system's reason when the system refused (a full disk,
    /// a quota), else libsndfile's error number.
    static func writeFailure(_ handle: OpaquePointer) -> String {
        let code = sf_error(handle)
        if code == Int32(SF_ERR_SYSTEM), errno != 0 { return SystemErrorText.errno(errno) }
        return "libsndfile stopped writing (error \(code))"
    }

    /// Writes `plan`'s audio to `path` (a temporary name), naming `destination` in errors.
    static func write(_ plan: ExportPlan, to path: String, destination: String) throws(ExportError) {
        let audio = try RecordingAudio(plan: plan)
        let file = plan.file
        let format = plan.format
        let facts = plan.facts
        func failed(_ reason: String) -> ExportError { .writeFailed("cannot write \(destination): \(reason)") }
        let bitmap = file.channelLayoutTag == 0x10000 ? file.channelBitmap : 0
        let major: Int32
        switch format {
        case .wav: major = Int32(audio.channels > 2 || bitmap != 0 ? SF_FORMAT_WAVEX : SF_FORMAT_WAV)
        case .rf64: major = Int32(SF_FORMAT_RF64)
        case .flac: major = Int32(SF_FORMAT_FLAC)
        case .ogg: throw .unsupported("Ogg is written by the Ogg Opus exporter")
        }
        // The plan admits 8 to 192 kHz and 1 to 8 channels.
        var info = SF_INFO(frames: 0, samplerate: Int32(audio.sampleRate), channels: Int32(audio.channels), format: major | subtype(for: file, as: format), sections: 0, seekable: 0)
        errno = 0
        guard let handle = sf_open(path, Int32(SFM_WRITE), &info) else {
            throw failed(errno != 0 ? SystemErrorText.errno(errno) : "the sound file cannot be created")
        }
        var closed = false
        defer { if !closed { sf_close(handle) } }
        sf_command(handle, Int32(SFC_SET_CLIPPING), nil, Int32(SF_TRUE))
        let timeReference = facts.timeReference(rate: audio.sampleRate)
        let summary = facts.summary(timeReference: timeReference)
        if format != .flac {
            var broadcast = SF_BROADCAST_INFO()
            fill(&broadcast.description, summary)
            fill(&broadcast.originator, "capture-recv")
            fill(&broadcast.originator_reference, facts.streamID.replacingOccurrences(of: "-", with: ""), terminated: false)
            if let (date, time) = facts.originationDateAndTime {
                fill(&broadcast.origination_date, date, terminated: false)
                fill(&broadcast.origination_time, time, terminated: false)
            }
            let reference = timeReference ?? 0
            broadcast.time_reference_low = UInt32(truncatingIfNeeded: reference)
            broadcast.time_reference_high = UInt32(truncatingIfNeeded: reference >> 32)
            broadcast.version = 2
            broadcast.loudness_value = 0x7FFF
            broadcast.loudness_range = 0x7FFF
            broadcast.max_true_peak_level = 0x7FFF
            broadcast.max_momentary_loudness = 0x7FFF
            broadcast.max_shortterm_loudness = 0x7FFF
            guard sf_command(handle, Int32(SFC_SET_BROADCAST_INFO), &broadcast, Int32(MemoryLayout<SF_BROADCAST_INFO>.size)) == Int32(SF_TRUE) else {
                throw failed("libsndfile refused the bext chunk (error \(sf_error(handle)))")
            }
        }
        let cues = cuePoints(file.markers, leadingFrames: audio.leadingFrames, validFrames: audio.validFrames)
        if format != .flac, !cues.isEmpty {
            var table = SF_CUES()
            table.cue_count = UInt32(cues.count)
            withUnsafeMutableBytes(of: &table.cue_points) { raw in
                let points = raw.bindMemory(to: SF_CUE_POINT.self)
                for (index, cue) in cues.enumerated() {
                    var point = SF_CUE_POINT()
                    point.indx = Int32(index + 1)
                    point.position = cue.position
                    point.fcc_chunk = Int32(bitPattern: 0x6174_6164)  // 'data', little-endian
                    point.sample_offset = cue.position
                    fill(&point.name, cue.name)
                    points[index] = point
                }
            }
            guard sf_command(handle, Int32(SFC_SET_CUE), &table, Int32(MemoryLayout<SF_CUES>.size)) == Int32(SF_TRUE) else {
                throw failed("libsndfile refused the cue points (error \(sf_error(handle)))")
            }
        }
        if bitmap != 0, format != .flac {
            var map = SndFileChannelMask.map(of: bitmap)
            if map.count == audio.channels {
                _ = map.withUnsafeMutableBytes { sf_command(handle, Int32(SFC_SET_CHANNEL_MAP_INFO), $0.baseAddress, Int32($0.count)) }
            }
        }
        setString(handle, SF_STR_TITLE, facts.title)
        setString(handle, SF_STR_SOFTWARE, "capture-recv export")
        if let iso = facts.isoTime { setString(handle, SF_STR_DATE, iso) }
        setString(handle, SF_STR_COMMENT, summary)
        while let piece = try audio.next() {
            let written: sf_count_t
            let expected: sf_count_t
            errno = 0
            switch piece {
            case .integers(var samples):
                expected = sf_count_t(samples.count)
                written = sf_write_int(handle, &samples, expected)
            case .floats(var samples):
                expected = sf_count_t(samples.count)
                written = sf_write_float(handle, &samples, expected)
            }
            guard written == expected else {
                throw failed(Self.writeFailure(handle))
            }
        }
        closed = true
        guard sf_close(handle) == 0 else { throw failed("libsndfile could not finish it") }
        if format == .flac {
            let chapters = ExportChapters.comments(file.markers, leadingFrames: audio.leadingFrames, validFrames: audio.validFrames, sampleRate: audio.sampleRate)
            try FLACComments.add(chapters, to: path, destination: destination)
        }
        if format != .flac, !cues.isEmpty {
            // libsndfile 1.2 writes the cue chunk for WAV only: an RF64 export gets it here.
            let cueChunk = format == .rf64 ? RIFFLabels.cueChunk(cues.map(\.position)) : []
            try RIFFLabels.append(cueChunk + RIFFLabels.chunk(labels(cues)), to: path, rf64: format == .rf64, destination: destination)
        }
    }

    /// The `labl` texts of the cue points, numbered from 1 as the cue points are.
    static func labels(_ cues: [(position: UInt32, name: String)]) -> [(id: UInt32, text: String)] {
        cues.enumerated().map { (UInt32($0.offset + 1), $0.element.name) }
    }

    /// Markers as cue points on the export's timeline (stored frames less `leadingFrames`), those
    /// inside the valid audio only; at most 100 (libsndfile's limit). A gap's is named as in the
    /// CAF; a marker the person recording dropped is named by its label (`marker` without one).
    static func cuePoints(_ markers: [CAFMarker], leadingFrames: Int64, validFrames: Int64) -> [(position: UInt32, name: String)] {
        markers.compactMap { marker in
            // The reader keeps positions in 0..<2^62 and priming is an Int32: no overflow.
            let position = marker.framePosition - leadingFrames
            guard position >= 0, position <= validFrames, position <= Int64(UInt32.max) else { return nil }
            let name = marker.userLabel.flatMap { $0.isEmpty ? nil : $0 } ?? marker.name
            return (UInt32(position), name)
        }.prefix(100).map { $0 }
    }

    private static func setString(_ handle: OpaquePointer, _ kind: Int, _ value: String) {
        guard !value.isEmpty else { return }
        _ = sf_set_string(handle, Int32(kind), value)
    }

    /// Copies `text` (UTF-8, truncated, NUL-padded) into a C character array; `terminated`: keep
    /// room for a final NUL (bext's fixed-width date, time and reference fields need none).
    static func fill<T>(_ field: inout T, _ text: String, terminated: Bool = true) {
        withUnsafeMutableBytes(of: &field) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            let bytes = Array(text.utf8.prefix(terminated ? raw.count - 1 : raw.count))
            raw.copyBytes(from: bytes)
        }
    }
}

/// The `LIST` chunk of type `adtl` with one `labl` per cue point, appended to a WAV or RF64 file
/// that libsndfile wrote and closed.
enum RIFFLabels {
    /// Bytes of a label's text at most (UTF-8, whole characters), as a cue point's name holds.
    static let maximumText = 255

    /// The `LIST` chunk of type `adtl` with one `labl` per label: at most 100 labels (the cue
    /// points) of at most 255 bytes each, however long the markers' names.
    static func chunk(_ labels: [(id: UInt32, text: String)]) -> [UInt8] {
        var body: [UInt8] = Array("adtl".utf8)
        for label in labels.prefix(100) {
            var text = Array(cut(label.text).utf8) + [0]
            let size = UInt32(4 + text.count)
            if text.count % 2 == 1 { text.append(0) }
            body += Array("labl".utf8) + le32(size) + le32(label.id) + text
        }
        return Array("LIST".utf8) + le32(UInt32(body.count)) + body
    }

    /// A `cue ` chunk with one cue point per position, numbered from 1, each in the `data` chunk at
    /// that sample (as libsndfile writes them in WAV).
    static func cueChunk(_ positions: [UInt32]) -> [UInt8] {
        var body = le32(UInt32(positions.count))
        for (index, position) in positions.enumerated() {
            body += le32(UInt32(index + 1)) + le32(position) + Array("data".utf8) + le32(0) + le32(0) + le32(position)
        }
        return Array("cue ".utf8) + le32(UInt32(body.count)) + body
    }

    /// `text` cut to at most `maximumText` bytes of UTF-8, at a character boundary.
    static func cut(_ text: String) -> String {
        var bytes = 0
        var end = text.startIndex
        for index in text.indices {
            let width = text[index...].prefix(1).utf8.count
            guard bytes + width <= maximumText else { break }
            bytes += width
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    /// Appends `chunk` to a WAV or RF64 file that libsndfile wrote and closed, and updates the RIFF
    /// size (in the header, or for RF64 in `ds64`).
    static func append(_ chunk: [UInt8], to path: String, rf64: Bool, destination: String) throws(ExportError) {
        guard let handle = FileHandle(forUpdatingAtPath: path) else { throw .writeFailed("cannot write \(destination): it cannot be reopened to label its cue points") }
        defer { try? handle.close() }
        do {
            var end = try handle.seekToEnd()
            if end % 2 == 1 {
                try handle.write(contentsOf: [0])
                end += 1
            }
            // libsndfile wrote at least a RIFF header (and a WAVE form type) before the audio.
            guard end >= 12 else {
                throw ExportError.writeFailed("cannot write \(destination): libsndfile left \(end) bytes, not a RIFF file")
            }
            try handle.write(contentsOf: chunk)
            let riffSize = end + UInt64(chunk.count) - 8
            if rf64 {
                // ds64 follows the 12-byte RF64 header: "ds64", size, then riffSize (64 bits).
                try handle.seek(toOffset: 20)
                try handle.write(contentsOf: le64(riffSize))
            } else {
                try handle.seek(toOffset: 4)
                try handle.write(contentsOf: le32(UInt32(clamping: riffSize)))
            }
            try handle.synchronize()
        } catch let error as ExportError {
            throw error
        } catch {
            throw .writeFailed("cannot write \(destination): labelling its cue points failed (\(error.localizedDescription))")
        }
    }

    static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    static func le64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
}
