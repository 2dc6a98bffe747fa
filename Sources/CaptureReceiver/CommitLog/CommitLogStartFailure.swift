import CaptureCommitLog
import CaptureCore

/// Why the receiver's commit log could not be opened or replayed at start (`ReceiverStartError.commitLog`).
public enum CommitLogStartFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The log's folder cannot be made.
    case cannotMakeFolder(path: String, reason: String)
    /// The log itself cannot be read, replayed or written.
    case log(CommitLogError)
    /// Anything else, told whole (it names no setting).
    case other(String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The failure's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .cannotMakeFolder(let path, let reason):
            "cannot make the commit log folder \(path): \(reason); give \(naming.name(of: .commitLogFolder)) a writable folder"
        case .log(let error): error.message(naming: naming)
        case .other(let text): text
        }
    }
}
