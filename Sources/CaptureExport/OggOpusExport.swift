import CAF
import COgg
import Foundation

/// Remuxes an Opus recording into Ogg Opus (RFC 7845) through libogg, without re-encoding: the
/// OpusHead on the first page (pre-skip = the CAF's priming; for 3–8 channels the stored OpusHead
/// with its mapping family 1 table), OpusTags with the recording's times on the second, then every
/// packet with granule positions counted in 48 kHz samples from the stream's start, the last one
/// trimmed to pre-skip + valid frames so decoders drop the CAF's remainder. ffmpeg and browsers play
/// the result sample-exact.
enum OggOpusExport {
    static func write(_ file: CAFFile, facts: RecordingFacts, to path: String) throws(ExportError) {
        guard file.format.formatID == .opus else {
            throw .unsupported("\(file.path) is not an Opus recording: --to ogg remuxes Opus; export linear PCM as flac, wav or rf64")
        }
        guard let table = file.packetTable, let packets = file.packetCount else {
            throw .unreadable("\(file.path) has no packet table: finish it first with `capture-recv recover`")
        }
        let preSkip = Int(table.primingFrames)
        guard preSkip <= Int(UInt16.max) else { throw .unsupported("\(file.path) has \(preSkip) priming frames; an OpusHead holds at most 65535") }
        let head = try identificationHeader(file, preSkip: preSkip)
        let tags = commentHeader(facts)
        guard FileManager.default.createFile(atPath: path, contents: nil), let output = FileHandle(forWritingAtPath: path) else {
            throw .writeFailed("cannot create \(path)")
        }
        defer { try? output.close() }
        var stream = ogg_stream_state()
        guard ogg_stream_init(&stream, Int32.random(in: 1...Int32.max)) == 0 else { throw .writeFailed("libogg cannot start a stream") }
        defer { ogg_stream_clear(&stream) }
        var failure: ExportError?
        func emit(flush: Bool) {
            var page = ogg_page()
            while (flush ? ogg_stream_flush(&stream, &page) : ogg_stream_pageout(&stream, &page)) != 0 {
                do {
                    try output.write(contentsOf: Data(bytes: page.header, count: page.header_len))
                    try output.write(contentsOf: Data(bytes: page.body, count: page.body_len))
                } catch {
                    failure = .writeFailed("writing \(path) failed: \(error)")
                    return
                }
            }
        }
        func submit(_ bytes: [UInt8], number: Int64, granule: Int64, first: Bool, last: Bool) {
            var data = bytes
            data.withUnsafeMutableBufferPointer { buffer in
                var packet = ogg_packet(
                    packet: buffer.baseAddress, bytes: buffer.count, b_o_s: first ? 1 : 0, e_o_s: last ? 1 : 0,
                    granulepos: granule, packetno: number)
                ogg_stream_packetin(&stream, &packet)
            }
        }
        submit(head, number: 0, granule: 0, first: true, last: false)
        emit(flush: true)
        submit(tags, number: 1, granule: 0, first: false, last: false)
        emit(flush: true)
        let framesPerPacket = Int64(file.format.framesPerPacket)
        let end = Int64(preSkip) + table.validFrames
        for index in 0..<packets {
            let packet: [UInt8]
            do {
                packet = try file.readPacket(index)
            } catch {
                throw .unreadable("cannot read packet \(index) of \(file.path): \(error.description)")
            }
            let last = index == packets - 1
            let granule = last ? end : min((index + 1) * framesPerPacket, end)
            submit(packet, number: index + 2, granule: granule, first: false, last: last)
            emit(flush: false)
            if let failure { throw failure }
        }
        emit(flush: true)
        if let failure { throw failure }
        do { try output.synchronize() } catch { throw .writeFailed("writing \(path) failed: \(error)") }
    }

    /// RFC 7845 §5.1: the stored OpusHead (3–8 channels) or a family-0 one, with `preSkip`.
    static func identificationHeader(_ file: CAFFile, preSkip: Int) throws(ExportError) -> [UInt8] {
        let channels = file.format.channelCount
        var head: [UInt8]
        if file.magicCookie.count >= 19, file.magicCookie.starts(with: Array("OpusHead".utf8)) {
            head = file.magicCookie
        } else {
            guard channels <= 2 else {
                throw .unreadable("a \(channels)-channel Opus recording needs its OpusHead (mapping family 1) in the kuki chunk")
            }
            head = Array("OpusHead".utf8) + [1, UInt8(channels), 0, 0] + RIFFLabels.le32(48_000) + [0, 0, 0]
        }
        head[10] = UInt8(preSkip & 0xFF)
        head[11] = UInt8(preSkip >> 8)
        return head
    }

    /// RFC 7845 §5.2: vendor and comments with the recording's times.
    static func commentHeader(_ facts: RecordingFacts) -> [UInt8] {
        var comments: [String] = []
        if !facts.title.isEmpty { comments.append("TITLE=\(facts.title)") }
        if let iso = facts.isoTime { comments.append("DATE=\(iso)") }
        comments.append("ENCODER=capture-recv export (remuxed, not re-encoded)")
        comments.append("COMMENT=\(facts.summary(timeReference: facts.timeReference(rate: 48_000)))")
        if !facts.streamID.isEmpty { comments.append("STREAM_ID=\(facts.streamID)") }
        if !facts.sourceHost.isEmpty { comments.append("SOURCE_HOST=\(facts.sourceHost)") }
        if let reference = facts.timeReference(rate: 48_000) { comments.append("TIME_REFERENCE=\(reference)") }
        comments.append("CLOCK_SYNCHRONIZED=\(facts.clockSynchronized)")
        let vendor = Array("capture-recv".utf8)
        var bytes = Array("OpusTags".utf8) + RIFFLabels.le32(UInt32(vendor.count)) + vendor + RIFFLabels.le32(UInt32(comments.count))
        for comment in comments {
            let text = Array(comment.utf8)
            bytes += RIFFLabels.le32(UInt32(text.count)) + text
        }
        return bytes
    }
}
