/// The protocol's one frame decoder, pure. Its core is `step(_:)`: given the bytes not yet
/// consumed, it reads the preamble (receiver role, first), or one whole frame, or says more bytes
/// are needed, and says how many bytes it consumed. The NIO pipeline's `WireFrameDecoder` calls
/// `step` on its receive buffer; tests, vectors and fuzzers use the buffering API below (`feed`,
/// `next`, `decode`, `finish`), built on the same step. The first error is final and is thrown again
/// by every later call. An oversized frame is refused from its length field alone.
public struct FrameDecoder: Sendable {
    /// Which end of the connection this decoder reads for.
    public let role: WireRole
    /// The largest accepted length field.
    public let maxFrameBytes: Int
    /// The preamble's version once it has been read (receiver role only).
    public private(set) var preambleVersion: UInt8?

    /// What one decoding step found.
    public enum Step: Sendable, Equatable {
        /// The input ends before the preamble or frame it starts: feed more.
        case needMoreData
        /// The preamble, `consumed` bytes long, was read and accepted (receiver role).
        case preamble(version: UInt8, consumed: Int)
        /// A whole frame, `consumed` bytes long.
        case message(WireMessage, consumed: Int)
    }

    private var framesDecoded = 0
    private var failure: WireError?
    // The buffering API's input.
    private var buffer: [UInt8] = []
    private var readIndex = 0

    /// A decoder for `role`: a receiver expects the preamble before frames.
    public init(role: WireRole, maxFrameBytes: Int = WireProtocol.defaultMaxFrameBytes) {
        self.role = role
        self.maxFrameBytes = maxFrameBytes
    }

    // MARK: - The step

    /// Decodes what `input` (the bytes not yet consumed) starts with.
    public mutating func step(_ input: UnsafeRawBufferPointer) throws(WireError) -> Step {
        if let failure { throw failure }
        do throws(WireError) {
            return try decodeStep(input)
        } catch {
            failure = error
            throw error
        }
    }

    /// The peer closed with `remaining` bytes not consumed: throws if it closed in the middle of the
    /// preamble or of a frame (or, at the receiver, before sending any preamble).
    public mutating func finish(remaining: UnsafeRawBufferPointer) throws(WireError) {
        if let failure { throw failure }
        if role == .receiver, preambleVersion == nil {
            throw fail(.truncatedPreamble(receivedBytes: remaining.count))
        }
        guard remaining.count > 0 else { return }
        var expected: Int?
        if case .header(let header)? = try? FrameHeader.check(remaining, maxFrameBytes: maxFrameBytes) {
            expected = header.frameLength
        }
        throw fail(.truncatedFrame(receivedBytes: remaining.count, expectedBytes: expected))
    }

    private mutating func decodeStep(_ input: UnsafeRawBufferPointer) throws(WireError) -> Step {
        if role == .receiver, preambleVersion == nil {
            guard case .accepted(let version) = try WirePreamble.check(input) else { return .needMoreData }
            preambleVersion = version
            return .preamble(version: version, consumed: WireProtocol.preambleLength)
        }
        // Before the Hello (the first frame a receiver reads) nobody is authenticated: a smaller limit.
        let helloExpected = role == .receiver && framesDecoded == 0
        let check = try FrameHeader.check(
            input, maxFrameBytes: helloExpected ? min(maxFrameBytes, WireProtocol.maxHelloFrameBytes) : maxFrameBytes,
            isFirstFrameFromReceiver: role == .sender && framesDecoded == 0, isHello: helloExpected)
        guard case .header(let header) = check, input.count >= header.frameLength else { return .needMoreData }
        let body = UnsafeRawBufferPointer(rebasing: input[WireProtocol.frameHeaderLength..<header.frameLength])
        let message = try WireMessage.decode(type: header.type, body: body)
        framesDecoded += 1
        return .message(message, consumed: header.frameLength)
    }

    private mutating func fail(_ error: WireError) -> WireError {
        failure = error
        return error
    }

    // MARK: - Buffering API

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
        while true {
            let start = readIndex
            let pending = buffer
            let result = pending.withUnsafeBytes { raw in
                Result { () throws(WireError) -> Step in try step(UnsafeRawBufferPointer(rebasing: raw[start...])) }
            }
            switch try result.get() {
            case .needMoreData:
                return nil
            case .preamble(_, let consumed):
                readIndex += consumed
            case .message(let message, let consumed):
                readIndex += consumed
                return message
            }
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
        let start = readIndex
        let pending = buffer
        let result = pending.withUnsafeBytes { raw in
            Result { () throws(WireError) in try finish(remaining: UnsafeRawBufferPointer(rebasing: raw[start...])) }
        }
        try result.get()
    }
}
