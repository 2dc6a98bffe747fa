import CaptureSecurity
import Foundation
import XCTest

/// Pins as users type them, and certificates checked by openssl, an independent reader.
final class CertificateTests: XCTestCase {
    private let hex = "3f2a9c0d4e5b6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"

    func testPinAcceptsPlainColonSeparatedUpperCaseAndPrefixedForms() throws {
        let plain = try CertificateFingerprint(parsing: hex)
        XCTAssertEqual(plain.hex, hex)
        XCTAssertEqual(plain.bytes.count, 32)
        XCTAssertEqual(plain.bytes.first, 0x3F)
        let colons = stride(from: 0, to: 64, by: 2).map { offset -> String in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return String(hex[start..<hex.index(start, offsetBy: 2)]).uppercased()
        }.joined(separator: ":")
        XCTAssertEqual(try CertificateFingerprint(parsing: colons), plain)
        XCTAssertEqual(try CertificateFingerprint(parsing: "sha256:" + hex.uppercased()), plain)
        XCTAssertEqual(try CertificateFingerprint(parsing: "  \(hex) "), plain)
    }

    func testPinRefusesWrongLengthsAndNonHexWithAClearMessage() {
        for bad in ["", String(hex.dropLast()), hex + "00", String(hex.dropLast()) + "g", "ab:cd", "3f:2a" + String(hex.dropFirst(4)), "md5:" + hex] {
            XCTAssertThrowsError(try CertificateFingerprint(parsing: bad), bad) { error in
                XCTAssertEqual(error as? SecurityError, .badPin(bad))
                XCTAssertTrue("\(error)".contains("is not a SHA-256 fingerprint: give 64 hexadecimal digits, with or without colons"), "\(error)")
            }
        }
    }

    func testPinMatchesOnlyItsCertificate() throws {
        let one = try CertificateFactory.make(commonName: "one", hosts: ["localhost"])
        let two = try CertificateFactory.make(commonName: "two", hosts: ["localhost"])
        let oneDER = try der(one.certificatePEM)
        XCTAssertTrue(one.fingerprint.matches(der: oneDER))
        XCTAssertFalse(two.fingerprint.matches(der: oneDER))
    }

    func testWrittenCertificateHasTheHostsAndTheFingerprintOpenSSLComputes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cert-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let issued = try CertificateFactory.make(commonName: "recorder", hosts: ["recorder.example", "10.1.2.3", "::1"])
        let paths = try CertificateFactory.write(issued, to: directory, overwrite: false)

        let fingerprint = try openssl(["x509", "-in", paths.certificate, "-noout", "-fingerprint", "-sha256"])
        XCTAssertEqual(fingerprint.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(),
                       "sha256 fingerprint=" + issued.fingerprint.bytes.map { String(format: "%02x", $0) }.joined(separator: ":"))
        let text = try openssl(["x509", "-in", paths.certificate, "-noout", "-text"])
        XCTAssertTrue(text.contains("DNS:recorder.example, IP Address:10.1.2.3, IP Address:0:0:0:0:0:0:0:1"), text)
        XCTAssertTrue(text.contains("Subject: CN = recorder"), text)
        XCTAssertTrue(text.contains("ecdsa-with-SHA256"), text)
        XCTAssertTrue(text.contains("prime256v1") || text.contains("P-256"), text)
        // The key belongs to the certificate, and only its owner can read it.
        let keyPublic = try openssl(["pkey", "-in", paths.key, "-pubout"])
        let certificatePublic = try openssl(["x509", "-in", paths.certificate, "-noout", "-pubkey"])
        XCTAssertEqual(keyPublic, certificatePublic)
        let mode = try FileManager.default.attributesOfItem(atPath: paths.key)[.posixPermissions] as? NSNumber
        XCTAssertEqual(mode?.intValue, 0o600)

        XCTAssertThrowsError(try CertificateFactory.write(issued, to: directory, overwrite: false)) { error in
            XCTAssertTrue("\(error)".contains("already holds cert.pem or key.pem; choose another folder (CertificateFactory.write's directory) or pass overwrite: true"), "\(error)")
        }
    }

    func testCertificateSignedByAnAuthorityVerifiesWithOpenSSL() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try CertificateFactory.make(commonName: "Test CA", hosts: [], role: .authority)
        let leaf = try CertificateFactory.make(commonName: "leaf", hosts: ["localhost"], issuer: authority)
        let other = try CertificateFactory.make(commonName: "Other CA", hosts: [], role: .authority)
        for (name, pem) in [("ca.pem", authority.certificatePEM), ("leaf.pem", leaf.certificatePEM), ("other.pem", other.certificatePEM)] {
            try Data(pem.utf8).write(to: directory.appendingPathComponent(name))
        }
        let ok = try openssl(["verify", "-CAfile", directory.appendingPathComponent("ca.pem").path, directory.appendingPathComponent("leaf.pem").path])
        XCTAssertTrue(ok.hasSuffix("leaf.pem: OK\n"), ok)
        XCTAssertThrowsError(try openssl(["verify", "-CAfile", directory.appendingPathComponent("other.pem").path, directory.appendingPathComponent("leaf.pem").path]))
    }

    func testBadHostNamesAreRefused() {
        for bad in ["", "-bad.example", "under_score.example", "a..b"] {
            XCTAssertThrowsError(try CertificateFactory.make(commonName: "x", hosts: [bad]), bad) { error in
                XCTAssertEqual(error as? SecurityError, .badHostName(bad))
            }
        }
    }

    private func der(_ pem: String) throws -> [UInt8] {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let data = Data(base64Encoded: body) else { throw NSError(domain: "pem", code: 1) }
        return Array(data)
    }

    private func openssl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw NSError(domain: "openssl", code: Int(process.terminationStatus)) }
        return String(decoding: data, as: UTF8.self)
    }
}
