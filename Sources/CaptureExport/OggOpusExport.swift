import CAF
import CaptureErrorText
import COgg
import Foundation

/// Remuxes an Opus recording into Ogg Opus (RFC 7845) through libogg, without re-encoding: the
/// OpusHead on the first page (pre-skip = the CAF's priming; for 3–8 channels the stored OpusHead
/// with its mapping family 1 table), OpusTags with the recording's times on the second, then every
/// packet with granule positions counted in 48 kHz samples from the stream's start, the last one
/// trimmed to pre-skip + valid frames so decoders drop the CAF's remainder. ffmpeg and browsers play
/// the result sample-exact.
enum OggOpusExport {
    /// One packet of the stream after the two headers: its bytes, its granule position, its
    /// number (from 2) and whether it ends the stream.
    struct Packet {
        var bytes: [UInt8]
        var granule: Int64
        var number: Int64
        var isLast: Bool
    }

    /// The OpusHead and OpusTags packets, then each audio packet with its granule position, handed
    /// to `body` in order: what `write` puts on pages, and what the dry run counts.
    static func packets(_ plan: ExportPlan, _ body: (Packet) throws(ExportError) -> Void) throws(ExportError) {
        let file = plan.file
        guard file.format.formatID == .opus, let table = file.packetTable, let packets = file.packetCount else {
            throw .oggNeedsOpus(path: file.path, packetTable: true)
        }
        let preSkip = Int64(table.primingFrames)
        guard preSkip <= Int64(UInt16.max) else {
            throw .unsupported("cannot export \(file.path): it has \(preSkip) priming frames, more than the 65535 an OpusHead's pre-skip holds")
        }
        try body(Packet(bytes: identificationHeader(plan, preSkip: Int(preSkip)), granule: 0, number: 0, isLast: false))
        let chapters = ExportChapters.comments(file.markers, leadingFrames: plan.leadingFrames, validFrames: plan.validFrames, sampleRate: 48_000)
        try body(Packet(bytes: try commentHeader(plan.facts, path: file.path, chapters: chapters), granule: 0, number: 1, isLast: false))
        // The reader checked preSkip + validFrames ≤ packets × frames per packet (≤ 5760): the
        // granules below never exceed `end` nor overflow.
        let framesPerPacket = Int64(file.format.framesPerPacket)
        let end = preSkip + table.validFrames
        var granule: Int64 = 0
        for index in 0..<packets {
            let bytes: [UInt8]
            do {
                bytes = try file.readPacket(index)
            } catch {
                throw .unreadable("cannot export \(file.path): its packet \(index) cannot be read: \(error.description)")
            }
            let isLast = index == packets - 1
            granule = isLast ? end : min(granule + framesPerPacket, end)
            try body(Packet(bytes: bytes, granule: granule, number: index + 2, isLast: isLast))
        }
    }

    /// Writes the Ogg Opus stream of `plan` to `path` (a temporary name), naming `destination` in errors.
    static func write(_ plan: ExportPlan, to path: String, destination: String) throws(ExportError) {
        func failed(_ reason: String) -> ExportError { .writeFailed("cannot write \(destination): \(reason)") }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { throw failed(SystemErrorText.errno(errno)) }
        let output = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        defer { try? output.close() }
        var stream = ogg_stream_state()
        guard ogg_stream_init(&stream, Int32.random(in: 1...Int32.max)) == 0 else { throw failed("libogg cannot start a stream") }
        defer { ogg_stream_clear(&stream) }
        func emit(flush: Bool) throws(ExportError) {
            var page = ogg_page()
            while (flush ? ogg_stream_flush(&stream, &page) : ogg_stream_pageout(&stream, &page)) != 0 {
                do {
                    try output.write(contentsOf: Data(bytes: page.header, count: page.header_len))
                    try output.write(contentsOf: Data(bytes: page.body, count: page.body_len))
                } catch {
                    throw failed(SystemErrorText.describe(error))
                }
            }
        }
        try packets(plan) { (packet) throws(ExportError) in
            var data = packet.bytes
            data.withUnsafeMutableBufferPointer { buffer in
                var submitted = ogg_packet(
                    packet: buffer.baseAddress, bytes: buffer.count, b_o_s: packet.number == 0 ? 1 : 0, e_o_s: packet.isLast ? 1 : 0,
                    granulepos: packet.granule, packetno: packet.number)
                ogg_stream_packetin(&stream, &submitted)
            }
            // The headers each end a page of their own (RFC 7845 §3).
            try emit(flush: packet.number < 2)
        }
        try emit(flush: true)
    }

    /// RFC 7845 §5.1: the stored OpusHead (checked by the plan) or a family-0 one, with `preSkip`.
    static func identificationHeader(_ plan: ExportPlan, preSkip: Int) -> [UInt8] {
        var head = plan.opusHead ?? Array("OpusHead".utf8) + [1, UInt8(plan.channels), 0, 0] + RIFFLabels.le32(48_000) + [0, 0, 0]
        head[10] = UInt8(truncatingIfNeeded: preSkip)
        head[11] = UInt8(truncatingIfNeeded: preSkip >> 8)
        return head
    }

    /// RFC 7845 §5.2: vendor and comments with the recording's times, and `chapters` (the markers
    /// the person recording dropped, `ExportChapters`).
    static func commentHeader(_ facts: RecordingFacts, path: String, chapters: [String] = []) throws(ExportError) -> [UInt8] {
        var comments: [String] = []
        if !facts.title.isEmpty { comments.append("TITLE=\(facts.title)") }
        if let iso = facts.isoTime { comments.append("DATE=\(iso)") }
        comments.append("ENCODER=capture-recv export (remuxed, not re-encoded)")
        comments.append("COMMENT=\(facts.summary(timeReference: facts.timeReference(rate: 48_000)))")
        if !facts.streamID.isEmpty { comments.append("STREAM_ID=\(facts.streamID)") }
        if !facts.sourceHost.isEmpty { comments.append("SOURCE_HOST=\(facts.sourceHost)") }
        if let reference = facts.timeReference(rate: 48_000) { comments.append("TIME_REFERENCE=\(reference)") }
        comments.append("CLOCK_SYNCHRONIZED=\(facts.clockSynchronized)")
        comments += chapters
        let vendor = Array("capture-recv".utf8)
        var bytes = Array("OpusTags".utf8) + RIFFLabels.le32(UInt32(vendor.count)) + vendor + RIFFLabels.le32(UInt32(comments.count))
        for comment in comments {
            let text = Array(comment.utf8)
            // The info chunk (at most 256 MiB) bounds every comment; checked all the same.
            guard let length = UInt32(exactly: text.count) else {
                throw .unsupported("cannot export \(path): a comment of \(text.count) bytes does not fit an Ogg Opus comment header")
            }
            bytes += RIFFLabels.le32(length) + text
        }
        return bytes
    }
}
