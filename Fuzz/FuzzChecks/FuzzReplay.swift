import Foundation

/// Runs saved inputs through a fuzz target's checks without libFuzzer: the replay mode of the
/// `fuzz-*` executables in a normal build, and what the unit tests use to run the seed corpora and
/// the inputs of past crashes.
public enum FuzzReplay {
    /// The files named, with every regular file inside the folders named.
    public static func inputs(_ paths: [String]) -> [String] {
        paths.flatMap { path -> [String] in
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return [] }
            guard isFolder.boolValue else { return [path] }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            return names.sorted().map { (path as NSString).appendingPathComponent($0) }
        }
    }

    /// Checks each input (a failed invariant stops the process, as under the fuzzer); the exit status.
    public static func run(arguments: [String], check: (Data) -> Void) -> Int32 {
        guard !arguments.isEmpty else {
            FileHandle.standardError.write(Data("usage: fuzz-TARGET FILE-OR-FOLDER...  (replays inputs through the target's checks; `make fuzz` builds the fuzzer)\n".utf8))
            return 2
        }
        let files = inputs(arguments)
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            check(data)
        }
        print("replayed \(files.count) inputs: all checks held")
        return 0
    }
}
