import CAF
import CaptureExport
import Foundation

/// Fuzz target 5: arbitrary bytes as a recording handed to `capture-recv export`, read from memory
/// and run through export's checks, reader and conversions for every format
/// (`RecordingExporter.dryRun`: the same code as an export, with the audio counted instead of
/// written). Invariants: an export never claims more frames than the file holds, delivers exactly
/// the frames it claims (every sample of every channel), labels at most 100 cue points inside the
/// audio in a chunk whose sizes add up, and gives an Ogg stream one packet per CAF packet with
/// granule positions that never go backwards and end at pre-skip plus the valid frames.
public enum ExportChecks {
    public static func check(_ data: Data) {
        guard let file = try? CAFFile.read(bytes: Array(data), name: "fuzz.caf") else { return }
        // rf64 differs from wav only in what libsndfile writes, and flac in the sample width it is
        // given: wav covers their reading. Decoding Opus twice (wav, flac) would halve the rate, and
        // decoding more than 2 s of it would let a few bytes of packet table cost seconds.
        var formats: [ExportFormat] = [.ogg]
        if file.format.isLinearPCM { formats += [.wav, .flac] }
        if !file.format.isLinearPCM, file.totalFrames ?? 0 <= 96_000 { formats.append(.wav) }
        for format in formats {
            guard let run = try? RecordingExporter.dryRun(file, as: format) else { continue }
            check(run, of: file, as: format)
        }
    }

    static func check(_ run: ExportDryRun, of file: CAFFile, as format: ExportFormat) {
        let priming = file.format.isLinearPCM ? 0 : Int64(file.packetTable?.primingFrames ?? 0)
        guard let stored = file.totalFrames else { preconditionFailure("an export of a file whose frames are unknown") }
        precondition(run.validFrames >= 0 && run.validFrames + priming <= stored,
                     "the export claims \(run.validFrames) frames after \(priming) priming of the \(stored) the file holds")
        precondition(run.channels == file.format.channelCount && (1...8).contains(run.channels), "the export's channels are not the recording's")
        precondition((8_000...192_000).contains(run.sampleRate), "the export's sample rate \(run.sampleRate) is out of range")
        switch format {
        case .ogg:
            precondition(run.packets == file.packetCount, "the Ogg stream has \(run.packets) packets, the recording \(String(describing: file.packetCount))")
            precondition(run.granulePositions.count == Int(run.packets), "a granule position per packet")
            precondition(zip(run.granulePositions, run.granulePositions.dropFirst()).allSatisfy { $0 <= $1 }, "granule positions go backwards")
            if let last = run.granulePositions.last {
                precondition(last == priming + run.validFrames, "the last granule \(last) is not pre-skip \(priming) + \(run.validFrames) valid frames")
            }
            precondition(run.headerBytes >= 19 + 16, "the OpusHead and OpusTags are shorter than their fixed parts")
        case .wav, .rf64, .flac:
            precondition(run.frames == run.validFrames, "the export delivered \(run.frames) of its \(run.validFrames) frames")
            precondition(run.samples == run.frames * Int64(run.channels), "\(run.samples) samples for \(run.frames) frames of \(run.channels) channels")
            precondition(run.cuePositions.count <= 100 && run.cuePositions.allSatisfy { (0...run.validFrames).contains($0) },
                         "cue points outside the audio")
            guard !run.labelChunk.isEmpty else { return }
            let chunk = run.labelChunk
            precondition(chunk.count % 2 == 0 && chunk.count <= 12 + 100 * (12 + 256), "a label chunk of \(chunk.count) bytes")
            precondition(Int(littleEndian32(chunk, at: 4)) == chunk.count - 8, "the LIST chunk's size is not its length")
            var offset = 12
            var labels = 0
            while offset < chunk.count {
                let size = Int(littleEndian32(chunk, at: offset + 4))
                offset += 8 + size + size % 2
                labels += 1
            }
            precondition(offset == chunk.count && labels == run.cuePositions.count, "the labels do not fill their chunk, one per cue point")
        }
    }

    private static func littleEndian32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        precondition(offset + 4 <= bytes.count, "a size field past the end of the label chunk")
        return (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
    }
}
