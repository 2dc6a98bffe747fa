import COpus
import Foundation

/// Splits an Opus stream's audio payload (packets back to back, with their sizes, as AudioData
/// carries them) into packets with the number of 48 kHz samples each decodes to, read from the
/// packet's own TOC byte (libopus `opus_packet_get_nb_samples`).
struct OpusPacketSplitter: Sendable {
    /// Samples per packet when a packet's TOC cannot be read (the stream format's frames per packet).
    let fallbackSamplesPerPacket: Int

    /// The packets in `payload`; sizes that overrun the payload end the split there.
    func split(_ payload: Data, sizes: [UInt32]) -> [ListenPacket] {
        var packets: [ListenPacket] = []
        packets.reserveCapacity(sizes.count)
        payload.withUnsafeBytes { raw in
            var offset = 0
            for size in sizes {
                let end = offset + Int(size)
                guard end <= raw.count, size > 0 else { break }
                let slice = UnsafeRawBufferPointer(rebasing: raw[offset..<end])
                packets.append(ListenPacket(bytes: Array(slice), samples: samples(in: slice)))
                offset = end
            }
        }
        return packets
    }

    private func samples(in packet: UnsafeRawBufferPointer) -> Int {
        guard let base = packet.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return fallbackSamplesPerPacket }
        let count = opus_packet_get_nb_samples(base, Int32(packet.count), 48_000)
        return count > 0 ? Int(count) : fallbackSamplesPerPacket
    }
}
