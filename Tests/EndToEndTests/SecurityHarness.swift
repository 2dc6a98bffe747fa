import CSndFile
import CaptureSecurity
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Certificates, token files and source audio for the TLS and authentication tests, in a folder
/// of their own that goes away with the fixtures.
final class SecurityFixtures {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("security-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(directory)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Writes NAME.pem and NAME.key.
    @discardableResult
    func write(_ issued: IssuedCertificate, as name: String) throws -> (cert: String, key: String) {
        let cert = path("\(name).pem")
        let key = path("\(name).key")
        try Data(issued.certificatePEM.utf8).write(to: URL(fileURLWithPath: cert))
        XCTAssertTrue(FileManager.default.createFile(atPath: key, contents: Data(issued.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600]))
        // Private keys are the service user's, as docs/SECURITY.md tells operators to make them.
        Unprivileged.handOver(key)
        return (cert, key)
    }

    /// A private token file with `text`.
    func tokenFile(_ text: String, name: String) -> String {
        let file = path(name)
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]))
        Unprivileged.handOver(file)
        return file
    }

    /// A short 16-bit stereo WAV of pseudo-random samples, and its samples as libsndfile reads them.
    func sourceWAV(seed: UInt64, seconds: Double = 0.5) throws -> (path: String, ints: [Int32]) {
        let file = path("source-\(seed).wav")
        var generator = SampleGenerator(seed: seed)
        let ints = (0..<Int(48_000 * seconds) * 2).map { _ in (Int32(bitPattern: generator.next()) >> 16) << 16 }
        try writeWAV(path: file, subtype: Int32(SF_FORMAT_PCM_16), rate: 48_000, channels: 2, ints: ints)
        return (file, ints)
    }
}

/// A capture-recv on a free loopback port whose output goes to files, so that its log can be read
/// while it runs (the tests look for the line each refusal is logged with).
final class LoggingReceiver {
    let directory: URL
    let process = Process()
    let port: Int
    private let logPath: String

    init(extraArguments: [String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("recv-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = directory.path + ".stdout"
        logPath = directory.path + ".log"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        Unprivileged.handOver(directory.path)
        let command = Unprivileged.command(Products.recv, ["--out", directory.path, "--listen", "127.0.0.1:0"] + extraArguments)
        process.executableURL = URL(fileURLWithPath: command.executable)
        process.arguments = command.arguments
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        var found: Int?
        while found == nil, Date() < deadline, process.isRunning {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                found = Int(line.split(separator: ":").last ?? "")
            } else {
                usleep(10_000)
            }
        }
        guard let found else {
            if process.isRunning { process.terminate() }
            throw TestFailure("capture-recv did not start: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
        }
        port = found
    }

    /// What the receiver has logged so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The CAF files in the output folder.
    func files() -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".caf") }.sorted().map { directory.appendingPathComponent($0) }
    }

    /// Stops with SIGTERM and returns the exit status.
    func stop() -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: directory.path + ".stdout")
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// Runs capture-send with extra environment variables (CAPTURE_TOKEN) to completion.
func runSender(_ arguments: [String], environment: [String: String], timeout: Double = 120) throws -> (status: Int32, stderr: String) {
    let child = try ChildProcess(Products.send, arguments, environment: environment)
    let status = child.wait(seconds: timeout)
    return (status, child.standardError)
}

/// The arguments that stream `source` under `name` to `receiver`.
func fileStream(_ receiver: LoggingReceiver, _ source: (path: String, ints: [Int32]), name: String, host: String = "127.0.0.1") -> [String] {
    ["\(host):\(receiver.port)", "--source", "file", "--file", source.path, "--no-pace", "--stream-name", name, "--buffer-seconds", "0.1"]
}

extension XCTestCase {
    /// Asserts that a sender failed with exactly one error line containing `message`.
    func assertRefused(_ result: (status: Int32, stderr: String), _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotEqual(result.status, 0, "the sender must exit non-zero", file: file, line: line)
        let errorLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
        XCTAssertEqual(errorLines.count, 1, "one line names the reason: \(result.stderr)", file: file, line: line)
        XCTAssertTrue(errorLines.first?.contains(message) ?? false, "expected “\(message)” in: \(result.stderr)", file: file, line: line)
    }

    /// Waits until the receiver's log has a line with every one of `fragments`; fails at the deadline.
    func assertReceiverLogs(_ receiver: LoggingReceiver, _ fragments: [String], file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let lines = receiver.log.split(separator: "\n")
            if lines.contains(where: { logLine in fragments.allSatisfy { logLine.contains($0) } }) { return }
            usleep(20_000)
        }
        XCTFail("the receiver did not log \(fragments): \(receiver.log)", file: file, line: line)
    }

    /// Asserts that the stream `name` is in the receiver's folder with exactly the source's samples.
    func assertDelivered(_ receiver: LoggingReceiver, name: String, _ source: (path: String, ints: [Int32]), file: StaticString = #filePath, line: UInt = #line) throws {
        let stored = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix(name + "_") }, "no file for \(name)", file: file, line: line)
        let audio = try SndFileReader.read(path: stored.path)
        XCTAssertEqual(audio.sampleRate, 48_000, file: file, line: line)
        XCTAssertEqual(audio.channels, 2, file: file, line: line)
        XCTAssertEqual(audio.int32Samples, source.ints, "libsndfile reads back the exact samples", file: file, line: line)
    }
}
