/// A pure, incremental frame decoder: feed it bytes in chunks of any size and take messages out.
/// Incomplete input waits for more; the first error is final and is thrown again by every later call.
/// At the receiver it checks the preamble first. It never buffers more than one frame's worth of
/// input beyond what was fed in one chunk, and refuses an oversized frame from its length field alone.
public struct FrameDecoder: Sendable {
    /// Which end of the connection this decoder reads for.
    public let role: WireRole
    /// The largest accepted length field.
    public let maxFrameBytes: Int
    /// The preamble's version once it has been read (receiver role only).
    public private(set) var preambleVersion: UInt8?

    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var framesDecoded = 0
    private var failure: WireError?

    /// A decoder for `role`: a receiver expects the preamble before frames.
    public init(role: WireRole, maxFrameBytes: Int = WireProtocol.defaultMaxFrameBytes) {
        self.role = role
        self.maxFrameBytes = maxFrameBytes
    }

    /// Bytes fed in but not yet decoded.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        guard failure == nil else { return }
        if readIndex > 0, readIndex >= buffer.count / 2 {
            buffer.removeFirst(readIndex)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete message, or nil when more bytes are needed.
    public mutating func next() throws(WireError) -> WireMessage? {
        if let failure { throw failure }
        do throws(WireError) {
            return try decodeNext()
        } catch {
            failure = error
            throw error
        }
    }

    /// Feeds bytes and returns every message now complete.
    public mutating func decode(_ bytes: some Sequence<UInt8>) throws(WireError) -> [WireMessage] {
        feed(bytes)
        var messages: [WireMessage] = []
        while let message = try next() { messages.append(message) }
        return messages
    }

    /// Call when the peer has closed: throws if it closed in the middle of the preamble or a frame.
    public mutating func finish() throws(WireError) {
        if let failure { throw failure }
        let remaining = bufferedByteCount
        guard remaining > 0 else {
            if role == .receiver, preambleVersion == nil { throw fail(.truncatedPreamble(receivedBytes: 0)) }
            return
        }
        if role == .receiver, preambleVersion == nil { throw fail(.truncatedPreamble(receivedBytes: remaining)) }
        let expected: Int? = buffer.withUnsafeBytes { raw in
            let pending = UnsafeRawBufferPointer(rebasing: raw[readIndex...])
            guard case .header(let header)? = try? FrameHeader.check(pending, maxFrameBytes: maxFrameBytes) else {
                return nil
            }
            return header.frameLength
        }
        throw fail(.truncatedFrame(receivedBytes: remaining, expectedBytes: expected))
    }

    private mutating func fail(_ error: WireError) -> WireError {
        failure = error
        return error
    }

    private mutating func decodeNext() throws(WireError) -> WireMessage? {
        if role == .receiver, preambleVersion == nil {
            guard case .accepted(let version) = try WirePreamble.check(buffer[readIndex...]) else { return nil }
            preambleVersion = version
            readIndex += WireProtocol.preambleLength
        }
        let start = readIndex
        let limit = maxFrameBytes
        let firstFromReceiver = role == .sender && framesDecoded == 0
        let result: Result<(WireMessage, Int)?, WireError> = buffer.withUnsafeBytes { raw in
            let pending = UnsafeRawBufferPointer(rebasing: raw[start...])
            do throws(WireError) {
                let check = try FrameHeader.check(
                    pending, maxFrameBytes: limit, isFirstFrameFromReceiver: firstFromReceiver)
                guard case .header(let header) = check, pending.count >= header.frameLength else {
                    return .success(nil)
                }
                let body = UnsafeRawBufferPointer(rebasing: pending[WireProtocol.frameHeaderLength..<header.frameLength])
                return .success((try WireMessage.decode(type: header.type, body: body), header.frameLength))
            } catch {
                return .failure(error)
            }
        }
        guard let (message, consumed) = try result.get() else { return nil }
        readIndex += consumed
        framesDecoded += 1
        return message
    }
}
