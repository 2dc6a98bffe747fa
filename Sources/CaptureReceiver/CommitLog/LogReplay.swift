import CAF
import CaptureCommitLog
import CaptureCore
import Foundation

/// Replays one commit log's records into the recordings they describe, from the log's checkpoint
/// to its end: each round's operations are written again at the offsets they were written before
/// (the file is first cut back to the packets it held before the round), so replay is idempotent and
/// a crash during it only means replaying again.
///
/// A round is replayed only when the file's position log (written at checkpoints, at a stream's
/// detach and after a replay, always after the audio it describes was synced) does not already
/// cover it: a receiver that took the stream over from this log's dead owner has replayed the log's
/// rounds and recorded more, and its audio must never be cut back to this log's.
///
/// Each stream is claimed in the stream index while its rounds are replayed (shared storage: no
/// other receiver writes it meanwhile). Files are opened only to write them (their writers hold no
/// descriptor), so a log of 10,000 streams needs no descriptor for each.
final class LogReplay {
    /// Audio gathered per file before it is written.
    static let writeBehind = 16_384

    /// What replay did, for the receiver's log.
    struct Summary: Equatable {
        var records = 0
        var files = 0
        var skippedRounds = 0
        /// Files not replayed because another connection or receiver holds their stream (a takeover
        /// does not wait for them: their holder replays them); the log is then not done.
        var heldElsewhere = 0
        /// Files whose acknowledged audio could not be replayed, and why.
        var failures: [String] = []
    }

    private let index: StreamIndex
    /// A claim the caller holds already (a takeover replays while holding its stream's claim).
    private let held: (stream: UUID, claim: StreamClaim)?
    /// How long to wait for a stream someone else holds; nil: do not wait, leave it to its holder.
    private let waitForClaim: Duration?
    private var subjects: [UInt64: LoggedFile] = [:]
    private var files: [String: ReplayedFile] = [:]
    private(set) var summary = Summary()

    /// One file's replay state.
    private final class ReplayedFile {
        let stream: UUID
        let path: String
        /// Rounds up to this sequence are already in the file (its position log says so).
        var coveredSequence: UInt64?
        /// Nothing more is replayed into this file (finished, unreadable, or damaged).
        var skipped = false
        var writer: CAFWriter?
        var claim: StreamClaim?
        var ownsClaim = false
        var last: StreamPositionRecord?

        init(stream: UUID, path: String) {
            self.stream = stream
            self.path = path
        }
    }

    /// A replay into the recordings under `outputDirectory`. At a receiver's start it waits (up to
    /// `waitForClaim`) for a stream another receiver holds: that one lets go at once when it finds
    /// this log being replayed. A takeover (`holding` its stream's claim) passes nil and leaves such
    /// streams to their holders, which replay them when they take them over.
    init(outputDirectory: String, holding held: (stream: UUID, claim: StreamClaim)? = nil, waitForClaim: Duration? = .seconds(60)) {
        index = StreamIndex(outputDirectory: outputDirectory)
        self.held = held
        self.waitForClaim = waitForClaim
    }

    /// Replays every record `reader` gives, then makes the files and their position logs durable.
    func replay(_ reader: CommitLogReader) throws(CommitLogError) {
        while let records = try reader.next() {
            for record in records { apply(record) }
        }
        finish()
    }

    private func apply(_ record: CommitLogRecord) {
        summary.records += 1
        switch ReceiverLogRecord(record) {
        case .file(let file)?:
            subjects[record.subject] = file
        case .round(let round)?:
            guard let named = subjects[record.subject] else {
                summary.failures.append("a round of stream number \(record.subject) comes before the record naming its file: the log was written wrongly; that round is not replayed")
                return
            }
            apply(round, to: state(of: named))
        case nil:
            summary.failures.append("a commit log record of kind \(record.kind) is not one this receiver writes: it is not replayed")
        }
    }

