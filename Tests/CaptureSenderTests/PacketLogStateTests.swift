import CaptureCodecs
import CaptureWire
import XCTest

@testable import CaptureSender

/// The packet log's decisions (`PacketLogState`), as tables: each row builds a state by events,
/// feeds it one more event, and checks the decision, what the log must carry out, and the figures
/// after.
final class PacketLogStateTests: XCTestCase {
    private typealias State = PacketLogState
    private typealias Effects = PacketLogState.Effects

    /// Audio chunk `index`: 1,000 bytes, 250 frames from sample `index * 250`.
    private static func chunk(_ index: Int) -> EncodedPackets {
        EncodedPackets(
            payload: [UInt8](repeating: UInt8(index % 256), count: 1_000), packetCount: 1, packetSizes: [1_000],
            firstSampleTime: Int64(index * 250), frameCount: 250)
    }

    /// The entry chunk `index` becomes as sequence `sequence`.
    private static func audio(_ sequence: UInt64, chunk index: Int) -> LoggedPacket {
        LoggedPacket(sequence: sequence, content: .audio(chunk(index)))
    }

    private static let folder = "/overflow/stream_overflow-1.caf"
    private static let roomOf10k = BackupRoom(bytes: 10_000, limit: .spoolMax)
    private static let spooledAt = SpoolLocation(segment: 1, offset: 0, length: 1_020)

    /// What happens to the log.
    private enum Event {
        /// Audio chunk `index` from the producer, when the budget allows `limit` bytes (nil: the
        /// log's capacity).
        case audio(Int, limit: Int? = nil)
        case gap(sampleTime: Int64, length: Int64)
        case marker(String)
        case filledGap(sampleTime: Int64, length: Int64)
        case overflowFile(State.OverflowFileResult)
        case acknowledge(UInt64, LogDestination, at: UInt64 = 0)
        case markSent(UInt64, LogDestination)
        case spooled(UInt64)
        case spoolFailed
        case drop(LogDestination)
        case finish(endSampleTime: Int64)
        case roomForFastSource(limit: Int)
        case close
    }

    /// The decision an event gave (the effects are checked on their own).
    private enum Decision: Equatable {
        case audio(State.AudioAppend)
        case sequence(UInt64)
        case ended(State.EndedOverflow?)
        case room(State.FastSourceRoom)
        case firstFailure(Bool)
        /// The event has no decision of its own: only effects.
        case effectsOnly
    }

    @discardableResult
    private static func apply(_ event: Event, to state: inout State) -> (Decision, Effects) {
        switch event {
        case .audio(let index, let limit):
            let step = state.appendAudio(chunk(index), levels: nil, limit: limit ?? state.configuration.capacity, now: 1_000)
            return (.audio(step.decision), step.effects)
        case .gap(let sampleTime, let length):
            let step = state.appendGap(sampleTime: sampleTime, length: length, reason: "device-reopened", now: 1_000)
            return (.sequence(step.decision), step.effects)
        case .marker(let label):
            let step = state.appendMarker(label: label, now: 1_000)
            return (.sequence(step.decision), step.effects)
        case .filledGap(let sampleTime, let length):
            let step = state.appendFilledGap(sampleTime: sampleTime, length: length, reason: "overrun", now: 1_000)
            return (.sequence(step.decision), step.effects)
        case .overflowFile(let result):
            state.overflowFile(result)
            return (.effectsOnly, Effects())
        case .acknowledge(let sequence, let destination, let now):
            return (.effectsOnly, state.acknowledge(through: sequence, for: destination, now: now))
        case .markSent(let sequence, let destination):
            return (.effectsOnly, state.markSent(through: sequence, for: destination))
        case .spooled(let sequence):
            return (.effectsOnly, state.entrySpooled(sequence, at: spooledAt))
        case .spoolFailed:
            let step = state.spoolFailed()
            return (.firstFailure(step.decision), step.effects)
        case .drop(let destination):
            return (.effectsOnly, state.dropDestination(destination))
        case .finish(let endSampleTime):
            let step = state.finish(endSampleTime: endSampleTime, remainderFrames: 0, reason: "duration", now: 1_000)
            return (.ended(step.decision), step.effects)
        case .roomForFastSource(let limit):
            let step = state.roomForFastSource(limit: limit)
            return (.room(step.decision), step.effects)
        case .close:
            return (.effectsOnly, state.close())
        }
    }

