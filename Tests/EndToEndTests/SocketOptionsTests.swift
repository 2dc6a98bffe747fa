import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Both programs set exactly the socket options they mean, at the right level, as the unprivileged
/// user they run as (issue 14, part 0: TCP_NODELAY had been set at SOL_SOCKET, where option 1 is
/// SO_DEBUG, which only root may set: as any other user every connection failed).
final class SocketOptionsTests: XCTestCase {
    /// Runs `executable` under `strace`, recording its setsockopt calls to `trace`.
    private func traced(_ executable: String, _ arguments: [String], trace: String) throws -> ChildProcess {
        guard let strace = ToolRunner.find("strace") else {
            throw TestFailure("strace is not installed: scripts/install-deps.sh installs it")
        }
        return try ChildProcess(strace, ["-f", "-qq", "-e", "trace=setsockopt", "-o", trace, executable] + arguments)
    }

    /// The one child process of `pid`, from /proc.
    private static func onlyChild(of pid: Int32) -> Int32? {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        let children = text.split(separator: " ").compactMap { Int32($0) }
        return children.count == 1 ? children[0] : nil
    }

    private func setsockoptCalls(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { $0.contains("setsockopt(") }
    }

    func testTCPNoDelayIsSetAtTheTCPLevelAndNothingNeedsRoot() throws {
        let folder = try Unprivileged.makeDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("sockopt-\(UUID().uuidString)"))
        defer { try? FileManager.default.removeItem(at: folder) }
        let receiverTrace = folder.appendingPathComponent("recv.trace").path
        let senderTrace = folder.appendingPathComponent("send.trace").path
        let output = folder.appendingPathComponent("out").path
        let receiver = try traced(Products.recv, ["--out", output, "--listen", "127.0.0.1:0"], trace: receiverTrace)
        defer { if receiver.process.isRunning { receiver.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(30) { receiver.standardOutput.contains("listening on ") }, receiver.standardError)
        let port = try XCTUnwrap(receiver.standardOutput.split(separator: "\n").first { $0.hasPrefix("listening on ") }?.split(separator: ":").last.flatMap { Int($0) })

        let sender = try traced(Products.send, ["127.0.0.1:\(port)", "--source", "tone", "--duration", "0.2", "--no-pace", "--no-spool"], trace: senderTrace)
        XCTAssertEqual(sender.wait(seconds: 60), 0, "an unprivileged sender delivers: \(sender.standardError)")
        // SIGTERM to the receiver itself: strace, sent a signal, would detach and leave it running.
        let receiverPID = try XCTUnwrap(Self.onlyChild(of: receiver.process.processIdentifier), "strace's child, capture-recv")
        kill(receiverPID, SIGTERM)
        XCTAssertEqual(receiver.wait(seconds: 30), 0, "strace exits with capture-recv's status: \(receiver.standardError)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: output).filter { $0.hasSuffix(".caf") }.count, 1)

        for (name, path) in [("capture-send", senderTrace), ("capture-recv", receiverTrace)] {
            let calls = try setsockoptCalls(path)
            XCTAssertTrue(calls.contains { $0.contains("SOL_TCP, TCP_NODELAY") && $0.hasSuffix("= 0") }, "\(name) sets TCP_NODELAY at SOL_TCP: \(calls)")
            XCTAssertFalse(calls.contains { $0.contains("SO_DEBUG") }, "\(name) never sets SO_DEBUG: \(calls)")
            XCTAssertFalse(calls.contains { $0.contains("= -1") }, "\(name): no socket option fails: \(calls)")
        }
    }
}
