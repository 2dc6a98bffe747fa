import CaptureCore
import Foundation
import Synchronization

/// The safety copy on the field unit (`capture-send --record`): the capture, in full quality,
/// written to a local file while the stream goes out, so that a link dead for the whole event still
/// leaves the take on the unit.
///
/// The capture pipeline hands every captured buffer to `take(_:)` on its delivery thread, which
/// copies it into a queue and returns; a writer thread of the copy's own writes it (blocking on the
/// disk is right there, never on the capture's threads). The copy follows the capture's timeline:
/// frames lost in an overrun and the time of a pause become silence, marked as gaps in a CAF file
/// (`gap: N frames not captured (REASON)`), so the copy keeps wall-clock positions like the stream.
///
/// The copy never stops the stream. When the disk fails (full, removed) or falls further behind
/// than `LocalCopySettings.backlog`, the copy stops, says so once through `stopped`, keeps
/// what it wrote, and drops what comes after; `finish()` reports how far it got.
///
/// Files are cut at UTC boundaries with `LocalCopySettings.segmentLength` (`LocalCopySegments`).
public final class LocalCopy: Sendable {
    /// How a local copy ended.
    public struct Outcome: Sendable, Equatable {
        /// The files written, in order.
        public var files: [String]
        /// Seconds of the capture's timeline the files hold.
        public var seconds: Double
        /// Why the copy stopped before the capture ended; nil when it holds the whole capture.
        public var stoppedBecause: String?

        public var isComplete: Bool { stoppedBecause == nil }

        public init(files: [String], seconds: Double, stoppedBecause: String?) {
            self.files = files
            self.seconds = seconds
            self.stoppedBecause = stoppedBecause
        }
    }

    /// The figures now, for the status line.
    public struct Progress: Sendable, Equatable {
        /// Seconds written to disk.
        public var secondsWritten: Double
        /// Seconds waiting in memory for the disk.
        public var secondsWaiting: Double
        /// Why the copy stopped, once it has.
        public var stoppedBecause: String?
    }

    private enum Item {
        case audio(start: Int64, bytes: [UInt8], frames: Int)
        case gap(start: Int64, length: Int64, reason: String)
        case end

        init(_ gap: CaptureGapTracker.Gap) {
            switch gap {
            case .lost(let start, let frames): self = .gap(start: start, length: frames, reason: "overrun")
            case .paused(let start, let frames): self = .gap(start: start, length: frames, reason: "paused")
            }
        }
    }

    private struct State {
        var items: [Item] = []
        var waitingFrames: Int64 = 0
        var writtenFrames: Int64 = 0
        var stoppedBecause: String?
        var finished = false
        var files: [String] = []
        /// Where the capture's overruns and pauses fall, one gap per pause.
        var gaps = CaptureGapTracker()
    }

    private let settings: LocalCopySettings
    private let format: StreamFormat
    private let startTime: Date
    private let info: [(key: String, value: String)]
    private let stopped: @Sendable (String) -> Void
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    /// Creates the copy's first file and starts its writer thread. `startTime` is the UTC time of the
    /// capture's first frame (it names segments); `info` goes into a CAF file's `info` chunk;
    /// `stopped` is called once, from the writer thread, if the copy stops before the capture ends.
    public init(
        settings: LocalCopySettings, format: StreamFormat, startTime: Date, info: [(key: String, value: String)] = [],
        stopped: @escaping @Sendable (String) -> Void
    ) throws(LocalCopyError) {
        try settings.check(format)
        self.settings = settings
        self.format = format
        self.startTime = startTime
        self.info = info
        self.stopped = stopped
        let first = try Self.open(path: firstPath(settings: settings, startTime: startTime, format: format), settings: settings, format: format, info: info)
        state.withLock { $0.files.append(first.path) }
        let handOff = FileHandOff(first.file)
        do throws(CaptureError) {
            try DetachedThread.start(name: "local-copy") { [self] in write(from: handOff.file) }
        } catch {
            first.file.abandon()
            throw .cannotCreate(path: first.path, reason: error.description)
        }
    }

    /// Takes a captured buffer (called on the capture's delivery thread): copies it into the queue
    /// and returns at once. Lost and paused frames before it become a gap.
    public func take(_ buffer: CapturedBuffer) {
        let frames = Int64(buffer.packetCount)
        let bytes = buffer.packetCount > 0
            ? Array(UnsafeRawBufferPointer(rebasing: buffer.bytes[0..<min(buffer.packetCount * Int(format.bytesPerFrame), buffer.bytes.count)])) : []
        let backlogLimit = Int64(settings.backlog.inSeconds * format.sampleRate)
        let (accepted, overflowed): (Bool, Bool) = state.withLock { state in
            guard state.stoppedBecause == nil, !state.finished else { return (false, false) }
            guard state.waitingFrames + frames <= backlogLimit else { return (false, true) }
            state.items += state.gaps.take(buffer).map(Item.init)
            if frames > 0 { state.items.append(.audio(start: buffer.startTime.sampleTime, bytes: bytes, frames: buffer.packetCount)) }
            state.waitingFrames += frames
            return (true, false)
        }
        if overflowed {
            stop(because: "the disk fell more than \(Int(settings.backlog.inSeconds)) s behind the capture")
        } else if accepted {
            wake.signal()
        }
    }

    /// Ends the copy after the last buffer taken (a pause still open is copied up to there), waits
    /// for the writer and finishes the files; returns how far the copy got.
    public func finish() -> Outcome {
        let alreadyEnded: Bool = state.withLock { state in
            if state.finished { return true }
            state.finished = true
            state.items += state.gaps.finish().map(Item.init) + [.end]
            return false
        }
        if !alreadyEnded { wake.signal() }
        done.wait()
        done.signal()  // a second finish() returns too
        return state.withLock { state in
            Outcome(files: state.files, seconds: Double(state.writtenFrames) / format.sampleRate, stoppedBecause: state.stoppedBecause)
        }
    }

