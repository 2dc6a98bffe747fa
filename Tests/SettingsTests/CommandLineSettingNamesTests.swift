import CaptureCLISupport
import CaptureCore
import CaptureReceiver
import XCTest

/// The libraries' errors read on the command line exactly as they always did (the executables'
/// `CommandLineSettingNames`), and in the library's own words, with no flag, everywhere else.
final class CommandLineSettingNamesTests: XCTestCase {
    private let commandLine = CommandLineSettingNames()

    /// Asserts `error`'s text with the executables' naming and its `description` (the library's words).
    private func assertTexts(
        _ message: (any SettingNaming) -> String, _ description: String, commandLine expected: String, library neutral: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(message(commandLine), expected, file: file, line: line)
        XCTAssertEqual(description, neutral, file: file, line: line)
        XCTAssertFalse(description.contains("--"), description, file: file, line: line)
    }

    func testEverySettingHasAFlag() {
        for setting in Setting.allCases {
            XCTAssertTrue(commandLine.name(of: setting).hasPrefix("--"), "\(setting): \(commandLine.name(of: setting))")
        }
    }

    func testReceiverStartErrors() {
        let bind = ReceiverStartError.bindFailed(host: "127.0.0.1", port: 7373, reason: "port 7373 is already in use")
        assertTexts(
            bind.message(naming:), bind.description,
            commandLine: "cannot listen on 127.0.0.1:7373: port 7373 is already in use; choose another address with --listen HOST:PORT",
            library: "cannot listen on 127.0.0.1:7373: port 7373 is already in use; choose another address with the listen address (ReceiverConfiguration.host, .port)")
        let file = ReceiverStartError.outputDirectory(.notAFolder(path: "/srv/x"))
        assertTexts(
            file.message(naming:), file.description,
            commandLine: "--out /srv/x is a file, not a folder; name a folder for the recordings",
            library: "the output folder (ReceiverConfiguration.outputDirectory) /srv/x is a file, not a folder; name a folder for the recordings")
        let create = ReceiverStartError.outputDirectory(.cannotCreate(path: "/srv/x", reason: "permission denied"))
        XCTAssertTrue(create.message(naming: commandLine).hasSuffix("or choose another with --out"))
        XCTAssertFalse(create.description.contains("--"), create.description)
        let log = ReceiverStartError.commitLog(.cannotMakeFolder(path: "/srv/log", reason: "permission denied"))
        assertTexts(
            log.message(naming:), log.description,
            commandLine: "cannot make the commit log folder /srv/log: permission denied; give --log-dir a writable folder",
            library: "cannot make the commit log folder /srv/log: permission denied; give the commit log folder (ReceiverConfiguration.logDirectory) a writable folder")
        let full = ReceiverStartError.commitLog(.log(.logVolumeFull(directory: "/srv/log", segmentSize: 16 << 20)))
        XCTAssertTrue(full.message(naming: commandLine).contains("or give --log-dir another volume"))
        XCTAssertFalse(full.description.contains("--"), full.description)
    }
}
