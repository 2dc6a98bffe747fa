import CaptureCore
import Foundation

/// Audio of one AudioData placed on the stream's timeline: what a segmented writer splits at a
/// segment boundary and trims where a file already holds it. Linear PCM is frames (`packetSizes`
/// empty); a variable bit rate stream (Opus) is whole packets of `framesPerPacket` frames each.
struct TimedAudio: Equatable {
    /// Position of the first frame.
    var first: Int64
    var payload: Data
    /// VBR: one size per packet; empty for linear PCM.
    var packetSizes: [UInt32]
    var frameCount: Int

    /// Position just past the last frame.
    var end: Int64 { first + Int64(frameCount) }

    /// The audio from `position` on, for a file that already holds what lies before it (the part of
    /// a message written before a segment cut, resent after a reconnect). VBR drops whole packets that
    /// start before `position`. Nil when nothing is left.
    func dropping(before position: Int64, format: StreamFormat) -> TimedAudio? {
        guard position > first else { return self }
        guard position < end else { return nil }
        if packetSizes.isEmpty {
            let frames = Int(position - first)
            let bytes = frames * Int(format.bytesPerFrame)
            return TimedAudio(first: position, payload: payload.subdata(in: payload.startIndex + bytes..<payload.endIndex), packetSizes: [], frameCount: frameCount - frames)
        }
        let framesPerPacket = Int64(format.framesPerPacket)
        let dropped = Int((position - first + framesPerPacket - 1) / framesPerPacket)
        guard dropped < packetSizes.count else { return nil }
        return packets(from: dropped, framesPerPacket: framesPerPacket)
    }

    /// Splits the audio where a segment ends (`boundary`, strictly inside it): linear PCM at that
    /// frame; VBR so that the packet holding the boundary ends the first part (its frames past the
    /// boundary are that file's remainder) and also begins the second (its frames before the
    /// boundary are part of that file's priming). `remainder` is the first part's frames past the
    /// boundary.
    func split(at boundary: Int64, format: StreamFormat) -> (before: TimedAudio, after: TimedAudio, remainder: Int) {
        precondition(boundary > first && boundary < end, "a split falls inside the audio")
        if packetSizes.isEmpty {
            let frames = Int(boundary - first)
            let bytes = payload.startIndex + frames * Int(format.bytesPerFrame)
            return (
                TimedAudio(first: first, payload: payload.subdata(in: payload.startIndex..<bytes), packetSizes: [], frameCount: frames),
                TimedAudio(first: boundary, payload: payload.subdata(in: bytes..<payload.endIndex), packetSizes: [], frameCount: frameCount - frames),
                0
            )
        }
        let framesPerPacket = Int64(format.framesPerPacket)
        let holding = Int((boundary - first) / framesPerPacket)
        let startsOnBoundary = first + Int64(holding) * framesPerPacket == boundary
        let beforeCount = startsOnBoundary ? holding : holding + 1
        let before = packets(upTo: beforeCount, framesPerPacket: framesPerPacket)
        return (before, packets(from: holding, framesPerPacket: framesPerPacket), Int(before.end - boundary))
    }

    /// The packets from index `index` on.
    private func packets(from index: Int, framesPerPacket: Int64) -> TimedAudio {
        let skipped = packetSizes[..<index].reduce(0) { $0 + Int($1) }
        return TimedAudio(
            first: first + Int64(index) * framesPerPacket, payload: payload.subdata(in: payload.startIndex + skipped..<payload.endIndex),
            packetSizes: Array(packetSizes[index...]), frameCount: (packetSizes.count - index) * Int(framesPerPacket))
    }

    /// The packets before index `count`.
    private func packets(upTo count: Int, framesPerPacket: Int64) -> TimedAudio {
        let kept = packetSizes[..<count].reduce(0) { $0 + Int($1) }
        return TimedAudio(
            first: first, payload: payload.subdata(in: payload.startIndex..<payload.startIndex + kept),
            packetSizes: Array(packetSizes[..<count]), frameCount: count * Int(framesPerPacket))
    }

    /// Each packet with its start position (VBR).
    func eachPacket(framesPerPacket: Int64) -> [(start: Int64, bytes: Data)] {
        var offset = payload.startIndex
        return packetSizes.enumerated().map { index, size in
            defer { offset += Int(size) }
            return (first + Int64(index) * framesPerPacket, payload.subdata(in: offset..<offset + Int(size)))
        }
    }
}

/// The last packets of a VBR stream, kept so that a new segment can begin with pre-roll: packets
/// from before its boundary that a decoder starting at the segment decodes and drops (counted in the
/// segment's priming), so its first valid frame comes out right. 80 ms, as RFC 7845 §4.6 advises for
/// Opus after a seek.
struct PrerollPackets {
    /// Pre-roll frames at 48 kHz: 80 ms.
    static let frames: Int64 = 3_840

    private(set) var packets: [(start: Int64, bytes: Data)] = []
    let framesPerPacket: Int64
    /// Packets needed to cover `frames`.
    var capacity: Int { Int((Self.frames + framesPerPacket - 1) / framesPerPacket) }

    init(framesPerPacket: Int64) { self.framesPerPacket = max(framesPerPacket, 1) }

    /// Keeps the last packets of `audio`: one more than the pre-roll needs, since the packet holding
    /// a boundary ends one file and begins the next and so is no pre-roll itself.
    mutating func remember(_ audio: TimedAudio) {
        packets.append(contentsOf: audio.eachPacket(framesPerPacket: framesPerPacket).suffix(capacity + 1))
        if packets.count > capacity + 1 { packets.removeFirst(packets.count - capacity - 1) }
    }

    /// The pre-roll for a segment whose first kept packet starts at `start`: the remembered packets
    /// that end exactly there and run back contiguously (at most `capacity`). Fewer after a timeline
    /// jump or a reconnect (the packets before it were not seen by this writer).
    func preroll(endingAt start: Int64) -> TimedAudio? {
        var chosen: [(start: Int64, bytes: Data)] = []
        var expected = start
        for packet in packets.reversed() where packet.start < start {
            guard packet.start + framesPerPacket == expected, chosen.count < capacity else { break }
            chosen.insert(packet, at: 0)
            expected = packet.start
        }
        guard let first = chosen.first else { return nil }
        var payload = Data()
        for packet in chosen { payload.append(packet.bytes) }
        return TimedAudio(first: first.start, payload: payload, packetSizes: chosen.map { UInt32($0.bytes.count) }, frameCount: chosen.count * Int(framesPerPacket))
    }

    mutating func forget() { packets.removeAll() }

    /// Remembers packets read back from a file (a stream resuming in it), the last ending at `end`.
    mutating func remember(readBack: [[UInt8]], endingAt end: Int64) {
        let first = end - Int64(readBack.count) * framesPerPacket
        remember(TimedAudio(
            first: first, payload: Data(readBack.joined()), packetSizes: readBack.map { UInt32($0.count) },
            frameCount: readBack.count * Int(framesPerPacket)))
    }
}
