// TEST FIXTURE WRITER ONLY. A minimal Core Audio Format packer for Opus packets, so that the
// encoder's output can be checked with ffprobe/ffmpeg before the real CAF writer (module CAF, branch
// `caf`) lands. Tests switch to the real writer once it is merged; nothing outside tests uses this.
import Foundation

/// Packs Opus packets into a CAF file image: `caff` header, `desc`, `chan` (mono/stereo only), an
/// optional `kuki`, `data`, then `pakt` after the data with BER-varint packet sizes.
struct OpusTestCAF {
    var channels: Int
    var framesPerPacket: Int
    var magicCookie: [UInt8]?
    var packetSizes: [UInt32]
    var payload: [UInt8]
    var primingFrames: Int
    var remainderFrames: Int

    /// Valid frames as the `pakt` header states them: total − priming − remainder.
    var validFrames: Int64 {
        Int64(packetSizes.count * framesPerPacket - primingFrames - remainderFrames)
    }

    /// The file's bytes.
    var bytes: [UInt8] {
        var file: [UInt8] = Array("caff".utf8)
        file += bigEndian(UInt16(1)) + bigEndian(UInt16(0))

        var desc: [UInt8] = bigEndian(Double(48_000).bitPattern)
        desc += Array("opus".utf8)
        desc += bigEndian(UInt32(0))  // format flags
        desc += bigEndian(UInt32(0))  // bytes per packet: variable
        desc += bigEndian(UInt32(framesPerPacket))
        desc += bigEndian(UInt32(channels))
        desc += bigEndian(UInt32(0))  // bits per channel
        file += chunk("desc", desc)

        if channels <= 2 {
            // kAudioChannelLayoutTag_Mono (100 << 16 | 1) or _Stereo (101 << 16 | 2).
            let tag: UInt32 = channels == 1 ? 100 << 16 | 1 : 101 << 16 | 2
            file += chunk("chan", bigEndian(tag) + bigEndian(UInt32(0)) + bigEndian(UInt32(0)))
        }
        if let magicCookie { file += chunk("kuki", magicCookie) }

        file += chunk("data", bigEndian(UInt32(0)) + payload)  // edit count, packets

        var pakt: [UInt8] = bigEndian(Int64(packetSizes.count))
        pakt += bigEndian(validFrames)
        pakt += bigEndian(Int32(primingFrames))
        pakt += bigEndian(Int32(remainderFrames))
        for size in packetSizes { pakt += Self.berVarint(UInt64(size)) }
        file += chunk("pakt", pakt)
        return file
    }

    /// Writes the file to `url`.
    func write(to url: URL) throws {
        try Data(bytes).write(to: url)
    }

    /// A CAF variable-length integer: 7 bits a byte, most significant group first, the high bit set
    /// on every byte but the last.
    static func berVarint(_ value: UInt64) -> [UInt8] {
        var groups: [UInt8] = [UInt8(value & 0x7F)]
        var rest = value >> 7
        while rest > 0 {
            groups.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        return groups.reversed()
    }

    private func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        Array(type.utf8) + bigEndian(Int64(body.count)) + body
    }

    private func bigEndian<Value: FixedWidthInteger>(_ value: Value) -> [UInt8] {
        stride(from: Value.bitWidth - 8, through: 0, by: -8).map { UInt8(truncatingIfNeeded: value >> $0) }
    }
}