    /// Where one destination stands after the event.
    private struct CursorFigures: Equatable {
        var acknowledged: UInt64
        var held: Int
        var service: State.Service = .served
    }

    /// The log's figures after the event.
    private struct Figures: Equatable {
        var lastSequence: UInt64
        /// Released: acknowledged by every destination still served.
        var released: UInt64 = 0
        var heldBytes: Int
        var memoryBytes: Int
        var cursors: [CursorFigures]
        var overflow: State.OverflowEpisode = .none
        var end: StreamEnd? = nil
        var isComplete = false
        var producersWaiting = 0

        init(
            lastSequence: UInt64, released: UInt64 = 0, heldBytes: Int, memoryBytes: Int? = nil, cursors: [CursorFigures],
            overflow: State.OverflowEpisode = .none, end: StreamEnd? = nil, isComplete: Bool = false, producersWaiting: Int = 0
        ) {
            self.lastSequence = lastSequence
            self.released = released
            self.heldBytes = heldBytes
            self.memoryBytes = memoryBytes ?? heldBytes
            self.cursors = cursors
            self.overflow = overflow
            self.end = end
            self.isComplete = isComplete
            self.producersWaiting = producersWaiting
        }

        init(_ state: State) {
            lastSequence = state.lastSequence
            released = state.released
            heldBytes = state.heldBytes
            memoryBytes = state.memoryBytes
            cursors = state.cursors.map { CursorFigures(acknowledged: $0.acknowledged, held: $0.heldBytes, service: $0.service) }
            overflow = state.overflow
            end = state.end
            isComplete = state.isComplete
            producersWaiting = state.producersWaiting
        }
    }

    /// A log's configuration: `capacity` 10,000 bytes unless said.
    private static func log(
        realTime: Bool = true, capacity: Int = 10_000, memoryLimit: Int = 1 << 20, spool: Bool = false, overflowFolder: Bool = true
    ) -> State.Configuration {
        State.Configuration(memoryLimit: memoryLimit, capacity: capacity, producerIsRealTime: realTime, hasSpool: spool, hasOverflowFolder: overflowFolder)
    }

    /// One row of a table: a log made with `configuration` and `destinations`, the events that
    /// build its state, the event under test, and what it must give.
    private struct Row {
        let name: String
        var configuration: State.Configuration = PacketLogStateTests.log()
        var destinations = 1
        let given: [Event]
        let when: Event
        let decision: Decision
        var effects = Effects()
        let figures: Figures
    }

    /// Ten chunks: the 10,000-byte log is full.
    private static let tenChunks: [Event] = (0..<10).map { .audio($0) }
    /// Ten chunks, then two that overflow into a file that was created and written.
    private static let overflowingToAFile: [Event] = tenChunks + [.audio(10), .overflowFile(.written(path: folder)), .audio(11)]

