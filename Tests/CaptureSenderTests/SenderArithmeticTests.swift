@testable import CaptureSender
import XCTest

/// Values a library caller may hand the sender's messages: none traps (the Hello's start time:
/// SenderSessionTests.testTheHellosStartTimeIsConvertedWithoutTrapping).
final class SenderArithmeticTests: XCTestCase {
    func testGiveUpAndRetryMessagesNeverTrapOnTheirSeconds() {
        let gaveUp = { (seconds: Double) in
            SenderError.gaveUp(receiver: "b:1", reason: .noProgress(seconds: seconds), fromSecond: 0).description
        }
        XCTAssertTrue(gaveUp(3).contains("made no progress for 3 s"))
        XCTAssertTrue(gaveUp(2.5).contains("made no progress for 2.5 s"))
        XCTAssertTrue(gaveUp(1e300).contains("made no progress for 1e+300 s"), gaveUp(1e300))
        XCTAssertTrue(gaveUp(.infinity).contains("made no progress for inf s"), gaveUp(.infinity))
        XCTAssertTrue(SenderError.rateLimited(message: "m", retryAfter: 1e300).description.contains("trying again in 1e+300 s"))
        XCTAssertTrue(SenderError.rateLimited(message: "m", retryAfter: 0.2).description.contains("trying again in 1 s"))
    }
}

/// The stream name of an encoding after the first: `NAME-LABEL`, within the 255 bytes a receiver
/// accepts, the name cut at a character.
final class EncodingStreamNameTests: XCTestCase {
    func testTheNameIsTheCapturesWithTheLabelAndFitsTheLimit() {
        XCTAssertEqual(CaptureStreamer.encodingStreamName("field", label: "opus-64k-20ms"), "field-opus-64k-20ms")
        let long = String(repeating: "é", count: 127)  // 254 bytes
        let named = CaptureStreamer.encodingStreamName(long, label: "opus-64k-20ms")
        XCTAssertLessThanOrEqual(named.utf8.count, 255)
        XCTAssertTrue(named.hasSuffix("é-opus-64k-20ms"), named)
        XCTAssertEqual(named.utf8.count, 2 * 120 + 14)
    }
}

/// A spool's filled-gap record ('F') read back: a whole one comes back as it was written; one
/// whose numbers no stream can hold (a stretch after where it stands, negative, past 2^62) or that
/// is cut short is damage, never an entry.
final class FilledGapSpoolRecordTests: XCTestCase {
    private func body(position: Int64, sampleTime: Int64, length: Int64, reason: String = "paused", cut: Int = 0) -> ArraySlice<UInt8> {
        var bytes: [UInt8] = [SpoolRecord.filledGapType]
        for value in [UInt64(7), UInt64(bitPattern: position), UInt64(bitPattern: sampleTime), UInt64(bitPattern: length)] {
            bytes += withUnsafeBytes(of: value.bigEndian, Array.init)
        }
        bytes += Array(reason.utf8)
        return ArraySlice(bytes.dropLast(cut))
    }

    func testAWholeRecordReadsBackAndADamagedOneIsRefused() {
        let entry = LoggedPacket(sequence: 7, content: .filledGap(position: 960, sampleTime: 300, length: 2_000, reason: "paused"))
        guard case .entry(let packet)? = SpoolRecord.decode(body: body(position: 960, sampleTime: 300, length: 2_000)) else {
            return XCTFail("a whole record is an entry")
        }
        XCTAssertEqual(packet, entry)
        let framed = SpoolRecord.entry(entry).framed()
        XCTAssertEqual(Array(framed.head.dropFirst(SpoolRecord.headerSize)), Array(body(position: 960, sampleTime: 300, length: 2_000)))
        XCTAssertNil(SpoolRecord.decode(body: body(position: 100, sampleTime: 300, length: 10)), "a stretch after where it stands")
        XCTAssertNil(SpoolRecord.decode(body: body(position: 960, sampleTime: -1, length: 10)), "a negative start")
        XCTAssertNil(SpoolRecord.decode(body: body(position: 960, sampleTime: 300, length: -5)), "a negative length")
        XCTAssertNil(SpoolRecord.decode(body: body(position: 1 << 62 + 1, sampleTime: 300, length: 10)), "past 2^62")
        XCTAssertNil(SpoolRecord.decode(body: body(position: 960, sampleTime: 300, length: Int64.max)), "a length no stream holds")
        XCTAssertNil(SpoolRecord.decode(body: body(position: 960, sampleTime: 300, length: 10, reason: "", cut: 1)), "cut short")
    }
}
