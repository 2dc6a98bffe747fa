// swift-tools-version:6.2
// The package of the network audio capture streamer: capture-send and capture-recv, and the libraries
// they are built from. ARCHITECTURE.md (../shared) and docs/DESIGN.md explain the module layout.
import Foundation
import PackageDescription

/// `make fuzz` sets CAPTURE_FUZZ=1: the code under fuzzing (and the fuzz targets) is then built with
/// libFuzzer's coverage and AddressSanitizer, and each `fuzz-*` executable is a libFuzzer target.
/// Only these modules are instrumented, so the build reuses everything else. Without it the `fuzz-*`
/// executables replay saved inputs through the same checks (Fuzz/README.md).
let fuzzing = ProcessInfo.processInfo.environment["CAPTURE_FUZZ"] == "1"
let underFuzzing: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address", "-O"])] : []
func fuzzTarget(_ name: String, checks: String = "FuzzChecks") -> Target {
    .executableTarget(
        name: "fuzz-\(name)", dependencies: Array(Set(["FuzzChecks", checks])).sorted().map { .target(name: $0) }, path: "Fuzz/fuzz-\(name)",
        swiftSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address", "-parse-as-library"]), .define("FUZZING")] : [],
        linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : [])
}

let package = Package(
    name: "capture-streamer",
    platforms: [.macOS(.v13)],
    products: [
        // The embeddable capture queue: formats, buffer sizing, the queue, sources, encoders.
        .library(name: "CaptureKit", targets: ["CaptureCore", "CaptureSndFile", "CaptureALSA", "CaptureCodecs"]),
        .library(name: "CAF", targets: ["CAF"]),
        .executable(name: "capture-send", targets: ["capture-send-main"]),
        .executable(name: "capture-recv", targets: ["capture-recv-main"]),
        // capture-send as a library: CaptureStreamer (docs: `make docs`).
        .library(name: "CaptureSender", targets: ["CaptureSender"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        // Settings from environment variables and a JSON file; default trait JSON only (no YAML, no Yams).
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ],
    targets: [
        // C libraries from the system, found by pkg-config.
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CSndFile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "COgg", pkgConfig: "ogg", providers: [.apt(["libogg-dev"])]),
        .systemLibrary(name: "CSoxr", pkgConfig: "soxr", providers: [.apt(["libsoxr-dev"])]),
        .systemLibrary(name: "CEbur128", pkgConfig: "libebur128", providers: [.apt(["libebur128-dev"])]),
        .systemLibrary(name: "CTimex"),
        .systemLibrary(name: "CSpawn"),
        .systemLibrary(name: "CWriteback"),

        // Sound I/O and the queue: no network, no C library but libc.
        .target(name: "CaptureCore", dependencies: ["CTimex"]),
        // The file source over libsndfile (WAV, AIFF, FLAC, CAF in the file's own format).
        .target(name: "CaptureSndFile", dependencies: ["CaptureCore", "CSndFile"]),
        // The ALSA capture source over libasound.
        .target(name: "CaptureALSA", dependencies: ["CaptureCore", "CALSA"]),
        // The source factory: a tone, a file or an ALSA device (reopening, time-limited) from settings.
        .target(name: "CaptureSources", dependencies: ["CaptureCore", "CaptureALSA", "CaptureSndFile"]),
        // Encoders between the queue's callback and the packet log: PCM and Opus.
        .target(name: "CaptureCodecs", dependencies: ["CaptureCore", "COpus", "CSoxr"]),
        // EBU R128 loudness and true peak of captured audio, through libebur128, measured at the sender.
        .target(name: "CaptureLoudness", dependencies: ["CaptureCore", "CEbur128"]),
        // The receiver's commit log: checksummed batches in recycled segment files, one fdatasync per round, replay.
        .target(name: "CaptureCommitLog", dependencies: ["CaptureCore"]),
        // Core Audio Format files: writer, reader, crash recovery.
        .target(name: "CAF", dependencies: ["CaptureCore", "CWriteback"], swiftSettings: underFuzzing),
        // Frames, messages and protocol state machines; pure, no sockets.
        .target(
            name: "CaptureWire",
            dependencies: [
                "CaptureCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: underFuzzing
        ),
        // SwiftNIO adapters for the wire format: frame decoder and encoder handlers.
        .target(
            name: "CaptureWireNIO",
            dependencies: ["CaptureWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // System, file and socket errors in a user's words ("permission denied"), for every module that reports them.
        .target(
            name: "CaptureErrorText",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        // TLS and authentication shared by both sides: certificates, fingerprints, pins, tokens.
        .target(
            name: "CaptureSecurity",
            dependencies: [
                "CaptureCore", "CaptureErrorText",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The SwiftNIO client: connect, TLS, handshake, send window, acks, reconnect, spool (CAF: overflow files).
        .target(
            name: "CaptureSender",
            dependencies: [
                "CaptureCore", "CaptureCodecs", "CaptureLoudness", "CaptureWire", "CaptureWireNIO", "CaptureSecurity", "CAF", "CaptureErrorText",
                "CaptureLocalCopy",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: underFuzzing
        ),
        // The SwiftNIO server: accept, limits, sessions, stream store, durable acks.
        .target(
            name: "CaptureReceiver",
            dependencies: [
                "CaptureCore", "CaptureWire", "CaptureWireNIO", "CAF", "CaptureCommitLog", "CaptureSecurity", "CaptureErrorText", "CSpawn",
                "CaptureService",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: underFuzzing
        ),
        // Live listening: Opus streams remuxed, PCM streams encoded while someone listens, into Ogg Opus per listener.
        // Exports of finished recordings: Broadcast Wave, RF64, FLAC (libsndfile), Ogg Opus (libogg).
        // The safety copy on the field unit (capture-send --record): CAF through the crash-safe
        // writer, WAV and FLAC through libsndfile, on a writer thread of its own.
        .target(name: "CaptureLocalCopy", dependencies: ["CAF", "CaptureCore", "CaptureErrorText", "CSndFile"]),
        .target(name: "CaptureExport", dependencies: ["CAF", "CaptureCore", "CaptureErrorText", "CaptureSndFile", "CSndFile", "COpus", "COgg"], swiftSettings: underFuzzing),
        .target(name: "CaptureListen", dependencies: ["CaptureCore", "CaptureCodecs", "COpus", "COgg", "CSoxr"]),
        // The sender's status line: level bars, link state, backlog; terminal and plain styles.
        .target(name: "CaptureStatus", dependencies: ["CaptureCore"]),
        // The receiver's Prometheus metrics.
        .target(
            name: "CaptureMetrics",
            dependencies: [
                "CaptureCore",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The receiver's HTTP server (Hummingbird): the console page, the streams API and its
        // Server-Sent Events, live listening, and /metrics, with token access off loopback.
        .target(
            name: "CaptureConsole",
            dependencies: [
                "CaptureReceiver", "CaptureListen", "CaptureMetrics", "CaptureSecurity", "CaptureErrorText", "CaptureExport", "CaptureCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Graceful shutdown on SIGTERM/SIGINT through swift-service-lifecycle.
        .target(
            name: "CaptureService",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What both executables share: address parsing, logging set-up, signal delivery, and the
        // settings from environment variables and a config file (swift-configuration) turned into arguments.
        .target(
            name: "CaptureCLISupport",
            dependencies: [
                "CaptureErrorText", "CaptureCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: underFuzzing
        ),
        // The executables' command lines (options, validation, runs) are libraries, named like the
        // executables so their symbols keep their names (scripts/release-order.txt): the tests and
        // the `settings` fuzz target parse them in memory. Each executable is its `main` alone, in Main/.
        .target(
            name: "capture-send",
            dependencies: [
                "CaptureCore", "CaptureSources", "CaptureALSA", "CaptureCodecs", "CaptureSender", "CaptureCLISupport", "CaptureStatus", "CaptureSecurity", "CaptureLocalCopy",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["Main"],
            swiftSettings: underFuzzing
        ),
        .executableTarget(name: "capture-send-main", dependencies: ["capture-send", "CaptureCLISupport"], path: "Sources/capture-send/Main", plugins: ["BuildStamp"]),
        .target(
            name: "capture-recv",
            dependencies: [
                "CaptureReceiver", "CAF", "CaptureCLISupport", "CaptureMetrics", "CaptureConsole", "CaptureService", "CaptureSecurity",
                "CaptureExport", "CaptureCore", "CaptureListen",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["Main"],
            swiftSettings: underFuzzing
        ),
        .executableTarget(name: "capture-recv-main", dependencies: ["capture-recv", "CaptureCLISupport"], path: "Sources/capture-recv/Main", plugins: ["BuildStamp"]),

        // The benchmark helper: capture through the queue into a discarding callback (bench/).
        // The embedding example (Examples/README.md); `make test` builds it and runs it against capture-recv.
        .executableTarget(
            name: "capture-streamer-example",
            dependencies: [
                "CaptureSender", "CaptureCore", "CaptureCodecs", "CaptureSources", .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            path: "Examples/StreamToReceiver"
        ),
        // One capture, two encodings (PCM to one receiver, Opus to another); run by ExampleProgramTests.
        .executableTarget(
            name: "capture-two-encodings-example",
            dependencies: ["CaptureSender", "CaptureCore", "CaptureCodecs", "CaptureSources", .product(name: "Logging", package: "swift-log")],
            path: "Examples/TwoEncodings"
        ),
        .executableTarget(name: "capture-bench", dependencies: ["CaptureCore", "CaptureALSA"], path: "bench/CaptureBench"),
        .executableTarget(name: "capture-commit-log-bench", dependencies: ["CaptureCommitLog", "CaptureCore"], path: "bench/CommitLogBench"),
        // The receiver's load generator: many simulated senders in one process, and the check of their files (bench/).
        .executableTarget(
            name: "capture-load",
            dependencies: [
                "CaptureCore", "CaptureWire", "CaptureWireNIO", "CaptureSecurity", "CaptureErrorText", "CAF",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "bench/CaptureLoad",
            plugins: ["BuildStamp"]
        ),
        // What --version prints, stamped into each executable at build time: the package version
        // (debian/changelog) and the git commit (scripts/build-stamp.sh).
        .plugin(name: "BuildStamp", capability: .buildTool(), path: "Plugins/BuildStamp"),

        // Fuzzing (issue 19): the invariants each fuzz target checks, and the targets (Fuzz/README.md).
        .target(name: "FuzzChecks", dependencies: ["CaptureCore", "CaptureWire", "CAF", "CaptureSender", "CaptureReceiver", "CaptureExport"], path: "Fuzz/FuzzChecks", swiftSettings: underFuzzing),
        fuzzTarget("frames"), fuzzTarget("hello"), fuzzTarget("caf"), fuzzTarget("spool"), fuzzTarget("spool-meta"),
        fuzzTarget("export"),
        .target(
            name: "SettingsChecks",
            dependencies: [
                "FuzzChecks", "CaptureCLISupport", "CaptureCore", "capture-send", "capture-recv", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Fuzz/SettingsChecks", swiftSettings: underFuzzing),
        fuzzTarget("settings", checks: "SettingsChecks"),

        .target(name: "TestSupport", dependencies: ["CaptureCore", "CSndFile"], path: "Tests/TestSupport"),
        .testTarget(name: "CaptureCoreTests", dependencies: ["CaptureCore", "CaptureSndFile", "CSndFile", "TestSupport"]),
        .testTarget(name: "CAFTests", dependencies: ["CAF", "CaptureCore", "COpus", "CSndFile", "TestSupport"]),
        .testTarget(name: "CaptureLocalCopyTests", dependencies: ["CaptureLocalCopy", "CAF", "CaptureCore", "TestSupport"]),
        .testTarget(
            name: "CaptureWireTests",
            dependencies: [
                "CaptureWire", "CaptureWireNIO", "CaptureCore", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "CaptureCodecsTests", dependencies: ["CaptureCodecs", "CaptureCore", "COpus", "CAF", "TestSupport"]),
        .testTarget(name: "CaptureLoudnessTests", dependencies: ["CaptureLoudness", "CaptureCore", "TestSupport"]),
        .testTarget(name: "CaptureALSATests", dependencies: ["CaptureALSA", "CaptureCore", "CaptureSources", "CALSA", "TestSupport"]),
        .testTarget(
            name: "CaptureSenderTests",
            dependencies: [
                "CaptureSender", "CaptureWire", "CaptureCore", "CaptureCodecs", "CaptureSecurity", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "CaptureCLISupportTests",
            dependencies: [
                "CaptureCLISupport", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "CaptureReceiverTests",
            dependencies: [
                "CaptureReceiver",
                "CaptureCommitLog",
                "CaptureWire",
                "CaptureWireNIO",
                "CaptureCore",
                "CAF",
                "CaptureMetrics",
                "CaptureConsole",
                "CaptureSecurity",
                "CaptureService",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(name: "CaptureErrorTextTests", dependencies: ["CaptureErrorText", .product(name: "NIOCore", package: "swift-nio")]),
        .testTarget(name: "CaptureStatusTests", dependencies: ["CaptureStatus", "CaptureCore", "TestSupport"]),
        .testTarget(
            name: "CaptureConsoleTests",
            dependencies: [
                "CaptureConsole", "CaptureMetrics", "CaptureReceiver", "CaptureSecurity", "CaptureCore", "CaptureWire", "CAF", "TestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "CaptureServiceTests",
            dependencies: [
                "CaptureService",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DurabilityTests",
            dependencies: [
                "CaptureSender", "CaptureReceiver", "CaptureCore", "CaptureCodecs", "CaptureWire", "CAF", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "CAF", "CaptureCommitLog", "CaptureCore", "CaptureWire", "CaptureCLISupport", "CaptureSecurity", "CSndFile", "TestSupport",
                "capture-send-main", "capture-recv-main", "capture-load",
            ],
            // The browser tests' WebDriver scripts, the power-cut file system and the pseudo-terminal driver, run by path with python3.
            exclude: ["Browser", "GlusterFS", "Interactive", "PowerCut"]
        ),
        .testTarget(name: "CaptureCommitLogTests", dependencies: ["CaptureCommitLog", "CaptureCore", "TestSupport"]),
        .testTarget(name: "CaptureExportTests", dependencies: ["CaptureExport", "CAF", "CaptureCore", "CaptureCodecs", "CSndFile", "TestSupport"]),
        .testTarget(name: "CaptureListenTests", dependencies: ["CaptureListen", "CaptureCore", "CaptureCodecs", "TestSupport"]),
        .testTarget(name: "CaptureSecurityTests", dependencies: ["CaptureSecurity", "CaptureReceiver", "CaptureSender"]),
        .testTarget(name: "FuzzChecksTests", dependencies: ["FuzzChecks", "CaptureCodecs", "CaptureCore", "CaptureWire", "CAF", "CaptureSender", "CaptureReceiver", "CaptureExport"]),
        // Every numeric option of both executables, parsed in process; the settings fuzz corpus and regressions.
        .testTarget(
            name: "SettingsTests",
            dependencies: [
                "capture-send", "capture-recv", "CaptureCLISupport", "SettingsChecks", "FuzzChecks", "CaptureSender", "CaptureReceiver", "CaptureCore",
                "CaptureSecurity", "CaptureLocalCopy", "CaptureConsole", "CaptureExport", "CaptureALSA", "CaptureWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Our code builds without a warning: in every target of ours a warning is an error, so a new one
// fails the build (and CI) where it appears. The dependencies' own warnings stay theirs.
for target in package.targets where [.regular, .executable, .test].contains(target.type) {
    target.swiftSettings = (target.swiftSettings ?? []) + [.treatAllWarnings(as: .error)]
}
