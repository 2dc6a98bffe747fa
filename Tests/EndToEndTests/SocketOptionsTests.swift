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
    /// `strace` attached to a running process, recording its setsockopt calls (every thread).
    private final class Trace {
        let process = Process()
        let path: String

        init(attachingTo pid: Int32, path: String) throws {
            guard let strace = ToolRunner.find("strace") else {
                throw TestFailure("strace is not installed: scripts/install-deps.sh installs it")
            }
            self.path = path
            process.executableURL = URL(fileURLWithPath: strace)
            process.arguments = ["-f", "-qq", "-e", "trace=setsockopt", "-o", path, "-p", String(pid)]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Attached once the kernel names a tracer for the process.
            guard waitFor(10, { Self.tracerPID(of: pid) != 0 }) else {
                process.terminate()
                throw XCTSkip("strace cannot attach to another process here (ptrace restricted): \(path)")
            }
        }

        /// The setsockopt calls, once the traced process has exited (strace then ends too).
        func calls() throws -> [String] {
            if !waitFor(10, { !self.process.isRunning }) { process.terminate() }
            process.waitUntilExit()
            return try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { $0.contains("setsockopt(") }
        }

        private static func tracerPID(of pid: Int32) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
            return Int(line?.split(separator: "\t").last ?? "") ?? 0
        }
    }

    func testTCPNoDelayIsSetAtTheTCPLevelAndNothingNeedsRoot() throws {
        let folder = try Unprivileged.makeDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("sockopt-\(UUID().uuidString)"))
        defer { try? FileManager.default.removeItem(at: folder) }
        let receiver = try ReceiverUnderTest(outputDirectory: folder.appendingPathComponent("out"))
        let receiverTrace = try Trace(attachingTo: receiver.child.process.processIdentifier, path: folder.appendingPathComponent("recv.trace").path)

        // The sender connects once its first buffer (1 s) is captured: time enough to attach.
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "1.5", "--buffer-seconds", "1", "--no-spool"])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        let senderTrace = try Trace(attachingTo: sender.process.processIdentifier, path: folder.appendingPathComponent("send.trace").path)
        XCTAssertEqual(sender.wait(seconds: 60), 0, "an unprivileged sender delivers: \(sender.standardError)")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        XCTAssertEqual(receiver.files().count, 1, "sender: \(sender.standardError)\nreceiver: \(receiver.child.standardError)")

        for (name, trace) in [("capture-send", senderTrace), ("capture-recv", receiverTrace)] {
            let calls = try trace.calls()
            XCTAssertTrue(calls.contains { $0.contains("SOL_TCP, TCP_NODELAY") && $0.hasSuffix("= 0") }, "\(name) sets TCP_NODELAY at SOL_TCP: \(calls)")
            XCTAssertFalse(calls.contains { $0.contains("SO_DEBUG") }, "\(name) never sets SO_DEBUG: \(calls)")
            XCTAssertFalse(calls.contains { $0.contains("= -1") }, "\(name): no socket option fails: \(calls)")
        }
    }
}
