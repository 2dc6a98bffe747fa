import CaptureCodecs
import CaptureCore

extension SpoolDamageFill {
    /// The fill for a stream of `format` whose damaged bytes are kept in `keptIn`: gaps naming the
    /// damage for linear PCM; for Opus, packets of encoded silence of the stream's channels and
    /// packet duration (an Opus packet stream cannot skip time).
    static func forStream(_ format: StreamFormat, keptIn: String) -> SpoolDamageFill {
        guard format.formatID == .opus else {
            return .gaps(reason: "spool-damaged: the sender's spool could not read these frames back; the damaged bytes are kept in \(keptIn)")
        }
        let framesPerPacket = Int(format.framesPerPacket)
        guard let packet = silentOpusPacket(channels: Int(format.channelsPerFrame), framesPerPacket: framesPerPacket) else {
            return SpoolDamageFill(kind: .unavailable("no Opus packet of \(framesPerPacket) frames can stand in for them"), reason: "")
        }
        return .silence(packet: packet, framesPerPacket: framesPerPacket)
    }

    /// A packet of `framesPerPacket` frames (at 48 kHz) of digital silence, encoded by libopus for
    /// `channels` channels as capture-send encodes them (mapping family 0 for 1–2, 1 for 3–8);
    /// nil when that packet duration or channel count is not one capture-send encodes.
    public static func silentOpusPacket(channels: Int, framesPerPacket: Int) -> [UInt8]? {
        guard framesPerPacket > 0, (framesPerPacket * 125) % 6 == 0,
              let duration = OpusFrameDuration(rawValue: framesPerPacket * 125 / 6),
              let encoder = try? OpusEncoder(
                  inputFormat: .linearPCM(sampleRate: 48_000, channels: channels, sample: .s16),
                  settings: OpusEncoderSettings(frameDuration: duration))
        else { return nil }
        // Two packets' worth: the second is what silence encodes to once the encoder is under way.
        let frames = 2 * framesPerPacket
        let zeros = [UInt8](repeating: 0, count: frames * channels * 2)
        let encoded = zeros.withUnsafeBytes { bytes in
            try? encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: frames))
        }
        guard let packets = encoded ?? nil, packets.packetSizes.count == 2 else { return nil }
        return Array(packets.payload[Int(packets.packetSizes[0])...])
    }
}
