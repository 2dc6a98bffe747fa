import CaptureWire
import Foundation

extension LoggedPacket {
    /// The message that carries this entry to the receiver: AudioData for audio (with its levels
    /// when the entry has them), Gap for a gap, Marker for a marker, FilledGap for a filled gap.
    public var wireMessage: WireMessage {
        switch content {
        case .audio(let packets):
            return .audioData(.with {
                $0.sequence = sequence
                $0.firstSampleTime = packets.firstSampleTime
                $0.packetCount = UInt32(packets.packetCount)
                $0.packetSizes = packets.packetSizes
                $0.payload = Data(packets.payload)
                $0.frameCount = UInt32(packets.frameCount)
                if let levels { $0.levels = levels.message }
            })
        case .gap(let sampleTime, let length, let reason):
            return .gap(.with {
                $0.sequence = sequence
                $0.sampleTime = sampleTime
                $0.lengthFrames = UInt64(length)
                $0.reason = reason
            })
        case .marker(let sampleTime, let label):
            return .marker(.with {
                $0.sequence = sequence
                $0.sampleTime = sampleTime
                $0.label = label
            })
        case .filledGap(_, let sampleTime, let length, let reason):
            return .filledGap(.with {
                $0.sequence = sequence
                $0.sampleTime = sampleTime
                $0.lengthFrames = UInt64(length)
                $0.reason = reason
            })
        }
    }

    /// The frame type `wireMessage` travels as, without building it.
    public var frameType: WireMessageType {
        switch content {
        case .audio: return .audioData
        case .gap: return .gap
        case .marker: return .marker
        case .filledGap: return .filledGap
        }
    }
}