    private static let appendRows: [Row] = [
        Row(
            name: "append within the budget: in memory", given: [], when: .audio(0),
            decision: .audio(.appended(sequence: 1, endedOverflow: nil)), effects: Effects(appended: [audio(1, chunk: 0)]),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "append that fills the budget exactly: still in memory", given: Array(tenChunks.prefix(9)), when: .audio(9),
            decision: .audio(.appended(sequence: 10, endedOverflow: nil)), effects: Effects(appended: [audio(10, chunk: 9)]),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)])),
        Row(
            name: "append within the log's own capacity but over the budget's answer: overflow",
            given: Array(tenChunks.prefix(5)), when: .audio(5, limit: 5_000),
            decision: .audio(.overflow(.createFileAndWrite)),
            figures: Figures(lastSequence: 5, heldBytes: 5_000, cursors: [CursorFigures(acknowledged: 0, held: 5_000)],
                             overflow: .running(start: 1_250, end: 1_500, file: .creating))),
        Row(
            name: "append over the budget: an overflow episode starts, its file to create", given: tenChunks, when: .audio(10),
            decision: .audio(.overflow(.createFileAndWrite)),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 2_750, file: .creating))),
        Row(
            name: "append over the budget without an overflow folder: the audio is lost",
            configuration: log(overflowFolder: false), given: tenChunks, when: .audio(10),
            decision: .audio(.overflow(.lostWithoutFolder)),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 2_750, file: .lost))),
        Row(
            name: "the overflow file was created and written: the next audio goes there",
            given: tenChunks + [.audio(10), .overflowFile(.written(path: folder))], when: .audio(11),
            decision: .audio(.overflow(.write)),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 3_000, file: .open(path: folder)))),
        Row(
            name: "the overflow file could not be created: the episode's audio is discarded",
            given: tenChunks + [.audio(10), .overflowFile(.failed)], when: .audio(11),
            decision: .audio(.overflow(.discard)),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 3_000, file: .lost))),
        Row(
            name: "writing the open overflow file failed: the episode has no file from now on",
            given: overflowingToAFile, when: .overflowFile(.failed),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 3_000, file: .lost))),
        Row(
            name: "during an episode the room is half the budget: 6,000 held, still overflowing",
            given: overflowingToAFile + [.acknowledge(4, .main)], when: .audio(12),
            decision: .audio(.overflow(.write)),
            figures: Figures(lastSequence: 10, released: 4, heldBytes: 6_000, cursors: [CursorFigures(acknowledged: 4, held: 6_000)],
                             overflow: .running(start: 2_500, end: 3_250, file: .open(path: folder)))),
        Row(
            name: "room again at half the budget: the episode ends, its Gap naming the file, then the audio",
            given: overflowingToAFile + [.acknowledge(6, .main)], when: .audio(12),
            decision: .audio(.appended(sequence: 12, endedOverflow: State.EndedOverflow(path: folder, frames: 500))),
            effects: Effects(appended: [
                LoggedPacket(sequence: 11, content: .gap(sampleTime: 2_500, length: 500, reason: "spool-full: the sender kept these 500 frames in \(folder)")),
                audio(12, chunk: 12),
            ]),
            figures: Figures(lastSequence: 12, released: 6, heldBytes: 5_000, cursors: [CursorFigures(acknowledged: 6, held: 5_000)])),
        Row(
            name: "room again after an episode without a file: its Gap says the audio was lost",
            configuration: log(overflowFolder: false), given: tenChunks + [.audio(10), .acknowledge(10, .main)], when: .audio(11),
            decision: .audio(.appended(sequence: 12, endedOverflow: State.EndedOverflow(path: nil, frames: 250))),
            effects: Effects(appended: [
                LoggedPacket(sequence: 11, content: .gap(sampleTime: 2_500, length: 250, reason: "spool-full: 250 frames lost at the sender (no overflow file)")),
                audio(12, chunk: 11),
            ]),
            figures: Figures(lastSequence: 12, released: 10, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 10, held: 1_000)])),
        Row(
            name: "a gap during an episode is absorbed by the episode's own Gap",
            given: overflowingToAFile, when: .gap(sampleTime: 3_000, length: 100),
            decision: .sequence(0),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 3_100, file: .open(path: folder)))),
        Row(
            name: "a filled gap during an episode is not appended",
            given: overflowingToAFile, when: .filledGap(sampleTime: 2_000, length: 100),
            decision: .sequence(0),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             overflow: .running(start: 2_500, end: 3_000, file: .open(path: folder)))),
        Row(
            name: "a gap outside an episode is an entry",
            given: [.audio(0)], when: .gap(sampleTime: 250, length: 100),
            decision: .sequence(2),
            effects: Effects(appended: [LoggedPacket(sequence: 2, content: .gap(sampleTime: 250, length: 100, reason: "device-reopened"))]),
            figures: Figures(lastSequence: 2, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "a marker stands where the timeline stands",
            given: [.audio(0), .audio(1)], when: .marker("take 2"),
            decision: .sequence(3),
            effects: Effects(appended: [LoggedPacket(sequence: 3, content: .marker(sampleTime: 500, label: "take 2"))]),
            figures: Figures(lastSequence: 3, heldBytes: 2_000, cursors: [CursorFigures(acknowledged: 0, held: 2_000)])),
        Row(
            name: "a filled gap the packets reach stands at the timeline's end",
            given: [.audio(0), .audio(1)], when: .filledGap(sampleTime: 400, length: 100),
            decision: .sequence(3),
            effects: Effects(appended: [LoggedPacket(sequence: 3, content: .filledGap(position: 500, sampleTime: 400, length: 100, reason: "overrun"))]),
            figures: Figures(lastSequence: 3, heldBytes: 2_000, cursors: [CursorFigures(acknowledged: 0, held: 2_000)])),
        Row(
            name: "a filled gap the packets do not reach yet waits",
            given: [.audio(0)], when: .filledGap(sampleTime: 300, length: 100),
            decision: .sequence(0),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
    ]

    private static let acknowledgementRows: [Row] = [
        Row(
            name: "the main alone acknowledges: the oldest kept moves",
            given: [.audio(0), .audio(1), .audio(2)], when: .acknowledge(2, .main),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 2, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 2, held: 1_000)])),
        Row(
            name: "the main acknowledges, a backup lacks it: nothing released",
            destinations: 2, given: [.audio(0), .audio(1), .audio(2)], when: .acknowledge(3, .main),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [
                CursorFigures(acknowledged: 3, held: 0), CursorFigures(acknowledged: 0, held: 3_000),
            ])),
        Row(
            name: "the backup acknowledges after the main: the oldest kept moves to what both hold",
            destinations: 2, given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main)], when: .acknowledge(2, .backup(1)),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 2, heldBytes: 1_000, cursors: [
                CursorFigures(acknowledged: 3, held: 0), CursorFigures(acknowledged: 2, held: 1_000),
            ])),
        Row(
            name: "with a spool, the main's acknowledgement is recorded though nothing is released",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .audio(1), .audio(2)], when: .acknowledge(2, .main),
            decision: .effectsOnly,
            effects: Effects(spoolAcknowledgement: State.SpoolAcknowledgement(main: StreamPosition(lastSequence: 2, endSampleTime: 500), released: 0), wakesProducers: true),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [
                CursorFigures(acknowledged: 2, held: 1_000), CursorFigures(acknowledged: 0, held: 3_000),
            ])),
        Row(
            name: "with a spool, a backup's acknowledgement that releases nothing is not recorded",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .audio(1), .audio(2)], when: .acknowledge(2, .backup(1)),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [
                CursorFigures(acknowledged: 0, held: 3_000), CursorFigures(acknowledged: 2, held: 1_000),
            ])),
        Row(
            name: "with a spool, a backup's acknowledgement that releases is recorded",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main)],
            when: .acknowledge(1, .backup(1)),
            decision: .effectsOnly,
            effects: Effects(spoolAcknowledgement: State.SpoolAcknowledgement(main: StreamPosition(lastSequence: 3, endSampleTime: 750), released: 1), wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 1, heldBytes: 2_000, cursors: [
                CursorFigures(acknowledged: 3, held: 0), CursorFigures(acknowledged: 1, held: 2_000),
            ])),
        Row(
            name: "a stale acknowledgement moves nothing",
            given: [.audio(0), .audio(1), .audio(2), .acknowledge(2, .main)], when: .acknowledge(1, .main),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 3, released: 2, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 2, held: 1_000)])),
        Row(
            name: "an acknowledgement beyond the last entry counts up to it",
            given: [.audio(0), .audio(1), .audio(2)], when: .acknowledge(99, .main),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 3, heldBytes: 0, cursors: [CursorFigures(acknowledged: 3, held: 0)])),
        Row(
            name: "an acknowledgement for a destination the log never had is ignored",
            given: [.audio(0)], when: .acknowledge(1, .backup(3)),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "a backup dropped: what only it lacked is released",
            destinations: 2, given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main)], when: .drop(.backup(1)),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 3, heldBytes: 0, cursors: [
                CursorFigures(acknowledged: 3, held: 0), CursorFigures(acknowledged: 0, held: 0, service: .dropped),
            ])),
        Row(
            name: "a backup dropped with a spool: the release is recorded",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .audio(1), .audio(2), .acknowledge(2, .main)],
            when: .drop(.backup(1)),
            decision: .effectsOnly,
            effects: Effects(spoolAcknowledgement: State.SpoolAcknowledgement(main: StreamPosition(lastSequence: 2, endSampleTime: 500), released: 2), wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 2, heldBytes: 1_000, cursors: [
                CursorFigures(acknowledged: 2, held: 1_000), CursorFigures(acknowledged: 0, held: 0, service: .dropped),
            ])),
        Row(
            name: "a dropped backup's acknowledgement is ignored",
            destinations: 2, given: [.audio(0), .audio(1), .drop(.backup(1))], when: .acknowledge(2, .backup(1)),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 2, heldBytes: 2_000, cursors: [
                CursorFigures(acknowledged: 0, held: 2_000), CursorFigures(acknowledged: 0, held: 0, service: .dropped),
            ])),
        Row(
            name: "a backup whose backlog would overflow the main is given up before the append",
            destinations: 2, given: tenChunks + [.acknowledge(10, .main)], when: .audio(10),
            decision: .audio(.appended(sequence: 11, endedOverflow: nil)),
            effects: Effects(
                givenUp: [State.GivenUpBackup(destination: .backup(1), room: roomOf10k)], appended: [audio(11, chunk: 10)], wakesProducers: true),
            figures: Figures(lastSequence: 11, released: 10, heldBytes: 1_000, cursors: [
                CursorFigures(acknowledged: 10, held: 1_000), CursorFigures(acknowledged: 0, held: 0, service: .givenUp(room: roomOf10k)),
            ])),
        Row(
            name: "the main's own backlog does not fit: no backup is given up, the audio overflows",
            destinations: 2, given: tenChunks, when: .audio(10),
            decision: .audio(.overflow(.createFileAndWrite)),
            figures: Figures(lastSequence: 10, heldBytes: 10_000, cursors: [
                CursorFigures(acknowledged: 0, held: 10_000), CursorFigures(acknowledged: 0, held: 10_000),
            ], overflow: .running(start: 2_500, end: 2_750, file: .creating))),
    ]

    private static let endRows: [Row] = [
        Row(
            name: "the end of the stream is recorded after the last entry",
            given: [.audio(0), .audio(1), .audio(2)], when: .finish(endSampleTime: 750),
            decision: .ended(nil), effects: Effects(recordedEnd: StreamEnd(position: StreamPosition(lastSequence: 3, endSampleTime: 750), reason: "duration")),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [CursorFigures(acknowledged: 0, held: 3_000)],
                             end: StreamEnd(position: StreamPosition(lastSequence: 3, endSampleTime: 750), reason: "duration"))),
        Row(
            name: "the end during an overflow episode: the episode's Gap comes first",
            configuration: log(overflowFolder: false), given: tenChunks + [.audio(10)], when: .finish(endSampleTime: 2_750),
            decision: .ended(State.EndedOverflow(path: nil, frames: 250)),
            effects: Effects(
                appended: [LoggedPacket(sequence: 11, content: .gap(sampleTime: 2_500, length: 250, reason: "spool-full: 250 frames lost at the sender (no overflow file)"))],
                recordedEnd: StreamEnd(position: StreamPosition(lastSequence: 11, endSampleTime: 2_750), reason: "duration")),
            figures: Figures(lastSequence: 11, heldBytes: 10_000, cursors: [CursorFigures(acknowledged: 0, held: 10_000)],
                             end: StreamEnd(position: StreamPosition(lastSequence: 11, endSampleTime: 2_750), reason: "duration"))),
        Row(
            name: "complete once every entry of an ended stream is acknowledged",
            given: [.audio(0), .audio(1), .finish(endSampleTime: 500)], when: .acknowledge(2, .main),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 2, released: 2, heldBytes: 0, cursors: [CursorFigures(acknowledged: 2, held: 0)],
                             end: StreamEnd(position: StreamPosition(lastSequence: 2, endSampleTime: 500), reason: "duration"), isComplete: true)),
        Row(
            name: "complete for every destination still served: a dropped backup does not hold it up",
            destinations: 2, given: [.audio(0), .finish(endSampleTime: 250), .acknowledge(1, .main)], when: .drop(.backup(1)),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 1, released: 1, heldBytes: 0, cursors: [
                CursorFigures(acknowledged: 1, held: 0), CursorFigures(acknowledged: 0, held: 0, service: .dropped),
            ], end: StreamEnd(position: StreamPosition(lastSequence: 1, endSampleTime: 250), reason: "duration"), isComplete: true)),
        Row(
            name: "a marker after the end is refused",
            given: [.audio(0), .finish(endSampleTime: 250)], when: .marker("late"),
            decision: .sequence(0),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)],
                             end: StreamEnd(position: StreamPosition(lastSequence: 1, endSampleTime: 250), reason: "duration"))),
        Row(
            name: "a marker once the log is closed is refused",
            given: [.audio(0), .close], when: .marker("late"),
            decision: .sequence(0),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
    ]

    private static let fastSourceRows: [Row] = [
        Row(
            name: "a fast source within its memory: append",
            configuration: log(realTime: false, memoryLimit: 2_000), given: [.audio(0), .audio(1)], when: .roomForFastSource(limit: 10_000),
            decision: .room(.enough),
            figures: Figures(lastSequence: 2, heldBytes: 2_000, cursors: [CursorFigures(acknowledged: 0, held: 2_000)])),
        Row(
            name: "a fast source over its memory: wait, counted as waiting",
            configuration: log(realTime: false, memoryLimit: 2_000), given: [.audio(0), .audio(1), .audio(2)],
            when: .roomForFastSource(limit: 10_000),
            decision: .room(.waitForRoom),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [CursorFigures(acknowledged: 0, held: 3_000)], producersWaiting: 1)),
        Row(
            name: "a fast source never overflows: its audio is appended over the capacity",
            configuration: log(realTime: false), given: tenChunks, when: .audio(10),
            decision: .audio(.appended(sequence: 11, endedOverflow: nil)), effects: Effects(appended: [audio(11, chunk: 10)]),
            figures: Figures(lastSequence: 11, heldBytes: 11_000, cursors: [CursorFigures(acknowledged: 0, held: 11_000)])),
        Row(
            name: "a closed log never makes a fast source wait",
            configuration: log(realTime: false, memoryLimit: 2_000), given: [.audio(0), .audio(1), .audio(2), .close],
            when: .roomForFastSource(limit: 10_000),
            decision: .room(.enough),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [CursorFigures(acknowledged: 0, held: 3_000)])),
        Row(
            name: "a backup that would hold a fast source up is given up, in memory without a spool",
            configuration: log(realTime: false, memoryLimit: 2_000), destinations: 2,
            given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main)], when: .roomForFastSource(limit: 10_000),
            decision: .room(.enough),
            effects: Effects(givenUp: [State.GivenUpBackup(destination: .backup(1), room: BackupRoom(bytes: 2_000, limit: .fastSource))], wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 3, heldBytes: 0, cursors: [
                CursorFigures(acknowledged: 3, held: 0),
                CursorFigures(acknowledged: 0, held: 0, service: .givenUp(room: BackupRoom(bytes: 2_000, limit: .fastSource))),
            ])),
        Row(
            name: "with a working spool a fast source's backups may fall the budget behind: it waits for the disk only",
            configuration: log(realTime: false, memoryLimit: 2_000, spool: true), destinations: 2,
            given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main)], when: .roomForFastSource(limit: 10_000),
            decision: .room(.waitForRoom),
            figures: Figures(lastSequence: 3, heldBytes: 3_000, cursors: [
                CursorFigures(acknowledged: 3, held: 0), CursorFigures(acknowledged: 0, held: 3_000),
            ], producersWaiting: 1)),
    ]

    private static let spoolRows: [Row] = [
        Row(
            name: "an entry spooled but not sent stays in memory",
            configuration: log(spool: true), given: [.audio(0)], when: .spooled(1),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "an entry spooled after it was sent to every destination leaves memory",
            configuration: log(spool: true), given: [.audio(0), .markSent(1, .main)], when: .spooled(1),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, memoryBytes: 0, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "an entry spooled, then sent to the main only, stays in memory for the backup",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .spooled(1)], when: .markSent(1, .main),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [
                CursorFigures(acknowledged: 0, held: 1_000), CursorFigures(acknowledged: 0, held: 1_000),
            ])),
        Row(
            name: "an entry spooled, then sent to both, leaves memory",
            configuration: log(spool: true), destinations: 2, given: [.audio(0), .spooled(1), .markSent(1, .main)],
            when: .markSent(1, .backup(1)),
            decision: .effectsOnly, effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 1, heldBytes: 1_000, memoryBytes: 0, cursors: [
                CursorFigures(acknowledged: 0, held: 1_000), CursorFigures(acknowledged: 0, held: 1_000),
            ])),
        Row(
            name: "without a spool, sending changes nothing",
            given: [.audio(0)], when: .markSent(1, .main),
            decision: .effectsOnly,
            figures: Figures(lastSequence: 1, heldBytes: 1_000, cursors: [CursorFigures(acknowledged: 0, held: 1_000)])),
        Row(
            name: "the spool's first failure is the one reported, and wakes a waiting source",
            configuration: log(spool: true), given: [], when: .spoolFailed,
            decision: .firstFailure(true), effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 0, heldBytes: 0, cursors: [CursorFigures(acknowledged: 0, held: 0)])),
        Row(
            name: "a later spool failure is not reported again",
            configuration: log(spool: true), given: [.spoolFailed], when: .spoolFailed,
            decision: .firstFailure(false), effects: Effects(wakesProducers: true),
            figures: Figures(lastSequence: 0, heldBytes: 0, cursors: [CursorFigures(acknowledged: 0, held: 0)])),
        Row(
            name: "once the spool failed, a fast source's backups may fall only its memory behind",
            configuration: log(realTime: false, memoryLimit: 2_000, spool: true), destinations: 2,
            given: [.audio(0), .audio(1), .audio(2), .acknowledge(3, .main), .spoolFailed], when: .roomForFastSource(limit: 10_000),
            decision: .room(.enough),
            effects: Effects(givenUp: [State.GivenUpBackup(destination: .backup(1), room: BackupRoom(bytes: 2_000, limit: .fastSource))],
                             spoolAcknowledgement: State.SpoolAcknowledgement(main: StreamPosition(lastSequence: 3, endSampleTime: 750), released: 3), wakesProducers: true),
            figures: Figures(lastSequence: 3, released: 3, heldBytes: 0, cursors: [
                CursorFigures(acknowledged: 3, held: 0),
                CursorFigures(acknowledged: 0, held: 0, service: .givenUp(room: BackupRoom(bytes: 2_000, limit: .fastSource))),
            ])),
    ]

    private func check(_ rows: [Row], file: StaticString = #filePath, line: UInt = #line) {
        for row in rows {
            var state = State(configuration: row.configuration, destinations: row.destinations)
            for event in row.given { Self.apply(event, to: &state) }
            let (decision, effects) = Self.apply(row.when, to: &state)
            XCTAssertEqual(decision, row.decision, "\(row.name): the decision", file: file, line: line)
            XCTAssertEqual(effects, row.effects, "\(row.name): what the log must do", file: file, line: line)
            XCTAssertEqual(Figures(state), row.figures, "\(row.name): the figures after", file: file, line: line)
        }
    }

    func testAppending() { check(Self.appendRows) }

    func testAcknowledgementsPerDestination() { check(Self.acknowledgementRows) }

    func testTheEndOfTheStream() { check(Self.endRows) }

    func testAFastSourcesRoom() { check(Self.fastSourceRows) }

    func testTheSpool() { check(Self.spoolRows) }

    /// The times given with the events: when each destination last reported and last advanced,
    /// and when the oldest entry it lacks was appended.
    func testProgressCarriesTheTimesGiven() {
        var state = State(configuration: Self.log(), destinations: 2)
        _ = state.appendAudio(Self.chunk(0), levels: nil, limit: 10_000, now: 100)
        _ = state.appendAudio(Self.chunk(1), levels: nil, limit: 10_000, now: 200)
        _ = state.acknowledge(through: 1, for: .main, now: 300)
        _ = state.acknowledge(through: 1, for: .main, now: 400)  // stale: a report, not an advance
        XCTAssertEqual(state.progress(for: .main), PacketLog.Progress(
            appendedBytes: 2_000, appendedEndSampleTime: 500, acknowledgedEndSampleTime: 250, unacknowledgedBytes: 1_000,
            lastAcknowledgementAt: 400, oldestUnacknowledgedAppendedAt: 200, lastAdvanceAt: 300))
        XCTAssertEqual(state.progress(for: .backup(1)), PacketLog.Progress(
            appendedBytes: 2_000, appendedEndSampleTime: 500, acknowledgedEndSampleTime: 0, unacknowledgedBytes: 2_000,
            lastAcknowledgementAt: nil, oldestUnacknowledgedAppendedAt: 100, lastAdvanceAt: nil))
        XCTAssertEqual(state.progress, PacketLog.Progress(
            appendedBytes: 2_000, appendedEndSampleTime: 500, acknowledgedEndSampleTime: 0, unacknowledgedBytes: 2_000,
            lastAcknowledgementAt: 400, oldestUnacknowledgedAppendedAt: 100))
        XCTAssertEqual(state.progress(for: .backup(5)), PacketLog.Progress(
            appendedBytes: 2_000, appendedEndSampleTime: 500, acknowledgedEndSampleTime: 0, unacknowledgedBytes: 0))
    }

    /// Where each entry is as it is spooled, sent and released: in memory, in memory and the
    /// spool, in the spool only, or (released without a spool) nowhere.
    func testWhereEachEntryIsKept() {
        let first = Self.spooledAt
        let second = SpoolLocation(segment: 1, offset: 1_020, length: 1_020)
        var state = State(configuration: Self.log(spool: true), destinations: 2)
        _ = state.appendAudio(Self.chunk(0), levels: nil, limit: 10_000, now: 0)
        _ = state.appendAudio(Self.chunk(1), levels: nil, limit: 10_000, now: 0)
        XCTAssertEqual(state.slots.map(\.storage), [.memory(Self.audio(1, chunk: 0)), .memory(Self.audio(2, chunk: 1))])
        _ = state.entrySpooled(1, at: first)
        XCTAssertEqual(state.slots.map(\.storage), [.memoryAndSpool(Self.audio(1, chunk: 0), location: first), .memory(Self.audio(2, chunk: 1))])
        _ = state.markSent(through: 2, for: .main)
        _ = state.markSent(through: 2, for: .backup(1))
        XCTAssertEqual(
            state.slots.map(\.storage), [.spool(location: first), .memory(Self.audio(2, chunk: 1))],
            "sent to both: the spooled payload leaves memory, the other waits for the disk")
        XCTAssertEqual(state.memoryBytes, 1_000)
        _ = state.entrySpooled(2, at: second)
        XCTAssertEqual(state.slots.map(\.storage), [.spool(location: first), .spool(location: second)], "spooled once sent: straight out of memory")
        XCTAssertEqual(state.memoryBytes, 0)
        XCTAssertEqual(state.heldBytes, 2_000)

        var overMemory = State(configuration: Self.log(memoryLimit: 1_000, spool: true), destinations: 1)
        _ = overMemory.appendAudio(Self.chunk(0), levels: nil, limit: 10_000, now: 0)
        _ = overMemory.appendAudio(Self.chunk(1), levels: nil, limit: 10_000, now: 0)
        XCTAssertEqual(overMemory.entrySpooled(1, at: first), Effects(wakesProducers: true))
        XCTAssertEqual(
            overMemory.slots.map(\.storage), [.spool(location: first), .memory(Self.audio(2, chunk: 1))],
            "over the memory limit: spooled means out of memory, sent or not")
        XCTAssertEqual(overMemory.memoryBytes, 1_000)

        var inMemory = State(configuration: Self.log(), destinations: 1)
        _ = inMemory.appendAudio(Self.chunk(0), levels: nil, limit: 10_000, now: 0)
        _ = inMemory.appendAudio(Self.chunk(1), levels: nil, limit: 10_000, now: 0)
        _ = inMemory.acknowledge(through: 1, for: .main, now: 0)
        XCTAssertEqual(inMemory.slots.map(\.storage), [.gone, .memory(Self.audio(2, chunk: 1))], "released without a spool: gone")
        XCTAssertEqual(inMemory.head, 1)
        XCTAssertEqual(inMemory.memoryBytes, 1_000)
    }

    /// A waiting producer is counted until it wakes, and released slots are compacted away once
    /// they are half the array (16 at least), without changing what is kept.
    func testWaitingAndCompaction() {
        var state = State(configuration: Self.log(realTime: false, memoryLimit: 1_000), destinations: 1)
        _ = state.appendAudio(Self.chunk(0), levels: nil, limit: 10_000, now: 0)
        _ = state.appendAudio(Self.chunk(1), levels: nil, limit: 10_000, now: 0)
        XCTAssertEqual(state.roomForFastSource(limit: 10_000).decision, .waitForRoom)
        XCTAssertEqual(state.producersWaiting, 1)
        state.stopWaitingForRoom()
        XCTAssertEqual(state.producersWaiting, 0)
        for index in 2..<40 { _ = state.appendAudio(Self.chunk(index), levels: nil, limit: 1 << 30, now: 0) }
        _ = state.acknowledge(through: 20, for: .main, now: 0)
        XCTAssertEqual(state.head, 0, "20 released of 40: compacted")
        XCTAssertEqual(state.slots.count, 20)
        XCTAssertEqual(state.slotIndex(21), 0)
        XCTAssertNil(state.slotIndex(20), "released")
        XCTAssertEqual(state.keptSlots(from: 39, maxCount: 5).map(\.sequence), [39, 40])
        XCTAssertEqual(state.heldBytes, 20_000)
        XCTAssertEqual(state.roomForFastSource(limit: 10_000).decision, .waitForRoom, "20,000 bytes held over a 1,000-byte memory")
    }
}
