import CaptureCore
import CaptureReceiver
import CaptureSender
import Foundation

/// Fuzz target 3: arbitrary bytes as what a crash or damage left on disk: a sender's spool (one
/// or two segments, its `acked` file) and a receiver's position log, read in memory by the same
/// steps the file readers take (`SpoolScanner`, `SpoolContents`, `StreamPositionLog.lastRecord`).
///
/// Input: the first byte picks where the spool's bytes end and the position log's begin. The
/// spool's first byte holds flags: bits 0-1 the `acked` file (none, 8 bytes, 16 bytes, 16 bytes)
/// whose bytes follow, bit 2 Opus (damage filled with silence packets) or PCM (gaps), bit 3 a
/// second segment (then 2 bytes: where the segment bytes split, and 8: the second segment's name).
///
/// Invariants: every entry kept reads back at its location, with its sequence and size; damaged
/// regions lie inside their segment and overlap neither each other nor an entry; the entries to
/// deliver run on without a hole in sequences and, unless the stream is undeliverable, on the
/// sample timeline, the entries made in place of damage included; what damage costs is counted
/// as audio (a damaged stream never looks empty); the report's words are made without a trap.
/// A position log yields at most one last record, whose values are sane.
public enum SpoolChecks {
    public static func check(_ data: Data) {
        let bytes = Array(data)
        let split = bytes.isEmpty ? 0 : min(bytes.count, 1 + Int(bytes[0]) * bytes.count / 256)
        checkSpool(Array(bytes[min(1, split)..<split]))
        checkPositionLog(Array(bytes[split...]))
    }

