import CaptureCLISupport
import capture_recv

/// The capture-recv executable: its command line is the `capture_recv` library (Package.swift).
@main
enum CaptureRecvMain {
    static func main() async {
        ProgramVersion.stamp(version: BuildStamp.version, commit: BuildStamp.commit)
        await CaptureRecvProgram.main()
    }
}
