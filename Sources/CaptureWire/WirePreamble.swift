/// The connection preamble: `CAPSTRM` and a version byte, sent once by the sender before its first
/// frame, and the receiver's check of it (which also recognises TLS and HTTP clients).
public enum WirePreamble {
    /// What the first bytes of a connection amount to so far.
    public enum Check: Equatable, Sendable {
        /// Not enough bytes to decide; read more.
        case needMoreBytes
        /// A valid preamble of this (supported) version; it is exactly `WireProtocol.preambleLength` bytes.
        case accepted(version: UInt8)
    }

    /// The preamble bytes for a protocol version.
    public static func bytes(version: UInt8 = WireProtocol.version) -> [UInt8] {
        WireProtocol.magic + [version]
    }

    /// HTTP request methods, each with the space that follows it on the request line.
    private static let httpMethods: [[UInt8]] = [
        "GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ", "PRI ",
    ].map { Array($0.utf8) }

    /// Checks the first bytes of a connection. It decides as early as the bytes allow: a wrong byte
    /// fails at once unless the bytes may still turn out to be TLS or HTTP, which it names.
    public static func check(_ received: some Collection<UInt8>) throws(WireError) -> Check {
        let prefix = Array(received.prefix(WireProtocol.preambleLength))
        let magic = WireProtocol.magic
        if prefix.count <= magic.count, magic.starts(with: prefix) {
            return .needMoreBytes
        }
        if prefix.starts(with: magic) {
            let version = prefix[magic.count]
            guard version == WireProtocol.version else {
                throw .unsupportedVersion(received: UInt32(version), supported: UInt32(WireProtocol.version))
            }
            return .accepted(version: version)
        }
        // TLS record: content type 22 (handshake), then major version 3.
        if prefix.first == 0x16 {
            if prefix.count < 2 { return .needMoreBytes }
            if prefix[1] == 0x03 { throw .clientSpeaksTLS }
        }
        for method in httpMethods {
            if prefix.starts(with: method) {
                throw .clientSpeaksHTTP(method: String(decoding: method.dropLast(), as: UTF8.self))
            }
            if prefix.count < method.count, method.starts(with: prefix) {
                return .needMoreBytes
            }
        }
        throw .badPreamble(received: prefix)
    }
}
