import CaptureSecurity
import Crypto
import Foundation

/// Who may write a stream: the resume secret its sender made (kept only as a SHA-256 digest) and,
/// when the connection that created it authenticated, that identity (a token's digest or a client
/// certificate's fingerprint). Stored in the stream's index entry at creation; a resume must
/// present the same secret from the same identity, so the stream id alone, which appears in logs,
/// file metadata and spool folder names, grants nothing (issue 19, item 4).
public struct StreamOwner: Sendable, Equatable {
    /// SHA-256 of the resume secret; nil when the creating Hello carried none (then no resume is
    /// allowed at all).
    public var secretDigest: [UInt8]?
    /// `token:HEX` (SHA-256 of the token) or `certificate:HEX` (the client certificate's SHA-256
    /// fingerprint); nil when the receiver authenticates nobody.
    public var identity: String?

    public init(secretDigest: [UInt8]?, identity: String?) {
        self.secretDigest = secretDigest
        self.identity = identity
    }

    /// The owner a connection claims: the Hello's resume secret and the connection's identity.
    public init(secret: Data, identity: String?) {
        self.init(secretDigest: secret.isEmpty ? nil : Array(SHA256.hash(data: secret)), identity: identity)
    }

    /// The identity of a token: its SHA-256, never the token itself.
    public static func identity(token: String) -> String {
        "token:" + SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The identity of a client certificate.
    public static func identity(certificate fingerprint: CertificateFingerprint) -> String {
        "certificate:" + fingerprint.hex
    }

    /// Why `claimant` may not write the stream this owner created (resume it, or with `continuing`,
    /// continue it as a new stream, PROTOCOL.md §8.1); nil when it may. The secret is compared in
    /// constant time.
    public func refusal(of claimant: StreamOwner, continuing: Bool = false) -> String? {
        let verb = continuing ? "continue" : "resume"
        guard let secretDigest else {
            return "the stream was started without a resume secret, so it cannot be \(verb)d; the sender must start a new stream"
        }
        guard let presented = claimant.secretDigest, ConstantTime.equals(presented, secretDigest) else {
            return "the resume secret does not match the one the stream was started with: only the sender that started a stream may \(verb) it"
        }
        if let identity, identity != claimant.identity {
            return "the stream was started with another \(identity.hasPrefix("certificate:") ? "client certificate" : "token"): only the identity that started a stream may \(verb) it"
        }
        return nil
    }

    /// The entry line: `owner secret=HEX|- identity=TEXT|-`.
    var entryLine: String {
        "owner secret=\(secretDigest.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "-") identity=\(identity ?? "-")"
    }

    /// The owner an entry line states; nil for any other line.
    init?(entryLine line: Substring) {
        let fields = line.split(separator: " ")
        guard fields.count == 3, fields[0] == "owner", fields[1].hasPrefix("secret="), fields[2].hasPrefix("identity=") else { return nil }
        let secret = fields[1].dropFirst("secret=".count)
        let identity = fields[2].dropFirst("identity=".count)
        if secret == "-" {
            secretDigest = nil
        } else {
            guard secret.count == 64 else { return nil }
            var bytes: [UInt8] = []
            var index = secret.startIndex
            while index < secret.endIndex {
                let next = secret.index(index, offsetBy: 2)
                guard let byte = UInt8(secret[index..<next], radix: 16) else { return nil }
                bytes.append(byte)
                index = next
            }
            secretDigest = bytes
        }
        self.identity = identity == "-" ? nil : String(identity)
    }
}

/// One entry of the `StreamIndex`, parsed: the stream's file (unfinished) or the record of how it
/// finished, and who owns it. Its text:
/// ```
/// RELATIVE/PATH.caf                 or   finished
/// owner secret=HEX identity=TEXT         RELATIVE/PATH.caf
///                                        frames=N packets=N last-sequence=N end-sample=N
///                                        owner secret=HEX identity=TEXT
/// ```
/// The owner line is absent in entries written before owners were recorded, or for files entered
/// from a folder scan at start-up (their owner is unknown: see `StreamOwner`).
struct StreamIndexEntry: Equatable {
    /// The unfinished file's path relative to the output folder (empty when not named yet), or the
    /// finished stream's record.
    enum Stream: Equatable {
        case recording(relativePath: String)
        case finished(FinishedStreamRecord)
    }

    var stream: Stream
    var owner: StreamOwner?

    var text: String {
        let ownerLine = owner.map { $0.entryLine + "\n" } ?? ""
        switch stream {
        case .recording(let path): return path + "\n" + ownerLine
        case .finished(let record): return record.entryText + ownerLine
        }
    }

    init(stream: Stream, owner: StreamOwner?) {
        self.stream = stream
        self.owner = owner
    }

    /// Parses an entry; nil for a damaged one.
    init?(text: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        if let last = lines.last, last.hasPrefix("owner ") {
            guard let owner = StreamOwner(entryLine: last) else { return nil }
            self.owner = owner
            lines.removeLast()
        } else {
            owner = nil
        }
        if FinishedStreamRecord.marksFinished(text) {
            guard let record = FinishedStreamRecord(entryText: lines.joined(separator: "\n")) else { return nil }
            stream = .finished(record)
        } else {
            guard lines.count <= 1 else { return nil }
            stream = .recording(relativePath: lines.first.map(String.init) ?? "")
        }
    }
}
