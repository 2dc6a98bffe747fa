import CaptureCore

/// The receiver's side of one connection's protocol, pure: it checks the order and the contents of
/// what the sender sends and says what to do (`ReceiverAction`). A thrown `WireError` ends the
/// connection: send its `errorFrame` and close; every later call throws it again.
///
/// Order: preamble, Hello, (receiver decides: `accept(resumingAt:)`), then AudioData and Gap in
/// sequence, EndOfStream; Heartbeat and Error at any time after Hello.
public struct ReceiverStreamState: Sendable, FinalErrorLatch {
    /// Where the connection is in the protocol.
    public enum Phase: Sendable, Equatable {
        case awaitingPreamble
        case awaitingHello
        /// Hello received; the receiver has not yet accepted or rejected it.
        case awaitingDecision
        case streaming
        /// EndOfStream received.
        case ended
        /// An error ended the connection, or the sender reported a fatal error.
        case closed
    }

    /// Where the connection is in the protocol.
    public private(set) var phase: Phase = .awaitingPreamble
    /// The sender's Hello, once validated.
    public private(set) var hello: ValidatedHello?
    /// Where the stream stands: what was received, or already durable before this connection.
    public private(set) var received: StreamPosition = .start
    /// The sequence expected next.
    public var nextSequence: UInt64 { received.nextSequence }
    /// The sample index expected next.
    public var nextSampleTime: Int64 { received.nextSampleTime }
    /// Limits applied to the Hello.
    public let limits: ValidatedHello.Limits

    /// The error that ended the machine, if any (`FinalErrorLatch`).
    var failure: WireError?

    /// The highest sequence received (or already durable before this connection); 0 when none.
    public var highestReceivedSequence: UInt64 { received.lastSequence }

    public init(limits: ValidatedHello.Limits = ValidatedHello.Limits()) {
        self.limits = limits
    }

