import CAF
import CaptureSecurity
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A spooled stream belongs to its destination: a run delivers only the earlier streams of the
/// receiver it names, each claimed by one process; a stream with no captured audio leaves nothing
/// behind; `capture-send spool list|deliver|discard` show and move the rest. Two receivers A and B
/// on loopback, with real senders and receivers.
final class SpoolOwnershipTests: XCTestCase {
    private var work: URL!
    private var spool: URL!
    private var fixtures: SecurityFixtures!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("spool-ownership-\(UUID().uuidString)")
        spool = try Unprivileged.makeDirectory(work.appendingPathComponent("spool"))
        fixtures = try SecurityFixtures()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
        fixtures = nil
    }

    // MARK: - Helpers

    /// A loopback port nobody listens on (yet).
    private func freePort() throws -> Int { try LoopbackPort.free() }

    private func sender(_ arguments: [String], token: String? = nil) throws -> ChildProcess {
        try ChildProcess(Products.send, arguments + Resilience.senderOptions(spool: spool), environment: token.map { ["CAPTURE_TOKEN": $0] } ?? [:])
    }

    /// Runs `capture-send spool …` on the test's spool; returns status, standard output and error.
    private func spoolCommand(_ arguments: [String], token: String? = nil) throws -> (status: Int32, output: String, errors: String) {
        let child = try ChildProcess(Products.send, ["spool"] + arguments + ["--spool", spool.path], environment: token.map { ["CAPTURE_TOKEN": $0] } ?? [:])
        let status = child.wait(seconds: 120)
        return (status, child.standardOutput, child.standardError)
    }

    /// `spool list`'s rows as column maps (header names as keys).
    private func listed() throws -> [[String: String]] {
        let result = try spoolCommand(["list"])
        XCTAssertEqual(result.status, 0, result.errors)
        let lines = result.output.split(separator: "\n").map(String.init)
        guard let header = lines.first, header.hasPrefix("STREAM") else {
            XCTAssertEqual(result.output, "no streams in the spool \(spool.path)\n")
            return []
        }
        let names = Self.columns(header)
        return lines.dropFirst().map { Dictionary(uniqueKeysWithValues: zip(names, Self.columns($0))) }
    }

    private static func columns(_ line: String) -> [String] {
        line.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The stream folders in the spool (hidden ones included).
    private func spoolEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []).sorted()
    }

    /// Starts a sender aimed at `address` (nobody listening), waits until its spool holds audio,
    /// and kills it with SIGKILL; returns the stream's id.
    private func leaveStream(for address: String, name: String, options: [String] = []) throws -> String {
        let before = Set(spoolEntries())
        let killed = try sender([address, "--source", "tone", "--buffer-seconds", "0.1", "--stream-name", name] + options)
        var id: String?
        Resilience.waitUntil("the spool holds audio of \(name)") {
            guard let folder = spoolEntries().first(where: { !before.contains($0) && UUID(uuidString: $0) != nil }) else { return false }
            id = folder
            return (try? Resilience.spooledEnd(streamFolder: spool.appendingPathComponent(folder))) ?? 0 >= 9_600
        }
        killed.signal(SIGKILL)
        _ = killed.wait(seconds: 10)
        return try XCTUnwrap(id)
    }

    private func markers(_ file: URL) throws -> [String] {
        try CAFFile.read(path: file.path).markers.map(\.name)
    }

    // MARK: - Tests

    func testAStreamForAReceiverThatIsDownReachesOnlyThatReceiverWhenItIsUp() throws {
        let portA = try freePort()
        let addressA = "127.0.0.1:\(portA)"
        let receiverB = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let leftover = try leaveStream(for: addressA, name: "for-a")

        let runB = try sender([receiverB.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "for-b"])
        XCTAssertEqual(Resilience.finish(runB), 0, runB.standardError)
        XCTAssertEqual(receiverB.files().map { String($0.lastPathComponent.prefix(6)) }, ["for-b_"], "nothing of A's stream reached B")
        XCTAssertTrue(runB.standardError.contains("earlier streams for other receivers stay in the spool"), runB.standardError)

        let rows = try listed()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?["STREAM"], leftover)
        XCTAssertEqual(rows.first?["NAME"], "for-a")
        XCTAssertEqual(rows.first?["DESTINATION"], addressA)
        XCTAssertEqual(rows.first?["STATE"], "waiting")
        XCTAssertEqual(rows.first?["LAST ERROR"], "-")
        XCTAssertGreaterThan(Int(rows.first?["BYTES"] ?? "") ?? 0, 9_600 * 4 - 1)

        let receiverA = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: portA)
        let delivered = try spoolCommand(["deliver", "--timeout", "60"])
        XCTAssertEqual(delivered.status, 0, delivered.output + delivered.errors)
        XCTAssertEqual(delivered.output, "delivered \(leftover) to \(addressA)\n")
        XCTAssertEqual(receiverA.files().map { String($0.lastPathComponent.prefix(6)) }, ["for-a_"])
        XCTAssertEqual(receiverB.files().count, 1)
        XCTAssertEqual(try listed().count, 0, "the delivered stream left the spool")
    }

    func testARefusedStreamIsNeverSentUnderAnotherReceiversToken() throws {
        let tokensA = fixtures.tokenFile("alpha-token\n", name: "tokens-a")
        let tokensB = fixtures.tokenFile("bravo-token\n", name: "tokens-b")
        let portA = try freePort()
        let addressA = "127.0.0.1:\(portA)"
        let receiverB = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + ["--token-file", tokensB])

        // A run aimed at A spools audio while A is down; A then comes up and refuses its token.
        let refused = try sender([addressA, "--source", "tone", "--buffer-seconds", "0.1", "--stream-name", "for-a"], token: "wrong-token")
        Resilience.waitUntil("the spool holds audio") {
            spoolEntries().contains { folder in
                UUID(uuidString: folder) != nil && ((try? Resilience.spooledEnd(streamFolder: spool.appendingPathComponent(folder))) ?? 0) >= 9_600
            }
        }
        let receiverA = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + ["--token-file", tokensA], port: portA)
        XCTAssertNotEqual(Resilience.finish(refused), 0)
        XCTAssertTrue(refused.standardError.contains("authenticationFailed"), refused.standardError)
        XCTAssertEqual(receiverA.files(), [], "A refused the stream")

        let runB = try sender([receiverB.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "for-b"], token: "bravo-token")
        XCTAssertEqual(Resilience.finish(runB), 0, runB.standardError)
        XCTAssertEqual(receiverB.files().map { String($0.lastPathComponent.prefix(6)) }, ["for-b_"], "the refused stream did not become B's recording")

        let rows = try listed()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?["DESTINATION"], addressA)
        XCTAssertTrue(rows.first?["LAST ERROR"]?.contains("the receiver refused the stream (authenticationFailed)") ?? false, "\(rows)")
        let id = try XCTUnwrap(rows.first?["STREAM"])

        // Delivering every stream with one token while streams for two receivers wait is refused.
        let leftForB = try leaveStream(for: "127.0.0.1:\(try freePort())", name: "elsewhere")
        let mixed = try spoolCommand(["deliver", "--timeout", "30"], token: "bravo-token")
        XCTAssertNotEqual(mixed.status, 0)
        XCTAssertTrue(mixed.errors.contains("a token is only sent to one receiver"), mixed.errors)
        XCTAssertEqual(receiverA.files(), [])

        let delivered = try spoolCommand(["deliver", id, "--timeout", "60"], token: "alpha-token")
        XCTAssertEqual(delivered.status, 0, delivered.output + delivered.errors)
        XCTAssertEqual(delivered.output, "delivered \(id) to \(addressA)\n")
        XCTAssertEqual(receiverA.files().map { String($0.lastPathComponent.prefix(6)) }, ["for-a_"])
        XCTAssertEqual(try listed().map { $0["STREAM"] }, [leftForB])
    }

    func testARunStoppedBeforeItsFirstBufferLeavesNothingAnywhere() throws {
        let tokensA = fixtures.tokenFile("alpha-token\n", name: "tokens-a")
        let receiverA = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + ["--token-file", tokensA])
        let receiverB = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let downA = "127.0.0.1:\(try freePort())"

        // Killed before its first buffer (5 s, capped at 320 KiB: 1.7 s), while its receiver is down.
        let killed = try sender([downA, "--source", "tone", "--buffer-seconds", "5", "--stream-name", "killed"])
        Resilience.waitUntil("the sender captures") { killed.standardError.contains("capturing") }
        killed.signal(SIGKILL)
        _ = killed.wait(seconds: 10)
        XCTAssertEqual(spoolEntries(), [], "a sender killed before its first buffer leaves no spool")

        // Refused at its handshake. A stream is announced only once it has audio, so the refusal
        // comes after the first buffer: that audio stays in the spool, for A only, with the refusal
        // as its last error; what capture held beyond it is dropped, not recorded as a gap.
        let refused = try sender([receiverA.address, "--source", "tone", "--buffer-seconds", "5", "--stream-name", "refused"], token: "wrong-token")
        XCTAssertNotEqual(Resilience.finish(refused), 0)
        let rows = try listed()
        XCTAssertEqual(rows.count, 1, "\(rows)")
        XCTAssertEqual(rows.first?["NAME"], "refused")
        XCTAssertEqual(rows.first?["DESTINATION"], receiverA.address)
        XCTAssertTrue(rows.first?["LAST ERROR"]?.contains("authenticationFailed") ?? false, "\(rows)")

        let runB = try sender([receiverB.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "for-b"])
        XCTAssertEqual(Resilience.finish(runB), 0, runB.standardError)
        let files = receiverB.files()
        XCTAssertEqual(files.map { String($0.lastPathComponent.prefix(6)) }, ["for-b_"], "no file of silence from the stopped runs")
        XCTAssertFalse(try markers(try XCTUnwrap(files.first)).contains { $0.contains("overrun") })
        XCTAssertEqual(receiverA.files(), [], "the refused stream never became a file")
        XCTAssertEqual(try listed().map { $0["NAME"] }, ["refused"], "B's run left A's stream alone")
    }

    func testTheSameAddressVerifiedAgainstAnotherPinIsAnotherDestination() throws {
        let issuedA = try CertificateFactory.make(commonName: "receiver-a", hosts: ["127.0.0.1"])
        let files = try fixtures.write(issuedA, as: "receiver-a")
        let pinA = issuedA.fingerprint.hex
        let pinOther = try CertificateFactory.make(commonName: "someone-else", hosts: ["127.0.0.1"]).fingerprint.hex
        let port = try freePort()
        let address = "127.0.0.1:\(port)"
        let leftover = try leaveStream(for: address, name: "other-pin", options: ["--tls", "--pin", pinOther])
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + ["--tls-cert", files.cert, "--tls-key", files.key], port: port)

        let run = try sender([address, "--tls", "--pin", pinA, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "pinned"])
        XCTAssertEqual(Resilience.finish(run), 0, run.standardError)
        XCTAssertEqual(receiver.files().map { String($0.lastPathComponent.prefix(7)) }, ["pinned_"], "the stream pinned to another certificate was not sent here")
        let rows = try listed()
        XCTAssertEqual(rows.map { $0["STREAM"] }, [leftover])
        XCTAssertEqual(rows.first?["DESTINATION"], "\(address) tls:pin=\(pinOther.prefix(16))…")

        // Delivered on its own, it is held to its recorded pin: this receiver's certificate fails it.
        let attempt = try spoolCommand(["deliver", leftover, "--timeout", "60"])
        XCTAssertNotEqual(attempt.status, 0)
        XCTAssertTrue(attempt.output.contains("not delivered \(leftover) to \(address): TLS: pin mismatch"), attempt.output)
        XCTAssertTrue(try listed().first?["LAST ERROR"]?.contains("TLS: pin mismatch") ?? false)
        XCTAssertEqual(receiver.files().count, 1)
    }

    func testAStreamOfAnOlderSpoolGoesOnlyWhereSpoolDeliverToNamesIt() throws {
        let port = try freePort()
        let address = "127.0.0.1:\(port)"
        let leftover = try leaveStream(for: address, name: "older")
        // Make it a version 1 spool: no destination recorded.
        let metaURL = spool.appendingPathComponent(leftover).appendingPathComponent("meta.json")
        var meta = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: metaURL)) as? [String: Any])
        meta["version"] = 1
        meta["destination"] = nil
        try JSONSerialization.data(withJSONObject: meta).write(to: metaURL)
        Unprivileged.handOver(metaURL.path)
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)

        let run = try sender([address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "new"])
        XCTAssertEqual(Resilience.finish(run), 0, run.standardError)
        XCTAssertEqual(receiver.files().map { String($0.lastPathComponent.prefix(4)) }, ["new_"], "a stream without a recorded receiver is not guessed")
        XCTAssertTrue(run.standardError.contains("capture-send spool deliver ID --to HOST:PORT"), run.standardError)
        XCTAssertEqual(try listed().first?["DESTINATION"], "unknown")

        let everything = try spoolCommand(["deliver", "--timeout", "30"])
        XCTAssertEqual(everything.status, 0, everything.errors)
        XCTAssertEqual(everything.output, "skipped \(leftover): its spool does not record a receiver; deliver it with capture-send spool deliver \(leftover) --to HOST:PORT\n")
        let named = try spoolCommand(["deliver", leftover, "--to", address, "--timeout", "60"])
        XCTAssertEqual(named.status, 0, named.output + named.errors)
        XCTAssertEqual(named.output, "delivered \(leftover) to \(address)\n")
        XCTAssertEqual(receiver.files().map { String($0.lastPathComponent.prefix(4)) }.sorted(), ["new_", "olde"])
        XCTAssertEqual(spoolEntries(), [])
    }

    func testTwoRunsStartedTogetherNeverBothDeliverOneStream() throws {
        let portA = try freePort()
        let addressA = "127.0.0.1:\(portA)"
        let leftover = try leaveStream(for: addressA, name: "leftover")
        let receiverA = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: portA)

        let first = try sender([addressA, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "first"])
        let second = try sender([addressA, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "second"])
        XCTAssertEqual(Resilience.finish(first), 0, first.standardError)
        XCTAssertEqual(Resilience.finish(second), 0, second.standardError)
        let deliverers = [first, second].filter { $0.standardError.contains("earlier stream delivered; removed from the spool") }
        XCTAssertEqual(deliverers.count, 1, "exactly one run delivered the leftover:\n\(first.standardError)\n\(second.standardError)")
        let deliverer = try XCTUnwrap(deliverers.first)
        XCTAssertTrue(deliverer.standardError.contains("pid=\(deliverer.process.processIdentifier)"), "the delivering process names itself: \(deliverer.standardError)")
        XCTAssertTrue(deliverer.standardError.contains(leftover))
        let names = receiverA.files().map(\.lastPathComponent)
        XCTAssertEqual(names.filter { $0.hasPrefix("leftover_") }.count, 1, "one file for the leftover: \(names)")
        XCTAssertEqual(names.count, 3, "\(names)")
        XCTAssertEqual(spoolEntries(), [])
    }

    func testDiscardAsksOrNeedsYesAndTheRootCommandStillSends() throws {
        let leftover = try leaveStream(for: "127.0.0.1:\(try freePort())", name: "unwanted")
        let refused = try spoolCommand(["discard", leftover])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.errors.contains("not discarding anything: standard input is not a terminal to confirm on; add --yes to discard without asking"), refused.errors)
        XCTAssertEqual(try listed().count, 1)

        let discarded = try spoolCommand(["discard", String(leftover.prefix(8)), "--yes"])
        XCTAssertEqual(discarded.status, 0, discarded.errors)
        XCTAssertTrue(discarded.output.hasPrefix("discarded \(leftover) ("), discarded.output)
        XCTAssertEqual(spoolEntries(), [])

        let help = try ChildProcess(Products.send, ["--help"])
        XCTAssertEqual(help.wait(seconds: 30), 0)
        for option in ["HOST:PORT", "--spool-max", "--token-file", "--codec", "spool"] {
            XCTAssertTrue(help.standardOutput.contains(option), "--help shows \(option):\n\(help.standardOutput)")
        }
    }
}
