import CSndFile
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Locates the built executables next to the test bundle.
enum Products {
    static let directory: URL = {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".build/debug"),
        ]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.appendingPathComponent("capture-recv").path) {
            return candidate
        }
        return candidates[candidates.count - 1]
    }()

    static var send: String { directory.appendingPathComponent("capture-send").path }
    static var recv: String { directory.appendingPathComponent("capture-recv").path }
    static var load: String { directory.appendingPathComponent("capture-load").path }
    static var example: String { directory.appendingPathComponent("capture-streamer-example").path }
    static var twoEncodingsExample: String { directory.appendingPathComponent("capture-two-encodings-example").path }
}

/// A child process with its output collected, which tests can signal and wait for.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private let lock = NSLock()
    /// The private state directory (default spool) of a capture-send child, removed at deinit.
    private var stateDirectory: URL?
    private var stdoutData = Data()
    private var stderrData = Data()

    /// Starts `executable` as the unprivileged user (see `Unprivileged`), unless `unprivileged` is
    /// false: a wrapper such as `script` then runs as the test user and drops privileges itself.
    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, unprivileged: Bool = true) throws {
        let command = unprivileged ? Unprivileged.command(executable, arguments) : (executable: executable, arguments: arguments)
        process.executableURL = URL(fileURLWithPath: command.executable)
        process.arguments = command.arguments
        var childEnvironment = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { _, new in new }
        if executable.hasSuffix("capture-send"), environment?["XDG_STATE_HOME"] == nil {
            // Each sender gets a default spool of its own: a restarted sender delivers what earlier
            // runs left in its spool, which must not mix streams of unrelated tests.
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("sender-state-\(UUID().uuidString)")
            childEnvironment["XDG_STATE_HOME"] = state.path
            stateDirectory = state
        }
        process.environment = childEnvironment
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Blocking reads on threads of their own: Foundation's readabilityHandler can stop
        // delivering output of long-running children.
        readers.enter()
        readers.enter()
        let outputDescriptor = output.fileHandleForReading.fileDescriptor
        let errorDescriptor = errors.fileHandleForReading.fileDescriptor
        Thread.detachNewThread { [self] in drain(outputDescriptor) { data in lock.withLock { stdoutData.append(data) } } }
        Thread.detachNewThread { [self] in drain(errorDescriptor) { data in lock.withLock { stderrData.append(data) } } }
    }

    private let readers = DispatchGroup()

    private func drain(_ descriptor: Int32, into append: (Data) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                append(Data(buffer[0..<count]))
            } else if count < 0, errno == EINTR {
                continue
            } else {
                break
            }
        }
        readers.leave()
    }

    deinit {
        if let stateDirectory { try? FileManager.default.removeItem(at: stateDirectory) }
    }

    var standardOutput: String { lock.withLock { String(decoding: stdoutData, as: UTF8.self) } }
    var standardError: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to exit (at most `seconds`, then kills it) and returns its exit status.
    @discardableResult
    func wait(seconds: Double = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            // A sender still delivering keeps going on SIGTERM; do not wait for it forever.
            let killDeadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < killDeadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        // The readers end at end of file, once every holder of the pipes has exited.
        _ = readers.wait(timeout: .now() + 5)
        return process.terminationStatus
    }
}

/// A capture-recv process on a free loopback port, writing into its own temporary folder.
final class ReceiverUnderTest {
    let directory: URL
    let child: ChildProcess
    let port: Int

    /// `openFileLimit` starts the receiver under that open-file limit, soft and hard (`prlimit`).
    init(extraArguments: [String] = [], outputDirectory: URL? = nil, port requestedPort: Int = 0, environment: [String: String]? = nil, openFileLimit: Int? = nil) throws {
        directory = outputDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("recv-\(UUID().uuidString)")
        // A folder the test made (or a restarted receiver's) belongs to the receiver's user.
        Unprivileged.handOver(directory.path)
        let arguments = ["--out", directory.path, "--listen", "127.0.0.1:\(requestedPort)"] + extraArguments
        if let openFileLimit {
            // prlimit runs as the test user and starts the receiver as it starts without a limit
            // (as the unprivileged user, which may not reach the test user's folders on its own).
            let command = Unprivileged.command(Products.recv, arguments)
            child = try ChildProcess(
                "/usr/bin/prlimit", ["--nofile=\(openFileLimit):\(openFileLimit)", "--", command.executable] + command.arguments,
                environment: environment, unprivileged: false)
        } else {
            child = try ChildProcess(Products.recv, arguments, environment: environment)
        }
        let deadline = Date().addingTimeInterval(20)
        var found: Int?
        while found == nil, Date() < deadline {
            if let line = child.standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
               let port = Int(line.split(separator: ":").last ?? "") {
                found = port
            } else if !child.process.isRunning {
                break
            } else {
                usleep(10_000)
            }
        }
        guard let found else {
            child.signal(SIGKILL)
            throw TestFailure("capture-recv did not start: \(child.standardError)")
        }
        port = found
    }

