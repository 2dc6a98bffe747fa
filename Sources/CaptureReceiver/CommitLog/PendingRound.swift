import CaptureCore

/// What one stream wrote to its recording since its last round, as that round will commit it to the
/// receiver's commit log: the round record's body, built as the recording is written, the file's
/// packets before it, and the audio bytes it holds (a round starts early past `SyncPolicy.bytes`).
/// The `SegmentingFileWriter` adds to it as it writes; the `StreamWriter` takes it at each round.
struct PendingRound {
    private var body = RoundRecordBody()
    /// The file's packets before the body's first operation.
    private var packetsBefore: Int64
    /// Audio bytes added since the last round (a PCM gap's silence counts one).
    private(set) var bytes = 0

    init(packetsBefore: Int64) {
        self.packetsBefore = packetsBefore
    }

    /// Audio appended to the file.
    mutating func audio(_ audio: TimedAudio) {
        audio.payload.withUnsafeBytes { body.appendAudio($0, packetSizes: audio.packetSizes, frameCount: audio.frameCount) }
        bytes += audio.payload.count
    }

    /// Linear PCM silence appended over a gap.
    mutating func silence(frames: Int64) {
        body.appendSilence(frames: frames)
        bytes += 1
    }

    /// A marker added to the file.
    mutating func marker(framePosition: Int64, name: String) {
        body.appendMarker(framePosition: framePosition, name: name)
    }

    /// The round's body, ending at `position` (the file then holds `position.packets` packets); the
    /// next round's begins empty.
    mutating func take(position: StreamPositionRecord) -> [UInt8] {
        let taken = body.take(packetsBefore: packetsBefore, position: position)
        packetsBefore = position.packets
        bytes = 0
        return taken
    }

    /// Forgets what was added: the file holding it is durable by itself (finished at a segment cut,
    /// or synced alone), or the stream goes on in a new file that holds `packetsBefore` packets.
    mutating func restart(packetsBefore: Int64) {
        body.discard()
        self.packetsBefore = packetsBefore
        bytes = 0
    }
}
