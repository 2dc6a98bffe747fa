import CAF
import CaptureCore

/// What an export of one recording will hold, checked before anything is read or written: the
/// recording is one export converts (what capture-recv records, `StreamFormat.validate()`), an Opus
/// recording's OpusHead agrees with its description, its times fit. Every export format, and the dry
/// run, start here.
struct ExportPlan {
    let file: CAFFile
    let format: ExportFormat
    let facts: RecordingFacts
    let channels: Int
    /// The sample rate of what comes out (48 kHz for Opus).
    let sampleRate: Int
    /// Frames of audio to export: every whole frame of linear PCM, the packet table's valid frames
    /// of Opus. Never more than the file holds (the CAF reader checks the packet table).
    let validFrames: Int64
    /// Frames of the stored stream before the first valid one (Opus priming): marker positions,
    /// which count stored frames, lose this much.
    let leadingFrames: Int64
    /// Opus: the stored OpusHead, checked (`nil`: none stored, which 1 and 2 channels do not need).
    let opusHead: [UInt8]?

    init(file: CAFFile, format: ExportFormat) throws(ExportError) {
        let path = file.path
        func refuse(_ reason: String) -> ExportError { .unsupported("cannot export \(path): \(reason)") }
        let stream = file.format
        do throws(StreamFormatError) {
            try stream.validate()
        } catch {
            let rate = "\(Int(stream.sampleRate)) Hz"
            let what = stream.isLinearPCM
                ? "linear PCM of \(stream.bitsPerChannel) bits, flags 0x\(String(stream.formatFlags.rawValue, radix: 16)), \(stream.channelsPerFrame) channels at \(rate)"
                : "'\(stream.formatID)' audio of \(stream.channelsPerFrame) channels at \(rate), \(stream.framesPerPacket) frames a packet"
            throw refuse("it holds \(what), which export does not convert; it exports what capture-recv records: s16, s24, s32 or f32 little-endian PCM at 8 to 192 kHz, or Opus, 1 to 8 channels")
        }
        if format == .ogg, stream.formatID != .opus {
            throw .oggNeedsOpus(path: path, packetTable: false)
        }
        self.file = file
        self.format = format
        facts = try RecordingFacts(info: file.info, path: path)
        channels = stream.channelCount
        if stream.isLinearPCM {
            sampleRate = Int(stream.sampleRate.rounded())
            validFrames = file.totalFrames ?? 0
            leadingFrames = 0
            opusHead = nil
        } else {
            guard let table = file.packetTable else {
                throw .unreadable("cannot export \(path): it is an Opus recording without a packet table: finish it first with `capture-recv recover`")
            }
            sampleRate = 48_000
            validFrames = table.validFrames
            leadingFrames = Int64(table.primingFrames)
            opusHead = try Self.checkedOpusHead(file.magicCookie, channels: stream.channelCount, path: path)
        }
    }

    /// The OpusHead (RFC 7845 §5.1) a recording keeps in its magic cookie, checked as the receiver
    /// checks a Hello's: version 1, the recording's channel count, mapping family 0 (1 or 2 channels,
    /// 19 bytes) or 1 (a stream count, a coupled count, a table naming existing streams). A cookie
    /// that is not an OpusHead is no use to 1 or 2 channels (nil); 3 to 8 channels need it.
    static func checkedOpusHead(_ cookie: [UInt8], channels: Int, path: String) throws(ExportError) -> [UInt8]? {
        func damaged(_ reason: String) -> ExportError { .unreadable("cannot export \(path): its magic cookie \(reason); the file is damaged") }
        guard cookie.starts(with: Array("OpusHead".utf8)) else {
            guard channels <= 2 else {
                throw .unreadable("cannot export \(path): a \(channels)-channel Opus recording needs its OpusHead (channel mapping family 1) in its magic cookie, and it has none; the file is damaged")
            }
            return nil
        }
        guard cookie.count >= 19 else { throw damaged("is an OpusHead cut off at \(cookie.count) bytes") }
        guard (1...15).contains(cookie[8]) else { throw damaged("is an OpusHead of version \(cookie[8])") }
        guard Int(cookie[9]) == channels else { throw damaged("is an OpusHead for \(cookie[9]) channels but the recording has \(channels)") }
        switch cookie[18] {
        case 0:
            guard channels <= 2, cookie.count == 19 else { throw damaged("uses channel mapping family 0, which is for 1 or 2 channels in 19 bytes") }
        case 1:
            guard cookie.count == 21 + channels else { throw damaged("uses channel mapping family 1, which needs \(21 + channels) bytes, not \(cookie.count)") }
            let streams = Int(cookie[19]), coupled = Int(cookie[20])
            guard streams >= 1, coupled <= streams, streams + coupled <= 255,
                cookie[21...].allSatisfy({ $0 == 255 || Int($0) < streams + coupled })
            else { throw damaged("has a channel mapping table naming streams that do not exist") }
        default:
            throw damaged("uses channel mapping family \(cookie[18]), which export does not read (0 or 1)")
        }
        return cookie
    }
}
