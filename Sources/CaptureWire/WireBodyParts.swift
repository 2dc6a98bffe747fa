import Foundation
import SwiftProtobuf

/// A message body as `head + payload + tail`, byte for byte the canonical protobuf encoding
/// (fields in number order, unknown fields last). For AudioData, `payload` is the audio itself,
/// still in the message's own storage, and `head` ends with the payload field's tag and length;
/// other messages have everything in `head`. Writers copy the payload once, into their output.
public struct WireBodyParts: Sendable {
    /// Bytes before the payload.
    public var head: [UInt8]
    /// The audio payload, not yet copied; empty for messages other than AudioData.
    public var payload: Data
    /// Bytes after the payload.
    public var tail: [UInt8]

    /// Total body length in bytes.
    public var byteCount: Int { head.count + payload.count + tail.count }

    init(head: [UInt8], payload: Data = Data(), tail: [UInt8] = []) {
        self.head = head
        self.payload = payload
        self.tail = tail
    }

    /// Splits an AudioData: fields 1–4 serialized by SwiftProtobuf, then field 5 (payload) written
    /// here, then fields 6 (frame_count) and 7 (levels) serialized by SwiftProtobuf, and any
    /// unknown fields.
    init(audioData message: Capture_V1_AudioData) throws {
        var leading = message
        leading.payload = Data()
        leading.frameCount = 0
        leading.clearLevels()
        leading.unknownFields = UnknownStorage()
        var head: [UInt8] = try leading.serializedBytes()
        if !message.payload.isEmpty {
            head.append(0x2A)  // field 5, length-delimited
            ProtobufVarint.append(UInt64(message.payload.count), to: &head)
        }
        var tail: [UInt8] = []
        if message.frameCount != 0 || message.hasLevels {
            var trailing = Capture_V1_AudioData()
            trailing.frameCount = message.frameCount
            if message.hasLevels { trailing.levels = message.levels }
            tail = try trailing.serializedBytes()
        }
        tail.append(contentsOf: message.unknownFields.data)
        self.init(head: head, payload: message.payload, tail: tail)
    }
}

/// Protobuf base-128 varints.
enum ProtobufVarint {
    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }
}
