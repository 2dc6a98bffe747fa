import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Loopback ports for tests that need one nobody listens on.
public enum LoopbackPort {
    /// Why no port could be had.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// A TCP port free on 127.0.0.1 now: the kernel's choice, bound and released at once.
    public static func free() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else { throw Unavailable(description: "cannot find a free loopback port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
