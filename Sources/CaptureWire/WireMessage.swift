import Foundation
import SwiftProtobuf

/// One protocol message: a frame's type and its decoded body.
public enum WireMessage: Sendable, Equatable {
    case hello(Capture_V1_Hello)
    case helloAccepted(Capture_V1_HelloAccepted)
    case audioData(Capture_V1_AudioData)
    case gap(Capture_V1_Gap)
    case ack(Capture_V1_Ack)
    case heartbeat(Capture_V1_Heartbeat)
    case endOfStream(Capture_V1_EndOfStream)
    case endAccepted(Capture_V1_EndAccepted)
    case error(Capture_V1_Error)
    case marker(Capture_V1_Marker)
    case filledGap(Capture_V1_FilledGap)

    /// The frame type this message travels as.
    public var type: WireMessageType {
        switch self {
        case .hello: return .hello
        case .helloAccepted: return .helloAccepted
        case .audioData: return .audioData
        case .gap: return .gap
        case .ack: return .ack
        case .heartbeat: return .heartbeat
        case .endOfStream: return .endOfStream
        case .endAccepted: return .endAccepted
        case .error: return .error
        case .marker: return .marker
        case .filledGap: return .filledGap
        }
    }

    /// The complete frame: length, type byte and protobuf body.
    public func encode() throws(WireError) -> [UInt8] {
        let body = try bodyParts()
        let length = try WireMessage.frameLength(bodyByteCount: body.byteCount, type: type)
        var frame: [UInt8] = []
        frame.reserveCapacity(WireProtocol.frameHeaderLength + body.byteCount)
        frame.append(contentsOf: withUnsafeBytes(of: length.bigEndian) { Array($0) })
        frame.append(type.rawValue)
        frame.append(contentsOf: body.head)
        body.payload.withUnsafeBytes { frame.append(contentsOf: $0) }
        frame.append(contentsOf: body.tail)
        return frame
    }

    /// The protobuf body in three pieces whose concatenation is the canonical encoding, so that an
    /// AudioData payload can be copied once, straight to its destination (see `WireBodyParts`).
    public func bodyParts() throws(WireError) -> WireBodyParts {
        do {
            switch self {
            case .audioData(let audio): return try WireBodyParts(audioData: audio)
            case .hello(let message): return WireBodyParts(head: try message.serializedBytes())
            case .helloAccepted(let message): return WireBodyParts(head: try message.serializedBytes())
            case .gap(let message): return WireBodyParts(head: try message.serializedBytes())
            case .ack(let message): return WireBodyParts(head: try message.serializedBytes())
            case .heartbeat(let message): return WireBodyParts(head: try message.serializedBytes())
            case .endOfStream(let message): return WireBodyParts(head: try message.serializedBytes())
            case .endAccepted(let message): return WireBodyParts(head: try message.serializedBytes())
            case .error(let message): return WireBodyParts(head: try message.serializedBytes())
            case .marker(let message): return WireBodyParts(head: try message.serializedBytes())
            case .filledGap(let message): return WireBodyParts(head: try message.serializedBytes())
            }
        } catch {
            throw .encodingFailed(type: type, reason: "\(error)")
        }
    }

    /// The value of the length field for a body of `bodyByteCount` bytes.
    static func frameLength(bodyByteCount: Int, type: WireMessageType) throws(WireError) -> UInt32 {
        guard let length = UInt32(exactly: bodyByteCount + 1) else {
            throw .encodingFailed(type: type, reason: "the body of \(bodyByteCount) bytes does not fit a frame")
        }
        return length
    }

    /// Decodes a frame body of the given type. The bytes are read only during the call; an AudioData
    /// payload is copied once, into the message.
    public static func decode(type: WireMessageType, body: UnsafeRawBufferPointer) throws(WireError) -> WireMessage {
        let bytes: Data
        if let base = body.baseAddress, body.count > 0 {
            bytes = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: body.count, deallocator: .none)
        } else {
            bytes = Data()
        }
        do {
            switch type {
            case .hello: return .hello(try Capture_V1_Hello(serializedBytes: bytes))
            case .helloAccepted: return .helloAccepted(try Capture_V1_HelloAccepted(serializedBytes: bytes))
            case .audioData: return .audioData(try Capture_V1_AudioData(serializedBytes: bytes))
            case .gap: return .gap(try Capture_V1_Gap(serializedBytes: bytes))
            case .ack: return .ack(try Capture_V1_Ack(serializedBytes: bytes))
            case .heartbeat: return .heartbeat(try Capture_V1_Heartbeat(serializedBytes: bytes))
            case .endOfStream: return .endOfStream(try Capture_V1_EndOfStream(serializedBytes: bytes))
            case .endAccepted: return .endAccepted(try Capture_V1_EndAccepted(serializedBytes: bytes))
            case .error: return .error(try Capture_V1_Error(serializedBytes: bytes))
            case .marker: return .marker(try Capture_V1_Marker(serializedBytes: bytes))
            case .filledGap: return .filledGap(try Capture_V1_FilledGap(serializedBytes: bytes))
            }
        } catch {
            throw .undecodableBody(type: type, byteCount: body.count, reason: "\(error)")
        }
    }
}
