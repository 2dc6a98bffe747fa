import CaptureCLISupport
import capture_send

/// The capture-send executable: its command line is the `capture_send` library (Package.swift).
@main
enum CaptureSendMain {
    static func main() {
        ProgramVersion.stamp(version: BuildStamp.version, commit: BuildStamp.commit)
        CaptureSendProgram.main()
    }
}
