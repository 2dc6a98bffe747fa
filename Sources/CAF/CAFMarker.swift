/// A named position in a CAF file's audio, stored in the `mark` chunk with its name in the `strg` chunk.
///
/// The receiver records capture gaps and overruns as markers at the frame where they happened, named
/// `gap: …`, and the markers the person recording dropped (protocol `Marker`) named `marker` or
/// `marker: <label>` (`userMarkerName(label:)`, read back with `userLabel`).
public struct CAFMarker: Hashable, Sendable {
    /// The frame (sample index) the marker points at, counted from the start of the audio data.
    public var framePosition: Int64
    /// The marker's name, for example `"gap: 480 frames lost"`.
    public var name: String

    public init(framePosition: Int64, name: String) {
        self.framePosition = framePosition
        self.name = name
    }

    /// The name prefix of a marker the person recording dropped.
    public static let userMarkerPrefix = "marker"

    /// The name of a marker the person recording dropped: `marker`, or `marker: <label>`.
    public static func userMarkerName(label: String) -> String {
        label.isEmpty ? userMarkerPrefix : "\(userMarkerPrefix): \(label)"
    }

    /// The label of a marker the person recording dropped (empty when it has none); nil for any
    /// other marker (a gap's).
    public var userLabel: String? {
        if name == Self.userMarkerPrefix { return "" }
        let prefix = Self.userMarkerPrefix + ": "
        return name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : nil
    }

    /// The name of the marker of a gap with `reason` covering `length` frames.
    public static func gapName(length: Int64, reason: String) -> String {
        "gap: \(length) frames not captured (\(reason))"
    }
}

/// Encodes and decodes the `mark` and `strg` chunks.
///
/// `mark` body: `mSMPTE_TimeType` (UInt32, 0 = none), `mNumberMarkers` (UInt32), then per marker 28 bytes:
/// `mType` (UInt32, 0 = generic), `mFramePosition` (Float64), `mMarkerID` (UInt32, the name's string ID),
/// `mSMPTETime` (8 bytes, all zero: the time type "none" says it is unused), `mChannel` (UInt32, 0 = all
/// channels).
/// `strg` body: `mNumEntries` (UInt32), per entry `mStringID` (UInt32) and `mStringStartByteOffset`
/// (Int64, from the start of the string data), then the NUL-terminated UTF-8 strings.
enum CAFMarkerChunks {
    static let markerSize = 28
    static let stringIDSize = 12

    /// The `mark` and `strg` chunks for `markers`, or nothing when there are none. String IDs start at 1.
    static func encode(_ markers: [CAFMarker]) -> [UInt8] {
        guard !markers.isEmpty else { return [] }
        var mark = ByteWriter()
        mark.append(UInt32(0))
        mark.append(UInt32(markers.count))
        var strings = ByteWriter()
        var stringIDs = ByteWriter()
        for (index, marker) in markers.enumerated() {
            let stringID = UInt32(index + 1)
            mark.append(UInt32(0))
            mark.append(float64: Double(marker.framePosition))
            mark.append(stringID)
            mark.append(UInt64(0))
            mark.append(UInt32(0))
            stringIDs.append(stringID)
            stringIDs.append(Int64(strings.bytes.count))
            strings.append(nulTerminated: marker.name)
        }
        var strg = ByteWriter()
        strg.append(UInt32(markers.count))
        strg.append(contentsOf: stringIDs.bytes)
        strg.append(contentsOf: strings.bytes)
        return CAFChunkType.chunk(CAFChunkType.marker, body: mark.bytes)
            + CAFChunkType.chunk(CAFChunkType.strings, body: strg.bytes)
    }

    /// The strings of a `strg` body by string ID.
    static func decodeStrings(_ body: [UInt8], path: String) throws(CAFError) -> [UInt32: String] {
        func malformed(_ reason: String) -> CAFError { .malformedChunk(path: path, chunk: "strg", reason: reason) }
        var reader = ByteReader(body)
        guard let count = reader.read(UInt32.self) else { throw malformed("it is shorter than its entry count") }
        guard Int64(count) * Int64(stringIDSize) <= Int64(reader.remaining) else {
            throw malformed("it claims \(count) strings but has room for fewer")
        }
        var entries: [(id: UInt32, offset: Int64)] = []
        for _ in 0..<count {
            guard let id = reader.read(UInt32.self), let offset = reader.read(Int64.self) else {
                throw malformed("an entry is cut off")
            }
            entries.append((id, offset))
        }
        let stringsStart = reader.position
        var strings: [UInt32: String] = [:]
        for entry in entries {
            guard entry.offset >= 0, entry.offset < Int64(body.count - stringsStart) else {
                throw malformed("string \(entry.id) starts outside the chunk")
            }
            var stringReader = ByteReader(body, position: stringsStart + Int(entry.offset))
            guard let string = stringReader.readNulTerminated() else {
                throw malformed("string \(entry.id) is not NUL-terminated UTF-8")
            }
            strings[entry.id] = string
        }
        return strings
    }

    /// The markers of a `mark` body, named from `strings` (a marker without a string gets an empty name).
    static func decodeMarkers(_ body: [UInt8], strings: [UInt32: String], path: String) throws(CAFError) -> [CAFMarker] {
        func malformed(_ reason: String) -> CAFError { .malformedChunk(path: path, chunk: "mark", reason: reason) }
        var reader = ByteReader(body)
        guard reader.read(UInt32.self) != nil, let count = reader.read(UInt32.self) else {
            throw malformed("it is shorter than its header")
        }
        guard Int64(count) * Int64(markerSize) <= Int64(reader.remaining) else {
            throw malformed("it claims \(count) markers but has room for fewer")
        }
        var markers: [CAFMarker] = []
        for _ in 0..<count {
            guard reader.read(UInt32.self) != nil, let position = reader.readFloat64(),
                let id = reader.read(UInt32.self), reader.readBytes(8) != nil, reader.read(UInt32.self) != nil
            else { throw malformed("a marker is cut off") }
            guard position.isFinite, position >= 0, position < 0x1p62 else {
                throw malformed("a marker's frame position \(position) is not a frame index")
            }
            markers.append(CAFMarker(framePosition: Int64(position), name: strings[id] ?? ""))
        }
        return markers
    }
}
