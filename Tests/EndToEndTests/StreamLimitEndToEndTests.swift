import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The receiver sizes itself for the machine: it raises its open-file limit and says how many
/// streams that allows, and connections beyond its limit are closed before they read or open anything.
final class StreamLimitEndToEndTests: XCTestCase {
    func testTheReceiverRaisesItsOpenFileLimitAndSaysWhatItAllows() throws {
        var original = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &original), 0)
        guard original.rlim_max > 2_048 else { throw XCTSkip("the hard open-file limit is only \(original.rlim_max)") }
        // The receiver inherits a soft limit of 1024, as under a default systemd unit.
        var lowered = original
        lowered.rlim_cur = 1_024
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered), 0)
        let receiver: ReceiverUnderTest
        do {
            defer { _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &original) }
            receiver = try ReceiverUnderTest()
        }
        let hard = Int(min(original.rlim_max, rlim_t(Int32.max)))
        let allowed = hard - 192
        XCTAssertTrue(waitFor { receiver.child.standardError.contains("stream limit") }, receiver.child.standardError)
        let line = receiver.child.standardError.split(separator: "\n").first { $0.contains("stream limit") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("open-file-limit=\"\(hard) (raised from 1024)\""), line)
        XCTAssertTrue(line.contains("streams-the-open-file-limit-allows=\(allowed)"), line)
        let memory = Int(ProcessInfo.processInfo.physicalMemory >> 20)
        XCTAssertTrue(line.contains("max-streams=\(min(allowed, memory))"), line)
        let holds = min(allowed, memory) * 2 + 192 <= hard
        XCTAssertTrue(line.contains("recordings-held-open=\(holds ? "yes" : "\"no (opened for each write: lower --max-streams to \((hard - 192) / 2) to keep them open)\"")"), line)
        let limits = try String(contentsOfFile: "/proc/\(receiver.child.process.processIdentifier)/limits", encoding: .utf8)
        let openFiles = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
        XCTAssertEqual(openFiles.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).prefix(2).map(String.init), ["\(hard)", "\(hard)"])
    }

    /// With room in the open-file limit, a recording stream holds one file open beside its
    /// connection: its CAF file. Its claim is a byte in the receiver's one lock file, and its packet
    /// journal and position log are opened only to write them.
    func testARecordingStreamHoldsOnlyItsRecordingOpenBesideItsConnection() throws {
        let open = try filesOpenWhileRecording(extraArguments: ["--max-streams", "100"])
        XCTAssertEqual(open.map { $0.hasSuffix(".caf") ? "caf" : $0 }.sorted(), [".locks", "caf"],
                       "the journal and the position log are not held open (the folder itself is, for syncfs): \(open)")
    }

    /// Without room for a recording per stream beside the connections (the default --max-streams of
    /// a 20,000-descriptor machine), the recording is opened for each write: nothing of the stream
    /// stays open but its connection.
    func testWithoutRoomARecordingStreamHoldsNothingOpenBesideItsConnection() throws {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        let memory = Int(ProcessInfo.processInfo.physicalMemory >> 20)
        let hard = Int(min(limit.rlim_max, rlim_t(Int32.max)))
        guard min(hard - 192, memory) * 2 + 192 > hard else { throw XCTSkip("this machine's limit (\(hard)) has room for every default stream's recording") }
        var seen: Set<String> = []
        for _ in 0..<5 {
            seen.formUnion(try filesOpenWhileRecording(extraArguments: []))
        }
        XCTAssertEqual(seen, [".locks"], "the recording was never found held open: \(seen)")
    }

    /// What the receiver holds open in --out (other than its commit log) once a second of a stream
    /// is in the file: `.locks` for the stream lock file, the last path component for the rest.
    private func filesOpenWhileRecording(extraArguments: [String]) throws -> [String] {
        let receiver = try ReceiverUnderTest(extraArguments: extraArguments)
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "3", "--stream-name", "fds", "--buffer-seconds", "0.1"])
        let descriptors = "/proc/\(receiver.child.process.processIdentifier)/fd"
        var open: [String] = []
        var logFiles: [String] = []
        XCTAssertTrue(waitFor(20) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? []
            let paths = names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(descriptors)/\($0)") }
                .filter { $0.hasPrefix(receiver.directory.path + "/") }
            // The receiver's commit log (its lock and segments) is the receiver's, not the stream's.
            logFiles = paths.filter { $0.hasPrefix(receiver.directory.path + "/.commit-log/") }
            open = paths.filter { !$0.hasPrefix(receiver.directory.path + "/.commit-log/") }.map { ($0 as NSString).lastPathComponent }
            let file = ((try? FileManager.default.contentsOfDirectory(atPath: receiver.directory.path)) ?? []).first { $0.hasSuffix(".caf") }
            let size = file.flatMap { try? FileManager.default.attributesOfItem(atPath: receiver.directory.appendingPathComponent($0).path)[.size] as? Int } ?? 0
            return size >= 192_000 && !open.isEmpty
        }, "the stream records: \(receiver.child.standardError)")
        XCTAssertTrue(logFiles.contains { $0.hasSuffix("/lock") }, "\(logFiles)")
        XCTAssertTrue(logFiles.contains { ($0 as NSString).lastPathComponent.hasPrefix("segment-") }, "\(logFiles)")
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        return open
    }

    /// Issue 31: --max-streams above what the open-file limit allows is lowered to what fits, with a
    /// start-up warning, and the streams beyond are refused as too many (TOO_MANY_STREAMS), never
    /// with STORAGE_FAILED for a missing descriptor.
    func testAMaxStreamsBeyondTheOpenFileLimitIsLoweredAndTheStreamsBeyondAreRefusedAsTooMany() throws {
        // 208 descriptors: (208 - 128 reserved - 64 in their handshake) / 1 per stream = 16 streams.
        let receiver = try ReceiverUnderTest(extraArguments: ["--max-streams", "100", "--log-level", "debug"], openFileLimit: 208)
        XCTAssertTrue(waitFor { receiver.child.standardError.contains("stream limit") }, receiver.child.standardError)
        XCTAssertTrue(receiver.child.standardError.contains(
            "--max-streams 100 needs an open-file limit of 292 but this process may open 208 files: lowered to 16 streams, and the streams beyond are refused as too many"),
            receiver.child.standardError)
        let line = receiver.child.standardError.split(separator: "\n").first { $0.contains("stream limit") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("max-streams=16"), line)

        // Sixteen streams record at once; the seventeenth is refused as one too many.
        var senders: [ChildProcess] = []
        defer { senders.forEach { $0.signal(SIGKILL) } }
        for index in 0..<16 {
            senders.append(try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "600", "--stream-name", "fits-\(index)"]))
        }
        XCTAssertTrue(waitFor(60) { receiver.files().filter { $0.lastPathComponent.hasPrefix("fits-") }.count == 16 },
                      "16 streams record: \(receiver.files().map(\.lastPathComponent))")
        let beyond = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "600", "--stream-name", "beyond"])
        senders.append(beyond)
        XCTAssertTrue(waitFor(60) { beyond.standardError.contains("TOO_MANY_STREAMS") || beyond.standardError.contains("already records 16 streams") },
                      "the 17th stream is refused as too many: \(beyond.standardError)")
        XCTAssertTrue(beyond.standardError.contains("already records 16 streams"), beyond.standardError)
        for text in [receiver.child.standardError, beyond.standardError] {
            XCTAssertFalse(text.contains("STORAGE_FAILED") || text.contains("storageFailed") || text.contains("Too many open files") || text.contains("too many open files"), text)
        }
        XCTAssertFalse(receiver.files().contains { $0.lastPathComponent.hasPrefix("beyond") }, "no file for the refused stream")
    }

    func testConnectionsBeyondTheLimitAreClosedAtOnceAndLoggedOnce() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--max-streams", "1", "--handshake-timeout", "60"])
        // One stream and 64 connections in their handshake fit; these send nothing and wait.
        // Which three of 68 are beyond the limit depends on the order the event loops take them up.
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for _ in 0..<68 { sockets.append(try LoopbackSocket.connect(port: receiver.port)) }
        var closed = Set<Int32>()
        XCTAssertTrue(waitFor(10) {
            for socket in sockets where !closed.contains(socket) && Self.closedByPeer(socket, within: 0) { closed.insert(socket) }
            return closed.count >= 3
        }, "three connections are closed at once; \(closed.count) were")
        usleep(300_000)
        for socket in sockets where !closed.contains(socket) && Self.closedByPeer(socket, within: 0) { closed.insert(socket) }
        XCTAssertEqual(closed.count, 3, "the 65 connections within the limit stay open")
        XCTAssertTrue(waitFor { receiver.child.standardError.contains("refusing connections") }, receiver.child.standardError)
        let lines = receiver.child.standardError.split(separator: "\n").filter { $0.contains("refusing connections") }
        XCTAssertEqual(lines.count, 1, "one line for the flood: \(lines)")
        XCTAssertTrue(lines.first?.contains("limit of 65 connections (--max-streams 1 and 64 in their handshake)") ?? false, "\(lines)")
    }

    /// True when the peer closes the connection (a read returns 0 or a reset) within `seconds`.
    private static func closedByPeer(_ descriptor: Int32, within seconds: Double) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1_000)) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) <= 0
    }
}