    /// The figures now.
    public var progress: Progress {
        state.withLock { state in
            Progress(
                secondsWritten: Double(state.writtenFrames) / format.sampleRate,
                secondsWaiting: Double(state.waitingFrames) / format.sampleRate, stoppedBecause: state.stoppedBecause)
        }
    }

    // MARK: - Inside

    /// Stops the copy once (the first reason wins), and tells `stopped`.
    private func stop(because reason: String) {
        let first: Bool = state.withLock { state in
            guard state.stoppedBecause == nil else { return false }
            state.stoppedBecause = reason
            // What waits is dropped; the end (when finish() came first) still ends the writer.
            state.items = state.items.filter { if case .end = $0 { true } else { false } }
            state.waitingFrames = 0
            return true
        }
        if first {
            stopped(reason)
            wake.signal()
        }
    }

    /// The writer thread: writes items as they come, cutting files at segment boundaries.
    private func write(from first: any LocalCopyFile) {
        var file: (any LocalCopyFile)? = first
        /// The timeline position of the current file's first frame, and where the copy stands.
        var fileStart: Int64 = 0
        var position: Int64 = 0
        let segments = settings.segmentLength.map { LocalCopySegments(startTime: startTime, sampleRate: format.sampleRate, length: $0) }
        var boundary = segments?.boundary(after: 0)

        func fail(_ failure: LocalCopyFailure) {
            file?.abandon()
            file = nil
            stop(because: failure.reason)
        }
        /// Finishes the current file at the boundary and opens the next.
        func cut() throws(LocalCopyFailure) {
            guard let segments, let at = boundary else { return }
            try file?.finish()
            file = nil
            let path = segments.path(base: settings.path, firstFrame: at)
            do throws(LocalCopyError) {
                let next = try Self.open(path: path, settings: settings, format: format, info: info)
                file = next.file
                state.withLock { $0.files.append(next.path) }
            } catch {
                throw LocalCopyFailure(reason: error.description)
            }
            fileStart = at
            boundary = segments.boundary(after: at)
        }
        /// Writes `frames` frames from `bytes` (nil: silence), cut at boundaries.
        func put(_ bytes: [UInt8]?, frames: Int64) throws(LocalCopyFailure) {
            var done: Int64 = 0
            while done < frames {
                if let at = boundary, position >= at { try cut() }
                guard let current = file else { return }
                let room = boundary.map { $0 - position } ?? (frames - done)
                let now = min(frames - done, room)
                if let bytes {
                    let frameBytes = Int(format.bytesPerFrame)
                    let first = Int(done) * frameBytes
                    let failure: LocalCopyFailure? = bytes.withUnsafeBytes { raw in
                        do throws(LocalCopyFailure) {
                            try current.append(UnsafeRawBufferPointer(rebasing: raw[first..<(first + Int(now) * frameBytes)]), frames: Int(now))
                            return nil
                        } catch {
                            return error
                        }
                    }
                    if let failure { throw failure }
                } else {
                    try current.appendSilence(frames: now)
                }
                done += now
                position += now
                if bytes != nil {
                    state.withLock { state in
                        state.writtenFrames = position
                        state.waitingFrames = max(0, state.waitingFrames - now)
                    }
                } else {
                    state.withLock { $0.writtenFrames = position }
                }
            }
        }

        loop: while true {
            wake.wait()
            while let next = state.withLock({ $0.items.isEmpty ? nil : $0.items.removeFirst() }) {
                if case .end = next {
                    if let current = file {
                        file = nil
                        do throws(LocalCopyFailure) { try current.finish() } catch { fail(error) }
                    }
                    break loop
                }
                // Stopped: what is still queued is dropped.
                guard file != nil else { continue }
                do throws(LocalCopyFailure) {
                    switch next {
                    case .audio(let start, let bytes, let frames):
                        if start > position { try put(nil, frames: start - position) }
                        try put(bytes, frames: Int64(frames))
                    case .gap(let start, let length, let reason):
                        if start > position { try put(nil, frames: start - position) }
                        // The marker goes in the file where the gap begins.
                        try file?.markGap(at: max(start, fileStart) - fileStart, length: length, reason: reason)
                        try put(nil, frames: start + length - position)
                    case .end:
                        break
                    }
                } catch {
                    fail(error)
                }
            }
        }
        done.signal()
    }

    private static func open(path: String, settings: LocalCopySettings, format: StreamFormat, info: [(key: String, value: String)]) throws(LocalCopyError) -> (file: any LocalCopyFile, path: String) {
        switch settings.container {
        case .caf: return (try CAFLocalCopyFile(path: path, format: format, info: info), path)
        case .wav, .flac: return (try SoundFileLocalCopyFile(path: path, format: format, container: settings.container), path)
        }
    }
}

/// The first file, created by `LocalCopy.init` and handed to the writer thread, which alone uses it
/// from then on.
///
/// Sendability (`@unchecked Sendable`): `file` is set before the writer thread starts (starting a
/// thread orders the write before everything the thread does) and only read by that thread.
private final class FileHandOff: @unchecked Sendable {
    let file: any LocalCopyFile
    init(_ file: any LocalCopyFile) { self.file = file }
}

/// The path of a copy's first file: the path itself, or with segments the first segment's name.
private func firstPath(settings: LocalCopySettings, startTime: Date, format: StreamFormat) -> String {
    guard let length = settings.segmentLength else { return settings.path }
    return LocalCopySegments(startTime: startTime, sampleRate: format.sampleRate, length: length).path(base: settings.path, firstFrame: 0)
}