    var address: String { "127.0.0.1:\(port)" }

    /// The CAF files in the output folder.
    func files() -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".caf") }.sorted().map { directory.appendingPathComponent($0) }
    }

    /// Stops with SIGTERM and returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        child.signal(SIGTERM)
        return child.wait(seconds: 30)
    }

    deinit {
        if child.process.isRunning { child.signal(SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs capture-send to completion.
func runSender(_ arguments: [String], timeout: Double = 120) throws -> (status: Int32, stderr: String) {
    let child = try ChildProcess(Products.send, arguments)
    let status = child.wait(seconds: timeout)
    return (status, child.standardError)
}

/// Deterministic pseudo-random samples for test files.
struct SampleGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed &* 6_364_136_223_846_793_005 &+ 1 }

    mutating func next() -> UInt32 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt32(truncatingIfNeeded: state >> 33)
    }
}

/// Writes a WAV file with libsndfile: integer samples are left-justified 32-bit values (as
/// libsndfile's `sf_write_int` takes them); float files take `floats`.
func writeWAV(path: String, subtype: Int32, rate: Int, channels: Int, ints: [Int32]? = nil, floats: [Float]? = nil) throws {
    var info = SF_INFO(frames: 0, samplerate: Int32(rate), channels: Int32(channels), format: Int32(SF_FORMAT_WAV) | subtype, sections: 0, seekable: 0)
    guard let handle = sf_open(path, Int32(SFM_WRITE), &info) else {
        throw TestFailure("cannot write \(path): \(String(cString: sf_strerror(nil)))")
    }
    defer { sf_close(handle) }
    if var ints {
        guard sf_write_int(handle, &ints, sf_count_t(ints.count)) == sf_count_t(ints.count) else { throw TestFailure("short write") }
    } else if var floats {
        guard sf_write_float(handle, &floats, sf_count_t(floats.count)) == sf_count_t(floats.count) else { throw TestFailure("short write") }
    }
}

/// TCP connections to 127.0.0.1 for tests that speak to the executables byte by byte.
enum LoopbackSocket {
    /// A connected socket to 127.0.0.1:`port` (the caller closes it), with a receive timeout when
    /// given; throws when nothing accepts there.
    static func connect(port: Int, receiveTimeout: Double? = nil, receiveBufferBytes: Int32? = nil) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket failed: \(errno)") }
        if var size = receiveBufferBytes {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw TestFailure("cannot connect to 127.0.0.1:\(port): errno \(code)")
        }
        if let receiveTimeout {
            var value = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
        return descriptor
    }

    /// Whether something accepts connections on 127.0.0.1:`port` now.
    static func accepts(port: Int) -> Bool {
        guard let descriptor = try? connect(port: port) else { return false }
        close(descriptor)
        return true
    }
}

/// A raw TCP client for feeding the receiver bytes no sender would send.
enum RawClient {
    /// Connects to 127.0.0.1:`port`, sends `bytes` (optionally in pieces with pauses), then reads
    /// until the receiver closes or `timeout` passes. Returns what the receiver sent.
    static func exchange(port: Int, sending bytes: [UInt8], closeWriteAfterSending: Bool = false, timeout: Double = 5) throws -> [UInt8] {
        let socketDescriptor = try LoopbackSocket.connect(port: port, receiveTimeout: timeout)
        defer { close(socketDescriptor) }
        var sent = 0
        while sent < bytes.count {
            let result = bytes[sent...].withUnsafeBytes { send(socketDescriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if result <= 0 { break }
            sent += result
        }
        if closeWriteAfterSending { shutdown(socketDescriptor, Int32(SHUT_WR)) }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socketDescriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += chunk[0..<count]
        }
        return received
    }
}

/// Reads a tool's JSON report of a file's first audio stream.
func ffprobeStream(_ path: String) throws -> [String: Any] {
    let result = try ToolRunner.run("ffprobe", ["-v", "error", "-count_packets", "-show_streams", "-show_format", "-of", "json", path])
    guard result.succeeded, let object = result.jsonObject, let streams = object["streams"] as? [[String: Any]], let first = streams.first else {
        throw TestFailure("ffprobe cannot read \(path): \(result.errorText)")
    }
    return first
}

/// Polls `condition` until it holds or `seconds` pass.
func waitFor(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        usleep(10_000)
    }
    return true
}

extension ReceiverUnderTest {
    /// The port of the receiver's `--http` server, from its `http on HOST:PORT` line (`--http
    /// 127.0.0.1:0` picks a free one).
    func httpPort(file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        var port: Int?
        XCTAssertTrue(waitFor {
            port = child.standardOutput.split(separator: "\n")
                .first { $0.hasPrefix("http on ") }.flatMap { Int($0.split(separator: ":").last ?? "") }
            return port != nil
        }, child.standardOutput, file: file, line: line)
        return try XCTUnwrap(port, file: file, line: line)
    }
}
