import Foundation
import PackagePlugin

/// Stamps an executable with what `--version` prints: the package version (the first entry of
/// debian/changelog, the one place it is written) and the git commit the build comes from. It
/// generates `BuildStamp.swift` in the target's module with scripts/build-stamp.sh, which runs again
/// whenever the changelog changes or HEAD moves (a commit, a checkout, a reset: each appends to
/// HEAD's reflog). Without a git checkout (a source tarball, the Docker build context) the commit
/// comes from the `CAPTURE_COMMIT` variable, else it reads "unknown".
@main
struct BuildStampPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let script = root.appending(path: "scripts/build-stamp.sh")
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildStamp.swift")
        let commit = ProcessInfo.processInfo.environment["CAPTURE_COMMIT"] ?? ""
        return [
            .buildCommand(
                displayName: "Stamping \(target.name) with the package version and the git commit",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, root.path, output.path, commit],
                inputFiles: [script, root.appending(path: "debian/changelog")] + Self.filesThatMoveWithHEAD(root),
                outputFiles: [output])
        ]
    }

    /// HEAD and its reflog, in the repository's own folder or, in a worktree, in the folder that
    /// `.git` (then a file, `gitdir: PATH`) names. Only those that exist.
    static func filesThatMoveWithHEAD(_ root: URL) -> [URL] {
        let dotGit = root.appending(path: ".git")
        var gitFolder = dotGit
        if let pointer = try? String(contentsOf: dotGit, encoding: .utf8), pointer.hasPrefix("gitdir: ") {
            let path = pointer.dropFirst("gitdir: ".count).trimmingCharacters(in: .whitespacesAndNewlines)
            gitFolder = path.hasPrefix("/") ? URL(fileURLWithPath: path) : root.appending(path: path)
        }
        return [gitFolder.appending(path: "HEAD"), gitFolder.appending(path: "logs/HEAD")]
            .filter { FileManager.default.fileExists(atPath: $0.path) }
    }
}
