import CaptureErrorText
import Configuration
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where config files are read from: the disk, or memory (the tests and the `settings` fuzz target,
/// which resolve thousands of settings a second without touching a file).
public struct SettingsFiles: Sendable {
    /// The file's bytes, or why it cannot be read (in the system's words).
    let read: @Sendable (String) -> Result<Data, SettingsFileUnreadable>

    /// Files on the disk.
    public static let disk = SettingsFiles { path in
        do {
            return .success(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            return .failure(SettingsFileUnreadable(reason: unreadableReason(path)))
        }
    }

    /// Files held in memory, by path; any other path does not exist.
    public static func memory(_ files: [String: Data]) -> SettingsFiles {
        SettingsFiles { path in
            files[path].map { .success($0) } ?? .failure(SettingsFileUnreadable(reason: SystemErrorText.errno(ENOENT)))
        }
    }

    /// Why `path` cannot be read: the system's words, or that it is a folder.
    private static func unreadableReason(_ path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return SystemErrorText.errno(errno) }
        if info.st_mode & S_IFMT == S_IFDIR { return "it is a folder, not a file" }
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return SystemErrorText.errno(errno) }
        close(descriptor)
        return "the file could not be read"
    }
}

/// Why a config file cannot be read.
struct SettingsFileUnreadable: Error {
    let reason: String
}

/// swift-configuration's provider over a config file's `SettingsFileSnapshot`, made from the file's
/// bytes (swift-configuration's own `FileProvider` reads only from the disk, itself, asynchronously).
/// A config file does not change while a command starts: the values are those of the snapshot.
struct SettingsFileProvider: ConfigProvider {
    let file: SettingsFileSnapshot

    /// The snapshot of `data`; throws `SettingsFileProblem` for a file that is no JSON object.
    init(data: Data) throws {
        file = try SettingsFileSnapshot(data: data.bytes, providerName: "SettingsFileProvider", parsingOptions: .default)
    }

    var providerName: String { file.providerName }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try file.value(forKey: key, type: type)
    }

    // The protocol is declared where async functions run on their caller's actor by default.
    nonisolated(nonsending) func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    func snapshot() -> any ConfigSnapshot { file }

    nonisolated(nonsending) func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}
