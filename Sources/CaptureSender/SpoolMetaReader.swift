import CaptureCore
import CaptureWire
import Foundation

/// Reads a stream's `meta.json` and checks every value in it before anything uses one: a value no
/// stream of capture-send can have (damage, or an edit) is an error naming the file and the field,
/// never a trap further on (in the Hello's start time, its priming frames, the seconds `spool list`
/// shows). Issue 27, item 9.
public enum SpoolMetaReader {
    /// The largest `meta.json` read: a stream's description takes a few hundred bytes (a magic
    /// cookie at most 64 KiB as hex-free JSON numbers).
    public static let maximumBytes = 1 << 20
    /// The latest start time accepted: 2100-01-01T00:00:00Z, in seconds since 1970. With a
    /// position of at most a hundred years into the stream, its time in nanoseconds fits an Int64.
    public static let latestStartTime: Double = 4_102_444_800
    /// The longest stream a continuation may start into: a hundred years.
    static let maximumStreamSeconds: Double = 3_155_760_000

    /// The description in `data` (the contents of `path`, a stream folder named `folderName`);
    /// throws what is wrong, naming `path` and the field.
    public static func read(_ data: Data, path: String, folderName: String) throws(SpoolError) -> SpoolMeta {
        func damaged(_ reason: String) -> SpoolError {
            SpoolError("spool: \(path): \(reason); the stream is left in the spool as it is", summary: "meta.json: \(reason)")
        }
        guard data.count <= maximumBytes else { throw damaged("it holds \(data.count) bytes, far more than a stream's description") }
        let meta: SpoolMeta
        do {
            meta = try JSONDecoder().decode(SpoolMeta.self, from: data)
        } catch let error as DecodingError {
            throw damaged(describe(error))
        } catch {
            throw damaged("it is not a stream's description")
        }
        if let problem = problem(in: meta, folderName: folderName) { throw damaged(problem) }
        return meta
    }

    /// What is wrong with a decoded description, or nil.
    static func problem(in meta: SpoolMeta, folderName: String) -> String? {
        guard (1...2).contains(meta.version) else { return "version \(meta.version) is not a spool version this capture-send reads (1 or 2)" }
        guard meta.streamID.uuidString.lowercased() == folderName.lowercased() else {
            return "streamID \(meta.streamID.uuidString.lowercased()) names another stream than its folder"
        }
        guard meta.streamName.utf8.count <= 255 else { return "streamName holds \(meta.streamName.utf8.count) bytes; a stream name is at most 255" }
        let format = meta.format
        guard format.sampleRate.isFinite, format.sampleRate >= 8_000, format.sampleRate <= 192_000 else {
            return "sampleRate \(number(format.sampleRate)) is not a sample rate capture-send records (8000 to 192000 Hz)"
        }
        guard (1...8).contains(format.channelsPerFrame) else { return "channelsPerFrame \(format.channelsPerFrame) is not a channel count from 1 to 8" }
        do {
            try format.validate()
        } catch {
            return "the format fields (formatID, formatFlags, bitsPerChannel, bytesPerFrame, bytesPerPacket, framesPerPacket) are not a format capture-send sends: \(error)"
        }
        if format.isLinearPCM {
            guard meta.magicCookie.isEmpty else { return "magicCookie holds \(meta.magicCookie.count) bytes; linear PCM has none" }
            guard meta.primingFrames == 0 else { return "primingFrames \(meta.primingFrames) is not possible for linear PCM (it has none)" }
        } else {
            guard format.framesPerPacket % 120 == 0, format.framesPerPacket <= 5_760 else {
                return "framesPerPacket \(format.framesPerPacket) is not an Opus packet (a multiple of 120 frames up to 5760)"
            }
            guard meta.magicCookie.count <= 65_536 else { return "magicCookie holds \(meta.magicCookie.count) bytes; an OpusHead takes a few dozen" }
            guard (0...48_000).contains(meta.primingFrames) else { return "primingFrames \(meta.primingFrames) is not an Opus priming (0 to 48000 frames)" }
        }
        guard meta.startTime.isFinite, meta.startTime >= 0, meta.startTime <= latestStartTime else {
            return "startTime \(number(meta.startTime)) is not a time from 1970 to 2100 (seconds since 1970)"
        }
        if let secret = meta.resumeSecret, !secret.isEmpty, !(16...64).contains(secret.count) {
            return "resumeSecret holds \(secret.count) bytes; a resume secret is 16 to 64 bytes"
        }
        if let continuation = meta.continuation {
            guard continuation.continues == meta.streamID, continuation.streamID != meta.streamID else {
                return "continuation does not continue this stream as another one"
            }
            guard continuation.firstSequence >= 1, continuation.firstSequence <= SpoolRecord.maximumSequence else {
                return "continuation.firstSequence \(continuation.firstSequence) is not a sequence (1 to 2^62)"
            }
            guard continuation.firstSampleTime >= 0, Double(continuation.firstSampleTime) <= format.sampleRate * maximumStreamSeconds else {
                return "continuation.firstSampleTime \(continuation.firstSampleTime) is not a position within a hundred years of the stream's start"
            }
        }
        if let layout = meta.channelLayout, !describes(layout, channels: Int(format.channelsPerFrame)) {
            return "channelLayout (tag 0x\(String(layout.tag, radix: 16)), bitmap 0x\(String(layout.bitmap, radix: 16))) does not describe \(format.channelsPerFrame) channels"
        }
        // Whatever else a receiver checks (an Opus stream's OpusHead, above all), checked here the
        // same way, on the Hello this description makes.
        do {
            _ = try ValidatedHello(hello(for: meta, format: format))
        } catch {
            return "it describes a stream no receiver accepts: \(error)"
        }
        return nil
    }

