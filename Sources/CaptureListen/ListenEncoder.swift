import CaptureCodecs
import CaptureCore

/// One Opus packet on its way to listeners, with the samples (48 kHz) it decodes to.
struct ListenPacket: Sendable {
    var bytes: [UInt8]
    var samples: Int
}

/// Encodes a PCM stream to Opus for listening: converts the stream's samples to floats (downmixing
/// more than two channels to stereo), resamples to 48 kHz when Opus does not take the stream's rate,
/// and encodes 20 ms packets with the project's Opus encoder. One per stream, while anybody listens;
/// used from the hub's executor only.
final class ListenEncoder {
    /// The identification header the encoded packets decode with.
    let opusHead: ListenOpusHead
    private let converter: ListenPCMConverter
    private let resampler: ListenResampler?
    private let encoder: OpusEncoder
    private var floats: [Float] = []
    private var sampleTime: Int64 = 0

    init(format: StreamFormat, bitratePerChannel: Int) throws(ListenError) {
        let converter = try ListenPCMConverter(format: format)
        let channels = converter.outputChannels
        let inputRate = Int(format.sampleRate)
        let encoderRate: Int
        if Double(inputRate) == format.sampleRate, OpusEncoderSettings.supportedSampleRates.contains(inputRate) {
            encoderRate = inputRate
            resampler = nil
        } else {
            encoderRate = 48_000
            resampler = try ListenResampler(inputRate: format.sampleRate, channels: channels)
        }
        let settings = OpusEncoderSettings(
            bitrate: min(max(bitratePerChannel * channels, OpusEncoderSettings.bitrateRange.lowerBound), OpusEncoderSettings.bitrateRange.upperBound),
            frameDuration: .ms20, complexity: 5, bitrateMode: .vbr, application: .audio
        )
        do {
            encoder = try OpusEncoder(
                inputFormat: .linearPCM(sampleRate: Double(encoderRate), channels: channels, sample: .f32), settings: settings
            )
            opusHead = try ListenOpusHead(encoder.opusHead.bytes)
        } catch let error as EncoderError {
            throw .unsupportedStream("the Opus encoder cannot be set up for it: \(error)")
        } catch {
            throw .unsupportedStream("the Opus encoder cannot be set up for it: \(error)")
        }
        self.converter = converter
    }

    /// Encodes the whole frames in `bytes`; returns the packets completed.
    func encode(_ bytes: UnsafeRawBufferPointer) throws(ListenError) -> [ListenPacket] {
        floats.removeAll(keepingCapacity: true)
        converter.convert(bytes, into: &floats)
        if let resampler { floats = resampler.process(floats) }
        let frames = floats.count / converter.outputChannels
        guard frames > 0 else { return [] }
        let encoded: EncodedPackets?
        do {
            encoded = try floats.withUnsafeBytes { raw throws(EncoderError) in
                try encoder.encode(CapturedBuffer(
                    bytes: raw, startTime: CaptureTimestamp(sampleTime: sampleTime, hostTime: 0), packetCount: frames
                ))
            }
        } catch {
            throw .unsupportedStream("\(error)")
        }
        sampleTime += Int64(frames)
        return Self.split(encoded)
    }

    /// Encodes the audio still held (the last partial frame, padded with silence).
    func finish() -> [ListenPacket] {
        guard let tail = try? encoder.finish() else { return [] }
        return Self.split(tail.packets)
    }

    private static func split(_ encoded: EncodedPackets?) -> [ListenPacket] {
        guard let encoded, encoded.packetCount > 0 else { return [] }
        let samplesPerPacket = encoded.frameCount / encoded.packetCount
        var packets: [ListenPacket] = []
        packets.reserveCapacity(encoded.packetCount)
        var offset = 0
        for size in encoded.packetSizes {
            let end = offset + Int(size)
            packets.append(ListenPacket(bytes: Array(encoded.payload[offset..<end]), samples: samplesPerPacket))
            offset = end
        }
        return packets
    }
}