    /// The preamble was read (the frame decoder checked magic and version).
    public mutating func receivePreamble(version: UInt8) throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .awaitingPreamble else {
                throw .sendOutOfOrder("the preamble was reported twice")
            }
            guard version == WireProtocol.version else {
                throw .unsupportedVersion(received: UInt32(version), supported: UInt32(WireProtocol.version))
            }
            state.phase = .awaitingHello
        }
    }

    /// Accepts the Hello and fixes where the stream resumes. Throws `cannotResume` when the sender
    /// no longer holds the audio from `resume.nextSequence` on.
    public mutating func accept(resumingAt resume: StreamPosition) throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .awaitingDecision, let hello = state.hello else {
                throw .sendOutOfOrder("accept(resumingAt:) needs a Hello awaiting a decision")
            }
            let oldestHeld = hello.message.resumeFromSequence
            if oldestHeld > 0, resume.nextSequence < oldestHeld {
                throw .cannotResume(requested: resume.nextSequence, oldestHeld: oldestHeld, heldUntilSampleTime: resume.nextSampleTime)
            }
            state.received = resume
            state.phase = .streaming
        }
    }

    /// Rejects the Hello (the receiver sends its own Error); the connection is over.
    public mutating func reject() {
        phase = .closed
    }

    /// How far beyond the time that has passed since a stream's start a gap may carry it: one hour,
    /// for senders whose clock runs ahead of the receiver's.
    public static let gapClockMargin: Int64 = 3_600

    /// Checks one message from the sender and says what to do with it. `now` (Unix time in
    /// nanoseconds on the receiver's clock) holds gaps to the time that has passed since the
    /// stream's start: without it a gap is checked only against the sample timeline.
    public mutating func receive(_ message: WireMessage, atUnixNanoseconds now: Int64? = nil) throws(WireError) -> ReceiverAction {
        try run { (state: inout Self) throws(WireError) in try state.handle(message, now: now) }
    }

    mutating func closeAfterFailure() {
        phase = .closed
    }

    private mutating func handle(_ message: WireMessage, now: Int64?) throws(WireError) -> ReceiverAction {
        switch (phase, message) {
        case (.awaitingPreamble, _):
            throw .sendOutOfOrder("a message was reported before the preamble")
        case (.awaitingHello, .hello(let hello)):
            let validated = try ValidatedHello(hello, limits: limits)
            self.hello = validated
            phase = .awaitingDecision
            return .decideOnHello(validated)
        case (.awaitingHello, _):
            throw .unexpectedMessage(message.type, expecting: "Hello")
        case (_, .error(let error)):
            if error.fatal { phase = .closed }
            return .peerError(error)
        case (.awaitingDecision, .heartbeat), (.streaming, .heartbeat), (.ended, .heartbeat):
            return .heartbeat
        case (.streaming, .audioData(let audio)):
            return try receiveAudio(audio)
        case (.streaming, .gap(let gap)):
            return try receiveGap(gap, now: now)
        case (.streaming, .marker(let marker)):
            return try receiveMarker(marker)
        case (.streaming, .filledGap(let gap)):
            return try receiveFilledGap(gap, now: now)
        case (.streaming, .endOfStream(let end)):
            return try receiveEnd(end)
        case (.awaitingDecision, _):
            throw .unexpectedMessage(message.type, expecting: "nothing until HelloAccepted is sent")
        case (.streaming, _):
            throw .unexpectedMessage(message.type, expecting: "AudioData, Gap, Marker, FilledGap, Heartbeat or EndOfStream")
        case (.ended, _):
            throw .unexpectedMessage(message.type, expecting: "nothing after EndOfStream")
        case (.closed, _):
            throw .unexpectedMessage(message.type, expecting: "nothing: the connection is closed")
        }
    }

    /// Sequence rule shared by AudioData, Gap, Marker and FilledGap: true when it is the next one, false for a duplicate.
    private func isNext(_ sequence: UInt64, type: WireMessageType) throws(WireError) -> Bool {
        guard sequence >= WireProtocol.firstSequence else {
            throw .invalidField(message: type, field: "sequence", reason: "sequences start at 1")
        }
        if sequence < nextSequence { return false }
        guard sequence == nextSequence else { throw .sequenceGap(expected: nextSequence, received: sequence) }
        return true
    }

    private mutating func receiveAudio(_ audio: Capture_V1_AudioData) throws(WireError) -> ReceiverAction {
        guard try isNext(audio.sequence, type: .audioData) else { return .ignoreDuplicate(sequence: audio.sequence) }
        guard let format = hello?.format else { throw .sendOutOfOrder("streaming without a Hello") }
        let sequence = audio.sequence
        guard audio.firstSampleTime == nextSampleTime else {
            throw .sampleTimeMismatch(sequence: sequence, expected: nextSampleTime, received: audio.firstSampleTime)
        }
        guard audio.packetCount > 0 else {
            throw .invalidField(message: .audioData, field: "packet_count", reason: "sequence \(sequence) has no packets")
        }
        if format.isVariableBitRate {
            guard audio.packetSizes.count == Int(audio.packetCount) else {
                throw .packetSizeCountMismatch(
                    sequence: sequence, packetCount: audio.packetCount, sizeCount: audio.packetSizes.count)
            }
            guard !audio.packetSizes.contains(0) else {
                throw .invalidField(
                    message: .audioData, field: "packet_sizes", reason: "sequence \(sequence) has an empty packet; a packet has at least 1 byte")
            }
            let sum = audio.packetSizes.reduce(UInt64(0)) { $0 + UInt64($1) }
            guard sum == UInt64(audio.payload.count) else {
                throw .packetSizesSumMismatch(sequence: sequence, sizesSum: sum, payloadBytes: audio.payload.count)
            }
        } else {
            guard audio.packetSizes.isEmpty else {
                throw .invalidField(
                    message: .audioData, field: "packet_sizes",
                    reason: "sequence \(sequence) has packet sizes but the format has constant-size packets")
            }
            let expected = UInt64(audio.packetCount) * UInt64(format.bytesPerPacket)
            guard expected == UInt64(audio.payload.count) else {
                throw .payloadSizeMismatch(sequence: sequence, expectedBytes: expected, receivedBytes: audio.payload.count)
            }
        }
        let frames = UInt64(audio.packetCount) * UInt64(format.framesPerPacket)
        guard frames == UInt64(audio.frameCount) else {
            throw .frameCountMismatch(sequence: sequence, expected: frames, received: audio.frameCount)
        }
        let end = try advance(nextSampleTime, by: frames, type: .audioData, field: "frame_count")
        received = received.appendingEntry(endingAt: end)
        return .writeAudio(audio)
    }

    private mutating func receiveGap(_ gap: Capture_V1_Gap, now: Int64?) throws(WireError) -> ReceiverAction {
        guard try isNext(gap.sequence, type: .gap) else { return .ignoreDuplicate(sequence: gap.sequence) }
        guard gap.sampleTime == nextSampleTime else {
            throw .sampleTimeMismatch(sequence: gap.sequence, expected: nextSampleTime, received: gap.sampleTime)
        }
        guard gap.lengthFrames > 0 else {
            throw .invalidField(message: .gap, field: "length_frames", reason: "a gap covers at least one frame")
        }
        let end = try advance(nextSampleTime, by: gap.lengthFrames, type: .gap, field: "length_frames")
        if let now, let hello {
            try Self.checkGapWithinElapsedTime(lengthFrames: gap.lengthFrames, endingAt: end, hello: hello, now: now, message: .gap)
        }
        received = received.appendingEntry(endingAt: end)
        return .recordGap(gap)
    }

    /// A marker takes the next sequence and covers no frames: it stands where the timeline stands.
    /// Its label is at most `WireProtocol.maximumMarkerLabelBytes` of UTF-8 without NUL (a CAF
    /// marker name is a C string).
    private mutating func receiveMarker(_ marker: Capture_V1_Marker) throws(WireError) -> ReceiverAction {
        guard try isNext(marker.sequence, type: .marker) else { return .ignoreDuplicate(sequence: marker.sequence) }
        guard marker.sampleTime == nextSampleTime else {
            throw .sampleTimeMismatch(sequence: marker.sequence, expected: nextSampleTime, received: marker.sampleTime)
        }
        guard marker.label.utf8.count <= WireProtocol.maximumMarkerLabelBytes else {
            throw .invalidField(
                message: .marker, field: "label",
                reason: "sequence \(marker.sequence)'s label has \(marker.label.utf8.count) bytes; at most \(WireProtocol.maximumMarkerLabelBytes) are allowed")
        }
        guard !marker.label.utf8.contains(0) else {
            throw .invalidField(message: .marker, field: "label", reason: "sequence \(marker.sequence)'s label contains a NUL character")
        }
        received = received.appendingEntry(endingAt: nextSampleTime)
        return .recordMarker(marker)
    }

    /// A filled gap takes the next sequence and covers no frames of its own: the audio already
    /// received carries its stretch as encoded silence, so the stretch begins at or before where the
    /// timeline stands, and not before the stream's first sample. Its end may lie ahead (the audio
    /// that covers the rest follows), held to the time that has passed like a gap's.
    private mutating func receiveFilledGap(_ gap: Capture_V1_FilledGap, now: Int64?) throws(WireError) -> ReceiverAction {
        guard try isNext(gap.sequence, type: .filledGap) else { return .ignoreDuplicate(sequence: gap.sequence) }
        guard gap.sampleTime <= nextSampleTime else {
            throw .invalidField(
                message: .filledGap, field: "sample_time",
                reason: "sequence \(gap.sequence) labels frames from \(gap.sampleTime) on, but the audio received ends at \(nextSampleTime): a filled gap labels audio already sent")
        }
        if let hello, gap.sampleTime < hello.message.startSampleTime {
            throw .invalidField(
                message: .filledGap, field: "sample_time",
                reason: "sequence \(gap.sequence) labels frames from \(gap.sampleTime) on, before the stream's start (\(hello.message.startSampleTime))")
        }
        guard gap.lengthFrames > 0 else {
            throw .invalidField(message: .filledGap, field: "length_frames", reason: "a gap covers at least one frame")
        }
        let end = try advance(gap.sampleTime, by: gap.lengthFrames, type: .filledGap, field: "length_frames")
        if let now, let hello {
            try Self.checkGapWithinElapsedTime(
                lengthFrames: gap.lengthFrames, endingAt: end, hello: hello, now: now, message: .filledGap)
        }
        received = received.appendingEntry(endingAt: nextSampleTime)
        return .recordFilledGap(gap)
    }

    private mutating func receiveEnd(_ end: Capture_V1_EndOfStream) throws(WireError) -> ReceiverAction {
        guard end.lastSequence == highestReceivedSequence else {
            throw .endOfStreamSequenceMismatch(lastReceived: highestReceivedSequence, claimed: end.lastSequence)
        }
        guard end.endSampleTime == nextSampleTime else {
            throw .endOfStreamSampleTimeMismatch(expected: nextSampleTime, claimed: end.endSampleTime)
        }
        if let format = hello?.format, end.remainderFrames > 0 {
            guard format.isVariableBitRate, end.remainderFrames < format.framesPerPacket else {
                throw .invalidField(
                    message: .endOfStream, field: "remainder_frames",
                    reason: "\(end.remainderFrames) remainder frames; only VBR streams have them, fewer than one packet's \(format.framesPerPacket) frames")
            }
        }
        if let hello, hello.format.isVariableBitRate {
            // Priming and remainder are frames of the stream's packets: together never more than the stream.
            let frames = end.endSampleTime - hello.message.startSampleTime
            let trimmed = Int64(hello.message.primingFrames) + Int64(end.remainderFrames)
            guard trimmed <= frames else {
                throw .invalidField(
                    message: .endOfStream, field: "remainder_frames",
                    reason: "priming \(hello.message.primingFrames) and remainder \(end.remainderFrames) frames exceed the stream's \(frames) frames")
            }
        }
        phase = .ended
        return .finishStream(end)
    }

    /// A gap stands for time during which audio was not captured, so it cannot carry the stream
    /// beyond the time that has passed since the stream's start (Hello's `start_time_unix_ns`, on the
    /// receiver's clock) plus `gapClockMargin`: a claimed gap of years is a lie, refused before it
    /// costs anything.
    private static func checkGapWithinElapsedTime(
        lengthFrames: UInt64, endingAt end: Int64, hello: ValidatedHello, now: Int64, message: WireMessageType
    ) throws(WireError) {
        let rate = hello.format.sampleRate
        let elapsedSeconds = max(0, (Double(now) - Double(hello.message.startTimeUnixNs)) / 1e9)
        let allowedSeconds = elapsedSeconds + Double(gapClockMargin)
        let streamSeconds = Double(end - hello.message.startSampleTime) / rate
        guard streamSeconds <= allowedSeconds else {
            throw .invalidField(
                message: message, field: "length_frames",
                reason: "a gap of \(lengthFrames) frames would take the stream to \(Int(streamSeconds)) s after its start, but only \(Int(elapsedSeconds)) s have passed since its start time; a gap cannot be longer than the time that passed (\(gapClockMargin) s allowed for a clock running ahead)")
        }
    }

    /// The position `frames` after `time`, which must not pass the end of the stream's sample
    /// timeline (`ValidatedHello.timelineEnd`: 100 years after its start), so that every position and
    /// time computed from it stays far inside Int64 (PROTOCOL.md §6.1.4).
    private func advance(_ time: Int64, by frames: UInt64, type: WireMessageType, field: String) throws(WireError) -> Int64 {
        let end = hello?.timelineEnd ?? Int64.max
        guard let step = Int64(exactly: frames), case (let sum, false) = time.addingReportingOverflow(step), sum <= end else {
            throw .invalidField(
                message: type, field: field,
                reason: "\(frames) frames would carry the stream past the end of its sample timeline (\(WireProtocol.maximumTimelineSeconds / 31_557_600) years after its start)")
        }
        return sum
    }
}
