/// The most recent packets of a stream, at least `minimumSamples` of them (48 kHz), which a joining
/// listener receives first so that its decoder has warmed up when the audio it hears begins.
struct PreRoll: Sendable {
    let minimumSamples: Int
    private(set) var packets: [ListenPacket] = []
    private(set) var samples = 0

    init(minimumSamples: Int) { self.minimumSamples = minimumSamples }

    /// Adds a packet and forgets the oldest ones that are no longer needed to cover `minimumSamples`.
    mutating func append(_ packet: ListenPacket) {
        packets.append(packet)
        samples += packet.samples
        while let oldest = packets.first, samples - oldest.samples >= minimumSamples {
            packets.removeFirst()
            samples -= oldest.samples
        }
    }

    mutating func removeAll() {
        packets.removeAll()
        samples = 0
    }
}
