import Foundation
import FuzzChecks
import SettingsChecks

#if FUZZING
/// libFuzzer's entry point (built by `make fuzz` with `-sanitize=fuzzer,address`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    SettingsChecks.check(Data(bytes: data, count: size))
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// A debug build links executables with their entry point renamed to `<module>_main` (for
/// testability), which hides libFuzzer's own `main`: this one hands over to libFuzzer's driver.
@_cdecl("fuzz_settings_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments, fuzzOneInput)
}
#else
/// Without the fuzzer: runs the inputs (files, or every file in the folders) given as arguments
/// through the same checks, e.g. a crash input libFuzzer saved or a corpus.
@main
enum Replay {
    static func main() {
        exit(FuzzReplay.run(arguments: Array(CommandLine.arguments.dropFirst()), check: SettingsChecks.check))
    }
}
#endif
