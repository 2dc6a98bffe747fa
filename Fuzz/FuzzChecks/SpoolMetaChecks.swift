import CaptureCore
import CaptureSender
import CaptureWire
import Foundation

/// Fuzz target 5: arbitrary bytes as a stream's `meta.json` in its spool folder. Invariants: the
/// reader either refuses it with a message naming the file (and what is wrong), or returns a
/// description from which a sender makes its Hello exactly as `StreamSender` does (its start time
/// in nanoseconds, its priming frames as UInt32: the conversions that trapped, issue 27 item 9),
/// and `spool list` its seconds, without a trap; and a receiver accepts that Hello.
public enum SpoolMetaChecks {
    static let folder = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"

    public static func check(_ data: Data) {
        let path = "/spool/\(folder)/meta.json"
        let meta: SpoolMeta
        do {
            meta = try SpoolMetaReader.read(data, path: path, folderName: folder)
        } catch {
            precondition(error.description.hasPrefix("spool: \(path): "), "a refusal that does not name the file: \(error)")
            precondition(error.summary?.hasPrefix("meta.json: ") == true, "a refusal without its summary for spool list")
            return
        }
        let description = meta.streamDescription
        // As StreamSender.makeHello does it, trapping conversions and all.
        let firstSample = meta.continuation?.firstSampleTime ?? 0
        var hello = Capture_V1_Hello()
        hello.protocolVersion = UInt32(WireProtocol.version)
        hello.streamID = (meta.continuation?.streamID ?? meta.streamID).wireBytes
        hello.streamName = meta.streamName
        hello.format = Capture_V1_StreamFormat(description.format)
        hello.magicCookie = Data(description.magicCookie)
        hello.startTimeUnixNs = Int64((description.startTime.timeIntervalSince1970 + Double(firstSample) / description.format.sampleRate) * 1e9)
        hello.startSampleTime = firstSample
        if let continuation = meta.continuation {
            hello.continues = .with {
                $0.streamID = continuation.continues.wireBytes
                $0.firstSequence = continuation.firstSequence
            }
            hello.resumeFromSequence = continuation.firstSequence
        }
        hello.primingFrames = UInt32(description.primingFrames)
        hello.resumeSecret = Data(meta.resumeSecret ?? [])
        hello.clock = Capture_V1_ClockState(description.clock)
        if let layout = description.channelLayout { hello.channelLayout = .with { $0.tag = layout.tag; $0.bitmap = layout.bitmap } }
        do {
            _ = try ValidatedHello(hello)
        } catch {
            preconditionFailure("a description the reader accepts makes a Hello a receiver refuses: \(error)")
        }
        // What spool list computes: seconds spooled (at most 2^62 frames) and the start as a date.
        let seconds = Double(Int64(1) << 62) / meta.format.sampleRate
        precondition(seconds.isFinite && seconds > 0)
        _ = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: meta.startTime))
    }
}
