import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Turns errors from the operating system, Foundation's file APIs and SwiftNIO into the few words a
/// user understands ("permission denied", "address already in use"), instead of the types and codes
/// they carry ("NSCocoaErrorDomain error 512", "bind(descriptor:ptr:bytes:) (errno: 98)").
public enum SystemErrorText {
    /// The system's words for an `errno` value, in lower case: "permission denied".
    public static func errno(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "system error \(code)" }
        let words = String(cString: text)
        guard let first = words.first else { return "system error \(code)" }
        return first.lowercased() + words.dropFirst()
    }

    /// The `errno` underneath `error`, when it has one: SwiftNIO's `IOError`, a POSIX `NSError`,
    /// or a Foundation file error whose underlying error is one.
    public static func errnoCode(of error: Error) -> Int32? {
        if let io = error as? IOError { return io.errnoCode }
        if let posix = error as? POSIXError { return posix.code.rawValue }
        let ns = error as NSError
        if ns.domain == NSPOSIXErrorDomain { return Int32(ns.code) }
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return Int32(underlying.code)
        }
        if ns.domain == NSCocoaErrorDomain {
            switch CocoaError.Code(rawValue: ns.code) {
            case .fileNoSuchFile, .fileReadNoSuchFile: return ENOENT
            case .fileReadNoPermission, .fileWriteNoPermission: return EACCES
            case .fileWriteFileExists: return EEXIST
            case .fileWriteOutOfSpace: return ENOSPC
            case .fileWriteVolumeReadOnly: return EROFS
            case .fileReadTooLarge: return EFBIG
            default: return nil
            }
        }
        return nil
    }

    /// `error` in a user's words: the system's text for its `errno` where there is one, else the
    /// error's own description (the project's own errors already speak to users).
    public static func describe(_ error: Error) -> String {
        if let code = errnoCode(of: error) { return Self.errno(code) }
        let ns = error as NSError
        if ns.domain == NSCocoaErrorDomain {
            switch CocoaError.Code(rawValue: ns.code) {
            case .fileReadCorruptFile: return "the file is not in the expected format"
            case .fileReadInapplicableStringEncoding, .fileReadUnknownStringEncoding: return "the file is not UTF-8 text"
            case .fileReadUnknown: return "the file could not be read"
            default: return "the file could not be written"
            }
        }
        return String(describing: error)
    }
}

/// Why listening on an address failed, in words that say what to do about it.
public enum ListenErrorText {
    /// The reason `error` stopped a server from listening on `host`:`port`.
    public static func reason(_ error: Error, host: String, port: Int) -> String {
        switch SystemErrorText.errnoCode(of: error) {
        case EADDRINUSE?:
            return "port \(port) is already in use on this machine (is another capture-recv running?)"
        case EACCES?:
            return "ports below 1024 need privileges this user does not have; use a port of 1024 or above"
        case EADDRNOTAVAIL?:
            return "\(host) is not an address of this machine"
        case let code?:
            return SystemErrorText.errno(code)
        case nil:
            if error is SocketAddressError { return "cannot resolve \(host) to an address" }
            return SystemErrorText.describe(error)
        }
    }
}
