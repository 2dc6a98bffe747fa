import CaptureCore
import Foundation
import Synchronization
import XCTest

@testable import CaptureListen

/// A slow listener is dropped alone; offering audio never blocks; cancelling ends a listener.
final class ListenHubBoundsTests: XCTestCase {
    func testASlowListenerIsDroppedAfterTheBoundWhileTheOtherGetsEverythingAndOffersNeverBlock() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 5, packetsPerOffer: 1)
        // The executor's own bound is generous here so that only the listeners' bound is tested.
        let hub = try ListenHub(
            format: stream.format, magicCookie: stream.cookie, limits: ListenLimits(listenerBacklog: .seconds(2), queueBacklog: .seconds(60)))
        let slow = try hub.listen()
        let reader = try hub.listen()
        await hub.waitUntilIdle()

        // The reader signals each chunk it receives; the offering thread waits for each before the
        // next offer, so the reader never falls behind, while the slow listener never reads at all.
        let chunkArrived = DispatchSemaphore(value: 0)
        let readerTask = Task {
            var bytes: [UInt8] = []
            for await chunk in reader {
                bytes += chunk
                chunkArrived.signal()
            }
            return bytes
        }
        XCTAssertEqual(chunkArrived.wait(timeout: .now() + 30), .success, "the headers arrive")

        let offersReturned = SharedCount(0)
        let slowEndedAtOffer = SharedCount(-1)
        let offers = stream.offers
        let offering = Thread {
            for (index, offer) in offers.enumerated() {
                hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount)
                offersReturned.value.add(1, ordering: .relaxed)
                guard chunkArrived.wait(timeout: .now() + 30) == .success else { return }
                if slow.endReason != nil, slowEndedAtOffer.value.load(ordering: .relaxed) < 0 {
                    slowEndedAtOffer.value.store(index, ordering: .relaxed)
                }
            }
        }
        offering.start()
        while offersReturned.value.load(ordering: .relaxed) < offers.count || !offering.isFinished {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(offersReturned.value.load(ordering: .relaxed), 250, "every offer returned though one listener never read")
        XCTAssertEqual(slow.endReason, .tooSlow(bound: .seconds(2)))
        XCTAssertEqual(
            slowEndedAtOffer.value.load(ordering: .relaxed), 100,
            "dropped with the packet that took its unread audio past 2 s (100 packets of 20 ms)")
        XCTAssertEqual(hub.statistics.listenersDropped, 1)
        XCTAssertEqual(hub.statistics.listeners, 1)

        hub.finish()
        var slowChunks = 0
        for await _ in slow { slowChunks += 1 }
        XCTAssertEqual(slowChunks, 0, "a dropped listener's unread audio is discarded, not kept")
        let bytes = await readerTask.value
        XCTAssertEqual(reader.endReason, .streamEnded)
        XCTAssertEqual(Array(try OggTestReader(bytes).packets.dropFirst(2)), ListenTestSupport.packets(of: offers), "everything, in order")
    }

    func testOffersReturnWhileTheExecutorIsStuckAndItsListenersAreDroppedPastTheBound() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 4, packetsPerOffer: 5)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        let first = try hub.listen()
        let second = try hub.listen()
        await hub.waitUntilIdle()
        let release = DispatchSemaphore(value: 0)
        hub.blockExecutor(until: release)

        let offersDone = DispatchSemaphore(value: 0)
        let offers = stream.offers
        let offering = Thread {
            for offer in offers { hub.offer(payload: offer.payload, packetSizes: offer.packetSizes, frameCount: offer.frameCount) }
            offersDone.signal()
        }
        offering.start()
        XCTAssertEqual(offersDone.wait(timeout: .now() + 30), .success, "4 s of offers returned while the executor was stuck")
        release.signal()
        await hub.waitUntilIdle()
        XCTAssertEqual(first.endReason, .receiverBehind(bound: .seconds(2)))
        XCTAssertEqual(second.endReason, .receiverBehind(bound: .seconds(2)))
        XCTAssertEqual(hub.statistics.listeners, 0)
        XCTAssertEqual(hub.statistics.listenersDropped, 2)
        XCTAssertEqual(
            "\(ListenEndReason.receiverBehind(bound: .seconds(2)))",
            "the receiver fell more than 2 s behind preparing this stream for listening and dropped its listeners (the recording is unaffected): connect again, or listen to fewer streams at once")
    }

    /// The bounds are set as durations and counted in samples at 48 kHz, the rate every listener
    /// hears; a listener dropped is told the bound as it was set.
    func testBoundsAreDurationsCountedAt48kHz() {
        let rows: [(Duration, samples: Int)] = [
            (.seconds(2), 96_000), (.milliseconds(500), 24_000), (.milliseconds(100), 4_800),
            (.milliseconds(50), 2_400), (.milliseconds(1), 48), (.microseconds(10), 0), (.zero, 0),
            (.seconds(Int64.max), Int.max),
        ]
        for (bound, samples) in rows {
            XCTAssertEqual(ListenLimits(listenerBacklog: bound).listenerBacklogSamples, samples, "\(bound)")
            XCTAssertEqual(ListenLimits(queueBacklog: bound).queueBacklogSamples, samples, "\(bound)")
        }
        XCTAssertEqual(
            "\(ListenEndReason.tooSlow(bound: .milliseconds(500)))",
            "the listener fell more than 0.5 s behind the live stream and was dropped: connect again to listen from the live edge")
    }

    func testCancellingTheReadingTaskEndsTheListenerAndTheHubForgetsIt() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 1)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        let listener = try hub.listen()
        let reading = Task {
            var chunks = 0
            for await _ in listener { chunks += 1 }
            return chunks
        }
        await hub.waitUntilIdle()
        reading.cancel()
        _ = await reading.value
        XCTAssertEqual(listener.endReason, .cancelled)
        await hub.waitUntilIdle()
        XCTAssertEqual(hub.statistics.listeners, 0)
    }

    func testListeningToAFinishedStreamIsRefused() async throws {
        let stream = try ListenTestSupport.opusStream(seconds: 0.2)
        let hub = try ListenHub(format: stream.format, magicCookie: stream.cookie)
        hub.finish()
        XCTAssertThrowsError(try hub.listen()) { error in
            XCTAssertEqual("\(error)", "this stream has ended: there is no live audio to listen to")
        }
    }
}

/// A counter threads share.
final class SharedCount: Sendable {
    let value: Atomic<Int>
    init(_ initial: Int) { value = Atomic(initial) }
}