    private func state(of file: LoggedFile) -> ReplayedFile {
        if let known = files[file.relativePath] { return known }
        let path = index.absolutePath(relative: file.relativePath) ?? ""
        let state = ReplayedFile(stream: file.stream, path: path)
        files[file.relativePath] = state
        if path.isEmpty {
            state.skipped = true
            summary.failures.append("the commit log names a file outside the output folder (\(file.relativePath)): not replayed")
        } else if !FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)) {
            // Finished (finalizing syncs everything) or gone: nothing to replay into.
            state.skipped = true
        } else {
            state.coveredSequence = Self.covered(path)
        }
        return state
    }

    private static func covered(_ path: String) -> UInt64? {
        (try? StreamPositionLog.lastRecord(cafPath: path))?.position.lastSequence
    }

    private func apply(_ round: LoggedRound, to state: ReplayedFile) {
        guard !state.skipped else { return }
        if let covered = state.coveredSequence, round.position.position.lastSequence <= covered, state.writer == nil {
            summary.skippedRounds += 1
            return
        }
        if state.writer == nil {
            guard claim(state) else { return }
            // Claimed: the position log may have moved on meanwhile.
            state.coveredSequence = Self.covered(state.path)
            if let covered = state.coveredSequence, round.position.position.lastSequence <= covered {
                summary.skippedRounds += 1
                return
            }
            do throws(CAFError) {
                // No descriptor held between rounds: a log of many streams replays into as many
                // files. Their rounds' audio is gathered and written in 16 KiB writes.
                let writer = try CAFWriter.resume(
                    path: state.path, keepingPackets: round.packetsBefore, writeBehind: Self.writeBehind, holdingDescriptor: false)
                state.writer = writer
                summary.files += 1
            } catch {
                give(up: state, "cannot reopen it at packet \(round.packetsBefore), where the commit log's rounds continue: \(error.description)")
                return
            }
        }
        guard let writer = state.writer else { return }
        guard writer.packetCount == round.packetsBefore else {
            give(up: state, "the commit log's round continues at packet \(round.packetsBefore) but the file holds \(writer.packetCount) there")
            return
        }
        do throws(CAFError) {
            for operation in round.operations {
                switch operation {
                case .audio(let payload, let sizes, let frames):
                    try writer.append(payload, packetSizes: sizes, frameCount: frames)
                case .silence(let frames):
                    try writer.appendSilence(frameCount: frames)
                case .marker(let position, let name):
                    try writer.addMarker(framePosition: position, name: name)
                }
            }
        } catch {
            give(up: state, "writing the replayed audio failed: \(error.description)")
            return
        }
        state.last = round.position
        CrashPoint.midReplay.reached()
    }

    /// Claims the file's stream: the caller's claim, or one taken now (waiting while another
    /// receiver holds it: one that took the stream over has replayed this log's rounds, which the
    /// position log then shows; one that found this log being replayed lets go at once).
    private func claim(_ state: ReplayedFile) -> Bool {
        if let held, held.stream == state.stream {
            state.claim = held.claim
            return true
        }
        let deadline = ContinuousClock.now + (waitForClaim ?? .zero)
        while true {
            switch index.claimExisting(state.stream) {
            case .success(let claim):
                state.claim = claim
                state.ownsClaim = true
                return true
            case .failure(.missing), .failure(.exists):
                // The index no longer knows the stream; nobody else can be writing its file.
                return true
            case .failure(.held):
                guard let waitForClaim else {
                    state.skipped = true
                    summary.heldElsewhere += 1
                    return false
                }
                guard ContinuousClock.now < deadline else {
                    give(up: state, "another receiver has held stream \(state.stream) for \(waitForClaim) while this log holds acknowledged audio of it that its file lacks")
                    return false
                }
                Thread.sleep(forTimeInterval: 0.02)
            case .failure(.failed(let error)):
                give(up: state, "cannot claim stream \(state.stream) in the stream index: \(error.description)")
                return false
            }
        }
    }

    private func give(up state: ReplayedFile, _ reason: String) {
        state.skipped = true
        let position = state.last.map { " (replayed up to sequence \($0.position.lastSequence), sample \($0.position.endSampleTime))" } ?? ""
        summary.failures.append("cannot replay the commit log into \(state.path)\(position): \(reason); the audio its later rounds acknowledged is not in the file")
        close(state, keeping: state.last)
    }

    /// Makes each replayed file durable, then records its position, then lets its stream go.
    private func finish() {
        for state in files.values where state.writer != nil {
            close(state, keeping: state.last)
        }
    }

    private func close(_ state: ReplayedFile, keeping position: StreamPositionRecord?) {
        defer {
            if state.ownsClaim { state.claim?.release(removingEntry: false) }
            state.claim = nil
            state.ownsClaim = false
        }
        guard let writer = state.writer else { return }
        state.writer = nil
        do throws(CAFError) {
            try writer.synchronize()
            writer.close()
        } catch {
            writer.close()
            summary.failures.append("cannot make the replayed audio of \(state.path) durable: \(error.description)")
            return
        }
        guard let position else { return }
        do throws(DurableFileError) {
            _ = try StreamPositionLog.create(cafPath: state.path, initial: position)
        } catch {
            summary.failures.append("cannot record the replayed position of \(state.path): \(error.description)")
        }
    }
}