    /// The Hello a sender makes of `meta` (as `StreamSender` does; every value checked above, so
    /// no conversion here can trap).
    private static func hello(for meta: SpoolMeta, format: StreamFormat) -> Capture_V1_Hello {
        .with {
            $0.protocolVersion = UInt32(WireProtocol.version)
            $0.streamID = (meta.continuation?.streamID ?? meta.streamID).wireBytes
            $0.streamName = meta.streamName
            $0.format = Capture_V1_StreamFormat(format)
            $0.magicCookie = Data(meta.magicCookie)
            let firstSample = meta.continuation?.firstSampleTime ?? 0
            $0.startTimeUnixNs = Int64((meta.startTime + Double(firstSample) / format.sampleRate) * 1e9)
            $0.startSampleTime = firstSample
            if let continuation = meta.continuation {
                $0.continues = continuation.wire
                $0.resumeFromSequence = continuation.firstSequence
            }
            $0.primingFrames = UInt32(meta.primingFrames)
            $0.resumeSecret = Data(meta.resumeSecret ?? [])
            if let layout = meta.channelLayout { $0.channelLayout = .with { $0.tag = layout.tag; $0.bitmap = layout.bitmap } }
        }
    }

    /// Whether a layout describes exactly `channels` channels (PROTOCOL.md §6.1.3): a bitmap of
    /// one bit per channel, or a predefined tag whose low 16 bits are the channel count.
    private static func describes(_ layout: ChannelLayout, channels: Int) -> Bool {
        if layout.tag == ChannelLayout.bitmapTag { return layout.bitmap.nonzeroBitCount == channels && layout.bitmap < (1 << 18) }
        return layout.tag > ChannelLayout.bitmapTag && Int(layout.tag & 0xFFFF) == channels && layout.bitmap == 0
    }

    /// A number as JSON shows it: integers without a fraction, others as Swift prints them.
    static func number(_ value: Double) -> String {
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// A decoding error in the words of the file: which field, and what is wrong with it.
    static func describe(_ error: DecodingError) -> String {
        func field(_ path: [CodingKey]) -> String {
            var text = ""
            for key in path {
                if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(field(context.codingPath + [key])) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return context.codingPath.isEmpty ? "it is not a stream's description" : "\(field(context.codingPath)) holds a value of the wrong type"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "it is not JSON" : "\(field(context.codingPath)) holds a value out of range or malformed"
        @unknown default:
            return "it is not a stream's description"
        }
    }
}
