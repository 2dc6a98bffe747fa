import Foundation

/// Runs `protoc --decode` (protobuf-compiler), an independent decoder of the wire messages.
public enum WireProtoc {
    /// Why protoc could not decode.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// protoc's text-format decoding of `body` as `messageType` (e.g. "capture.v1.Hello"), using the
    /// .proto file at `protoFile`.
    public static func decode(_ body: [UInt8], messageType: String, protoFile: URL) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "protoc", "--decode=\(messageType)", "-I", protoFile.deletingLastPathComponent().path,
            protoFile.lastPathComponent,
        ]
        process.currentDirectoryURL = protoFile.deletingLastPathComponent()
        let input = Pipe()
        let output = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(body))
        try input.fileHandleForWriting.close()
        let text = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "protoc failed (\(process.terminationStatus)): \(String(decoding: errorText, as: UTF8.self))")
        }
        return String(decoding: text, as: UTF8.self)
    }
}