    private static func checkSpool(_ input: [UInt8]) {
        guard let flags = input.first else { return }
        var rest = input.dropFirst()
        func take(_ count: Int) -> [UInt8] {
            let taken = Array(rest.prefix(count))
            rest = rest.dropFirst(taken.count)
            return taken
        }
        let acked: SpoolAckedRecord?
        switch flags & 3 {
        case 0: acked = nil
        case 1: acked = SpoolAckedRecord.decode(take(8))
        default: acked = SpoolAckedRecord.decode(take(16))
        }
        let opus = flags & 4 != 0
        var segments: [(first: UInt64, bytes: [UInt8])]
        if flags & 8 != 0 {
            let at = take(2).reduce(0) { $0 << 8 | Int($1) }
            let second = take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let body = Array(rest)
            let cut = body.isEmpty ? 0 : at % (body.count + 1)
            segments = [(1, Array(body[..<cut])), (max(2, second), Array(body[cut...]))]
        } else {
            segments = [(1, Array(rest))]
        }
        var scanner = SpoolScanner()
        for segment in segments { segment.bytes.withUnsafeBytes { scanner.scan(segment: segment.first, bytes: $0) } }
        scanner.finish()
        let fill: SpoolDamageFill = opus
            ? .silence(packet: [0xF8, 0xFF, 0xFE], framesPerPacket: 960)
            : .gaps(reason: "spool-damaged: fuzz")
        let contents = SpoolContents(scan: scanner, acknowledged: acked, fill: fill)

        func bytes(of segment: UInt64) -> [UInt8] {
            guard let found = segments.first(where: { $0.first == segment }) else { preconditionFailure("an item names a segment that was not scanned") }
            return found.bytes
        }
        // Entries read back where they are; regions lie inside their segment; nothing overlaps.
        var taken: [(segment: UInt64, range: Range<Int>)] = []
        func claim(_ segment: UInt64, _ range: Range<Int>) {
            precondition(range.lowerBound >= 0 && range.upperBound <= bytes(of: segment).count, "a record or region outside its segment")
            precondition(!taken.contains { $0.segment == segment && $0.range.overlaps(range) }, "two records or regions share bytes")
            taken.append((segment, range))
        }
        var firstSample: [UInt64: Int64] = [:]
        var previous: UInt64?
        for item in scanner.items {
            switch item {
            case .entry(let entry):
                if let previous { precondition(entry.sequence > previous, "the scan's entries go back") }
                previous = entry.sequence
                let offset = Int(entry.location.offset)
                claim(entry.location.segment, offset..<(offset + entry.location.length))
                let segment = bytes(of: entry.location.segment)
                guard let packet = segment[offset..<(offset + entry.location.length)].withUnsafeBytes({ StreamSpool.entry(in: $0) }) else {
                    preconditionFailure("a recovered entry does not read back")
                }
                precondition(packet.sequence == entry.sequence, "an entry reads back as another sequence")
                precondition(packet.byteCount == entry.payloadBytes, "an entry reads back with another size")
                precondition(packet.firstSampleTime == entry.firstSampleTime && packet.endSampleTime == entry.endSampleTime, "an entry reads back elsewhere on the timeline")
                firstSample[entry.sequence] = entry.firstSampleTime
            case .damage(let found):
                for region in found.regions {
                    precondition(region.length > 0, "an empty damaged region")
                    claim(region.segment, region.offset..<(region.offset + region.length))
                }
            }
        }
        // What is delivered runs on without a hole; entries made up cover exactly what was lost.
        var last: SpoolContents.Entry?
        for entry in contents.entries {
            let first: Int64
            if let made = entry.replacement {
                precondition(made.sequence == entry.sequence && made.endSampleTime == entry.endSampleTime && entry.location == nil && entry.bytes == 0)
                switch made.content {
                case .gap(_, let length, _):
                    precondition(!opus && length >= 1, "a gap made in place of damage covers no frame, or stands in an Opus stream")
                case .audio(let packets):
                    precondition(opus && packets.packetCount >= 1 && packets.frameCount == packets.packetCount * 960
                                 && packets.packetSizes.reduce(0) { $0 + Int($1) } == packets.payload.count, "silence made in place of damage is not whole packets")
                case .marker(let sampleTime, _):
                    precondition(made.firstSampleTime == sampleTime && made.endSampleTime == sampleTime, "a marker made in place of damage covers frames")
                case .filledGap:
                    preconditionFailure("a filled gap is never made in place of damage")
                }
                first = made.firstSampleTime
            } else {
                precondition(entry.location != nil, "an entry neither spooled nor made")
                guard let known = firstSample[entry.sequence] else { preconditionFailure("a delivered entry the scan did not find") }
                first = known
            }
            precondition(entry.sequence > contents.acknowledged, "an acknowledged entry is delivered again")
            if let last {
                precondition(entry.sequence == last.sequence + 1, "the entries to deliver skip a sequence")
                if contents.undeliverable == nil { precondition(first == last.endSampleTime, "the entries to deliver leave a hole in the timeline") }
            }
            last = entry
        }
        for damage in contents.damage {
            switch damage.cost {
            case .frames, .tail: precondition(contents.holdsCapturedAudio, "a stream that lost audio to damage looks empty")
            case .unplaceable: precondition(contents.undeliverable != nil, "damage that cannot be placed lets the stream be delivered")
            case .nothing, .endRecord: break
            }
        }
        if let report = SpoolDamageReport(contents: contents, sampleRate: 48_000, keptIn: "/kept") {
            precondition(!report.state.isEmpty && !report.delivered(streamName: "s", receiver: "r").isEmpty && !report.undelivered(streamName: "s").isEmpty)
        }
    }

    private static func checkPositionLog(_ bytes: [UInt8]) {
        let record = StreamPositionLog.lastRecord(length: Int64(bytes.count)) { (count: Int, offset: Int64) -> [UInt8] in
            let start = Int(offset)
            precondition(start >= 0 && count >= 0 && start + count <= bytes.count, "the position log is read outside its bytes")
            return Array(bytes[start..<(start + count)])
        }
        guard let record else { return }
        precondition(record.packets >= 0 && record.position.endSampleTime >= 0 && record.position.lastSequence <= 1 << 62, "a position record with impossible counts")
    }
}
