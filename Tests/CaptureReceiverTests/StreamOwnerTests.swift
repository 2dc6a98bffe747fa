@testable import CaptureReceiver
import CaptureWire
import Foundation
import XCTest

/// Who may write a stream (issue 19, item 4): the owner recorded at creation against who asks.
final class StreamOwnerTests: XCTestCase {
    private let secret = Data((0..<32).map { UInt8($0) })

    func testOnlyTheSameSecretFromTheSameIdentityMayResume() {
        let tokenA = StreamOwner.identity(token: "unit-a")
        let tokenB = StreamOwner.identity(token: "unit-b")
        var flipped = secret
        flipped[0] ^= 0x80
        let owner = StreamOwner(secret: secret, identity: tokenA)
        let cases: [(claimant: StreamOwner, allowed: Bool, reason: String)] = [
            (StreamOwner(secret: secret, identity: tokenA), true, ""),
            (StreamOwner(secret: secret, identity: tokenB), false, "started with another token"),
            (StreamOwner(secret: secret, identity: nil), false, "started with another token"),
            (StreamOwner(secret: flipped, identity: tokenA), false, "resume secret does not match"),
            (StreamOwner(secret: Data(), identity: tokenA), false, "resume secret does not match"),
        ]
        for row in cases {
            let refusal = owner.refusal(of: row.claimant)
            XCTAssertEqual(refusal == nil, row.allowed, "\(row)")
            if !row.allowed { XCTAssertTrue(refusal?.contains(row.reason) ?? false, "\(refusal ?? "nil")") }
        }
        // Without authentication only the secret counts; a stream started without one cannot be resumed.
        XCTAssertNil(StreamOwner(secret: secret, identity: nil).refusal(of: StreamOwner(secret: secret, identity: nil)))
        XCTAssertNotNil(StreamOwner(secret: Data(), identity: nil).refusal(of: StreamOwner(secret: Data(), identity: nil)))
        XCTAssertFalse(StreamOwner.identity(token: "unit-a").contains("unit-a"), "the token itself is never stored")
    }

    func testIndexEntriesKeepTheirOwnerThroughTheirText() throws {
        let owner = StreamOwner(secret: secret, identity: StreamOwner.identity(token: "t"))
        let record = FinishedStreamRecord(relativePath: "a/b.caf", frames: 9, packets: 3, end: StreamPosition(lastSequence: 4, endSampleTime: 9))
        for entry in [
            StreamIndexEntry(stream: .recording(relativePath: "a/b.caf"), owner: owner),
            StreamIndexEntry(stream: .recording(relativePath: "a/b.caf"), owner: nil),
            StreamIndexEntry(stream: .finished(record), owner: owner),
            StreamIndexEntry(stream: .finished(record), owner: StreamOwner(secret: Data(), identity: nil)),
        ] {
            XCTAssertEqual(StreamIndexEntry(text: entry.text), entry, entry.text)
        }
        XCTAssertEqual(StreamIndexEntry(text: "old/file.caf")?.stream, .recording(relativePath: "old/file.caf"), "an entry from before owners")
        XCTAssertNil(StreamIndexEntry(text: "a.caf\nowner secret=zz identity=-\n"), "a damaged owner line")
        XCTAssertNil(StreamIndexEntry(text: "a.caf\nb.caf\n"))
    }
}
