import CaptureSecurity
import Foundation
import XCTest

/// Token files as users write them, and the constant-time comparison behind them.
final class AuthTokensTests: XCTestCase {
    func testParsesOneTokenALineIgnoringBlankLinesCommentsAndSurroundingSpace() throws {
        let text = "# field kit tokens\n\n  alpha-token  \nbeta token with spaces\n# retired: gamma\n\r\n"
        let tokens = try AuthTokens.parse(text, path: "tokens.txt")
        XCTAssertEqual(tokens.tokens, ["alpha-token", "beta token with spaces"])
    }

    func testFileWithOnlyCommentsIsRefusedWithAClearMessage() {
        XCTAssertThrowsError(try AuthTokens.parse("# nothing here\n\n", path: "/etc/capture/tokens")) { error in
            XCTAssertEqual(error as? SecurityError, .emptyTokenFile(path: "/etc/capture/tokens"))
            XCTAssertEqual(
                "\(error)",
                "the token file /etc/capture/tokens holds no token; write one token a line (blank lines and lines starting with # are ignored)"
            )
        }
    }

    func testTokenWithControlCharactersNamesItsLine() {
        XCTAssertThrowsError(try AuthTokens.parse("good\nbad\u{7}token\n", path: "t")) { error in
            XCTAssertEqual(error as? SecurityError, .badToken(path: "t", line: 2, reason: "contains control characters; use printable characters only"))
        }
    }

    func testOverlongTokenIsRefused() {
        let long = String(repeating: "x", count: AuthTokens.maximumTokenBytes + 1)
        XCTAssertThrowsError(try AuthTokens.parse(long, path: "t")) { error in
            XCTAssertEqual(error as? SecurityError, .badToken(path: "t", line: 1, reason: "is longer than 1024 bytes; use a shorter token"))
        }
    }

    func testAcceptsAnyListedTokenAndNothingElse() throws {
        let tokens = try AuthTokens.parse("alpha\nbeta\n", path: "t")
        XCTAssertTrue(tokens.accepts("alpha"))
        XCTAssertTrue(tokens.accepts("beta"))
        XCTAssertFalse(tokens.accepts("alph"))
        XCTAssertFalse(tokens.accepts("alphaa"))
        XCTAssertFalse(tokens.accepts("ALPHA"))
        XCTAssertFalse(tokens.accepts(""))
    }

    func testLoadWarnsWhenOthersCanReadTheFileAndNotWhenPrivate() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tokens-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("secret\n".utf8), attributes: [.posixPermissions: 0o644]))
        let open = try AuthTokens.load(path: path)
        XCTAssertEqual(open.tokens, ["secret"])
        XCTAssertEqual(open.warnings, ["the token file \(path) can be read by other users (mode 644); run chmod 600 \(path)"])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        XCTAssertEqual(try AuthTokens.load(path: path).warnings, [])
    }

    func testMissingFileNamesThePath() {
        XCTAssertThrowsError(try AuthTokens.load(path: "/nonexistent/tokens")) { error in
            XCTAssertTrue("\(error)".hasPrefix("cannot read /nonexistent/tokens: "), "\(error)")
        }
    }

    func testConstantTimeEqualsComparesWholeInputs() {
        XCTAssertTrue(ConstantTime.equals([], []))
        XCTAssertTrue(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(ConstantTime.equals([9, 2, 3], [1, 2, 3]))
        XCTAssertFalse(ConstantTime.equals([1, 2], [1, 2, 0]), "a prefix padded with zeros is not equal")
        XCTAssertFalse(ConstantTime.equals([], [0]))
        XCTAssertTrue(ConstantTime.tokenEquals("s3cret", "s3cret"))
        XCTAssertFalse(ConstantTime.tokenEquals("s3cret", "s3cre"))
    }
}
