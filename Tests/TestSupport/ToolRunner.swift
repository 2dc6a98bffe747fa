import Foundation

/// The outcome of running a command-line tool: what it wrote and how it exited.
public struct ToolResult: Sendable {
    /// Everything the tool wrote to standard output.
    public var standardOutput: Data
    /// Everything the tool wrote to standard error.
    public var standardError: Data
    /// The exit status (or, if a signal ended the tool, the signal number).
    public var exitStatus: Int32

    /// Whether the tool exited with status 0.
    public var succeeded: Bool { exitStatus == 0 }
    /// Standard output as UTF-8 text.
    public var outputText: String { String(decoding: standardOutput, as: UTF8.self) }
    /// Standard error as UTF-8 text.
    public var errorText: String { String(decoding: standardError, as: UTF8.self) }

    /// Standard output parsed as a JSON object (for `ffprobe -of json` and the like); `nil` if it is not one.
    public var jsonObject: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: standardOutput)) as? [String: Any]
    }
}

/// Why a tool could not be run.
public enum ToolRunnerError: Error, CustomStringConvertible {
    case notFound(tool: String)
    case launchFailed(tool: String, reason: String)

    public var description: String {
        switch self {
        case .notFound(let tool):
            return "\(tool) is not on PATH: install it (the CI image installs ffmpeg, sox, opus-tools, libsndfile)"
        case .launchFailed(let tool, let reason):
            return "could not run \(tool): \(reason)"
        }
    }
}

/// Runs external tools (ffprobe, ffmpeg, sox, opusdec, ...) from tests.
///
/// Output goes to temporary files rather than pipes, so a tool that writes a lot (ffmpeg decoding audio
/// to standard output) can never block on a full pipe. Typical use:
///
/// ```swift
/// let probe = try ToolRunner.run("ffprobe", ["-v", "error", "-show_streams", "-of", "json", path])
/// XCTAssertTrue(probe.succeeded, probe.errorText)
/// let streams = probe.jsonObject?["streams"] as? [[String: Any]]
/// ```
public enum ToolRunner {
    /// The full path of `name` found on `PATH` (or `name` itself if it contains a slash and is executable).
    public static func find(_ name: String) -> String? {
        let fileManager = FileManager.default
        if name.contains("/") { return fileManager.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if fileManager.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs `tool` (a name looked up on `PATH`, or a path) with `arguments`, feeding it `standardInput`,
    /// waits for it to exit and returns what it wrote.
    public static func run(_ tool: String, _ arguments: [String], standardInput: Data? = nil) throws -> ToolResult {
        guard let executable = find(tool) else { throw ToolRunnerError.notFound(tool: tool) }
        let fileManager = FileManager.default
        let scratch = fileManager.temporaryDirectory.appendingPathComponent("tool-\(UUID().uuidString)")
        try fileManager.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? fileManager.removeItem(at: scratch) }
        let outputURL = scratch.appendingPathComponent("stdout")
        let errorURL = scratch.appendingPathComponent("stderr")
        let inputURL = scratch.appendingPathComponent("stdin")
        for (url, contents) in [(outputURL, Data()), (errorURL, Data()), (inputURL, standardInput ?? Data())] {
            guard fileManager.createFile(atPath: url.path, contents: contents) else {
                throw ToolRunnerError.launchFailed(tool: tool, reason: "cannot create \(url.path)")
            }
        }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = try FileHandle(forWritingTo: outputURL)
        let error = try FileHandle(forWritingTo: errorURL)
        let input = try FileHandle(forReadingFrom: inputURL)
        defer {
            try? output.close()
            try? error.close()
            try? input.close()
        }
        process.standardOutput = output
        process.standardError = error
        process.standardInput = input
        do {
            try process.run()
        } catch {
            throw ToolRunnerError.launchFailed(tool: executable, reason: "\(error)")
        }
        process.waitUntilExit()
        return ToolResult(
            standardOutput: try Data(contentsOf: outputURL),
            standardError: try Data(contentsOf: errorURL),
            exitStatus: process.terminationStatus
        )
    }
}
