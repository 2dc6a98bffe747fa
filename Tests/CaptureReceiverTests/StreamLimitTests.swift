@testable import CaptureReceiver
import Foundation
import XCTest

/// How many streams the receiver takes: from the open-file limit and memory, resumed streams
/// counted like new ones, and floods of refused connections logged as one line per interval.
final class StreamLimitTests: XCTestCase {
    func testTheDefaultLimitIsWhatTheOpenFilesAndTheMemoryAllow() {
        let fieldServer = StreamCapacity(openFileLimit: 20_000, openFileLimitBefore: 1_024, physicalMemory: 24 << 30)
        XCTAssertEqual(fieldServer.streamsAllowedByOpenFiles, 20_000 - 128 - 64, "one descriptor per stream: its connection")
        XCTAssertEqual(fieldServer.streamsAllowedByMemory, 24_576)
        XCTAssertEqual(fieldServer.defaultMaximumStreams, 19_808)
        XCTAssertFalse(fieldServer.holdsFileDescriptors(maximumStreams: 19_808), "no room to keep the recordings open too")
        XCTAssertEqual(fieldServer.streamsHoldingFiles, 9_904)
        XCTAssertTrue(fieldServer.holdsFileDescriptors(maximumStreams: 9_904))
        XCTAssertFalse(fieldServer.holdsFileDescriptors(maximumStreams: 9_905))
        XCTAssertFalse(fieldServer.holdsFileDescriptors(maximumStreams: 10_000), "the issue's 10,000 streams open their files for each write")

        let systemdUnit = StreamCapacity(openFileLimit: 524_288, openFileLimitBefore: 1_024, physicalMemory: 2 << 30)
        XCTAssertEqual(systemdUnit.defaultMaximumStreams, 2_048, "a small box is bounded by its memory")

        let starved = StreamCapacity(openFileLimit: 100, openFileLimitBefore: 100, physicalMemory: 1 << 30)
        XCTAssertEqual(starved.defaultMaximumStreams, 1, "never below one stream")
        XCTAssertEqual(StreamCapacity.openFilesNeeded(forStreams: 10_000), 10_192)
    }

    /// Issue 31: a --max-streams the open files cannot hold is lowered to what they hold; one
    /// they can hold, or none given, is kept (the default).
    func testAMaxStreamsBeyondTheOpenFilesIsLoweredToWhatFits() {
        let fieldServer = StreamCapacity(openFileLimit: 20_000, openFileLimitBefore: 1_024, physicalMemory: 24 << 30)
        XCTAssertEqual(fieldServer.maximumStreams(requested: 10_000), 10_000, "the issue's 10,000 streams on 20,000 descriptors")
        XCTAssertEqual(fieldServer.maximumStreams(requested: 19_808), 19_808)
        XCTAssertEqual(fieldServer.maximumStreams(requested: 100), 100)
        XCTAssertEqual(fieldServer.maximumStreams(requested: 1_000_000), 19_808)
        XCTAssertEqual(fieldServer.maximumStreams(requested: nil), fieldServer.defaultMaximumStreams)
        // More streams than the memory's default may be asked for: only the descriptors bound it.
        let smallBox = StreamCapacity(openFileLimit: 524_288, openFileLimitBefore: 1_024, physicalMemory: 2 << 30)
        XCTAssertEqual(smallBox.maximumStreams(requested: 10_000), 10_000)
        XCTAssertEqual(smallBox.maximumStreams(requested: 1_000_000), 524_096)
        let starved = StreamCapacity(openFileLimit: 100, openFileLimitBefore: 100, physicalMemory: 1 << 30)
        XCTAssertEqual(starved.maximumStreams(requested: 8), 1, "never below one stream")
    }

    func testRaisingTheLimitReachesTheHardLimit() {
        let capacity = StreamCapacity.raiseAndMeasure()
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        XCTAssertEqual(UInt64(capacity.openFileLimit), min(UInt64(limit.rlim_max), UInt64(Int32.max)))
        XCTAssertEqual(limit.rlim_cur, limit.rlim_max)
    }

    func testResumedStreamsCountAgainstTheLimit() {
        let registry = StreamRegistry()
        let live = UUID(), interrupted = UUID()
        XCTAssertEqual(registry.reserve(interrupted, maximumStreams: 1), .reserved)
        registry.release(interrupted)
        XCTAssertEqual(registry.reserve(live, maximumStreams: 1), .reserved)
        XCTAssertEqual(registry.reserve(interrupted, maximumStreams: 1), .full, "a resume is one more stream recording")
        registry.release(live)
        XCTAssertEqual(registry.reserve(interrupted, maximumStreams: 1), .reserved)
        XCTAssertEqual(registry.reserve(interrupted, maximumStreams: 2), .busy, "one connection per stream")
    }

    func testConnectionsBeyondTheLimitAreNotRecorded() {
        let registry = StreamRegistry()
        let first = NSObject(), second = NSObject()
        XCTAssertTrue(registry.addConnection(ObjectIdentifier(first), maximumConnections: 1) {})
        XCTAssertFalse(registry.addConnection(ObjectIdentifier(second), maximumConnections: 1) {})
        XCTAssertEqual(registry.connectionCount, 1)
        registry.removeConnection(ObjectIdentifier(first))
        XCTAssertTrue(registry.addConnection(ObjectIdentifier(second), maximumConnections: 1) {})
    }

    func testAFloodOfRefusalsIsOneLinePerInterval() {
        let summary = RepeatedEventSummary(interval: .seconds(10))
        let start = Date(timeIntervalSince1970: 1_000)
        XCTAssertEqual(summary.record(now: start), 1, "the first one is logged at once")
        for second in 1...9 { XCTAssertNil(summary.record(now: start.addingTimeInterval(Double(second)))) }
        XCTAssertEqual(summary.record(now: start.addingTimeInterval(10)), 10, "then the count since the last line")
        XCTAssertNil(summary.record(now: start.addingTimeInterval(11)))
        XCTAssertEqual(summary.record(now: start.addingTimeInterval(25)), 2)
    }
}
