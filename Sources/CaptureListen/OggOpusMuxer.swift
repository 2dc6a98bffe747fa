import COgg

/// Wraps Opus packets in Ogg pages as RFC 7845 lays them out, through libogg: the identification
/// header (OpusHead) alone on the first page, the comment header (OpusTags) on the second, then the
/// audio packets with granule positions counted in 48 kHz samples from the start of this Ogg stream.
///
/// One muxer makes one logical Ogg stream; each listener has its own. It is not thread-safe: the
/// listen hub uses it from its serial executor only. Pages are produced only when asked
/// (`headerPages()`, `takePages()`), which flushes everything appended so far, so a page never
/// waits for more packets (low latency at the cost of a few bytes of page header per flush).
public final class OggOpusMuxer {
    /// The vendor string written into the OpusTags header.
    public static let vendor = "capture-recv live listening"

    private let stream: UnsafeMutablePointer<ogg_stream_state>
    private let identificationHeader: [UInt8]
    private var packetNumber: Int64 = 0
    /// Samples (48 kHz) in the packets appended so far: the granule position of the last one.
    public private(set) var granulePosition: Int64 = 0
    private var headersWritten = false

    /// Creates a muxer for a stream described by `identificationHeader` (the OpusHead bytes) with
    /// Ogg serial number `serialNumber`.
    public init(identificationHeader: [UInt8], serialNumber: Int32) {
        self.identificationHeader = identificationHeader
        stream = UnsafeMutablePointer<ogg_stream_state>.allocate(capacity: 1)
        // ogg_stream_init fails only when memory runs out; then the stream stays empty and
        // takePages() returns nothing, which ends the listener's audio (and nothing else).
        ogg_stream_init(stream, serialNumber)
    }

    deinit {
        ogg_stream_clear(stream)
        stream.deallocate()
    }

    /// The first two pages: OpusHead, then OpusTags, each flushed onto its own page. Returns an
    /// empty array when called again.
    public func headerPages() -> [UInt8] {
        guard !headersWritten else { return [] }
        headersWritten = true
        var out: [UInt8] = []
        submit(identificationHeader, granule: 0, beginsStream: true)
        flush(into: &out)
        submit(Self.commentHeader(), granule: 0, beginsStream: false)
        flush(into: &out)
        return out
    }

    /// Adds one Opus packet that decodes to `samples` samples at 48 kHz.
    public func append(packet: UnsafeRawBufferPointer, samples: Int) {
        if !headersWritten {
            // Headers first, always: a muxer never emits audio before them.
            pendingHeaders = headerPages()
        }
        granulePosition += Int64(samples)
        submit(packet, granule: granulePosition, beginsStream: false)
    }

    /// Adds one Opus packet held in an array.
    public func append(packet: [UInt8], samples: Int) {
        packet.withUnsafeBytes { append(packet: $0, samples: samples) }
    }

    /// Every page completed since the last call, including a final partial page: whatever was
    /// appended is on its way.
    public func takePages() -> [UInt8] {
        var out = pendingHeaders
        pendingHeaders = []
        flush(into: &out)
        return out
    }

    private var pendingHeaders: [UInt8] = []

    private func submit(_ bytes: [UInt8], granule: Int64, beginsStream: Bool) {
        bytes.withUnsafeBytes { submit($0, granule: granule, beginsStream: beginsStream) }
    }

    private func submit(_ bytes: UnsafeRawBufferPointer, granule: Int64, beginsStream: Bool) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // libogg copies the packet's bytes into the stream state; it never writes through this pointer.
        var packet = ogg_packet(
            packet: UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)),
            bytes: bytes.count, b_o_s: beginsStream ? 1 : 0, e_o_s: 0,
            granulepos: granule, packetno: packetNumber
        )
        packetNumber += 1
        ogg_stream_packetin(stream, &packet)
    }

    private func flush(into out: inout [UInt8]) {
        var page = ogg_page()
        while ogg_stream_flush(stream, &page) != 0 {
            if let header = page.header, page.header_len > 0 {
                out.append(contentsOf: UnsafeBufferPointer(start: header, count: page.header_len))
            }
            if let body = page.body, page.body_len > 0 {
                out.append(contentsOf: UnsafeBufferPointer(start: body, count: page.body_len))
            }
        }
    }

    /// The OpusTags header of RFC 7845 §5.2: "OpusTags", the vendor string, no user comments.
    static func commentHeader() -> [UInt8] {
        var out = Array("OpusTags".utf8)
        let vendorBytes = Array(vendor.utf8)
        appendLittleEndian(UInt32(vendorBytes.count), to: &out)
        out.append(contentsOf: vendorBytes)
        appendLittleEndian(UInt32(0), to: &out)
        return out
    }

    private static func appendLittleEndian(_ value: UInt32, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }
}
