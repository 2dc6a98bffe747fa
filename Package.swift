// swift-tools-version:6.0
// The package of the network audio capture streamer: capture-send and capture-recv, and the libraries
// they are built from. ARCHITECTURE.md (../shared) and docs/DESIGN.md explain the module layout.
import PackageDescription

let package = Package(
    name: "capture-streamer",
    platforms: [.macOS(.v13)],
    products: [
        // The embeddable capture queue: formats, buffer sizing, the queue, sources, encoders.
        .library(name: "CaptureKit", targets: ["CaptureCore", "CaptureSndFile", "CaptureALSA", "CaptureCodecs"]),
        .library(name: "CAF", targets: ["CAF"]),
        .executable(name: "capture-send", targets: ["capture-send"]),
        .executable(name: "capture-recv", targets: ["capture-recv"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
    ],
    targets: [
        // C libraries from the system, found by pkg-config.
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CSndFile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),

        // Sound I/O and the queue: no network, no C library but libc.
        .target(
            name: "CaptureCore",
            dependencies: [.product(name: "Atomics", package: "swift-atomics")]
        ),
        // The file source over libsndfile (WAV, AIFF, FLAC, CAF in the file's own format).
        .target(name: "CaptureSndFile", dependencies: ["CaptureCore", "CSndFile"]),
        // The ALSA capture source over libasound.
        .target(name: "CaptureALSA", dependencies: ["CaptureCore", "CALSA"]),
        // Encoders between the queue's callback and the packet log: PCM and Opus.
        .target(name: "CaptureCodecs", dependencies: ["CaptureCore", "COpus"]),
        // Core Audio Format files: writer, reader, crash recovery.
        .target(name: "CAF", dependencies: ["CaptureCore"]),
        // Frames, messages and protocol state machines; pure, no sockets.
        .target(
            name: "CaptureWire",
            dependencies: [
                "CaptureCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // SwiftNIO adapters for the wire format: frame decoder and encoder handlers.
        .target(
            name: "CaptureWireNIO",
            dependencies: ["CaptureWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The SwiftNIO client: connect, handshake, send window, acks, reconnect, spool (CAF: overflow files).
        .target(
            name: "CaptureSender",
            dependencies: [
                "CaptureCore", "CaptureCodecs", "CaptureWire", "CaptureWireNIO", "CAF",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The SwiftNIO server: accept, limits, sessions, stream store, durable acks.
        .target(
            name: "CaptureReceiver",
            dependencies: [
                "CaptureCore", "CaptureWire", "CaptureWireNIO", "CAF",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What both executables share: address parsing, logging set-up.
        .target(
            name: "CaptureCLISupport",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "capture-send",
            dependencies: [
                "CaptureCore", "CaptureSndFile", "CaptureALSA", "CaptureCodecs", "CaptureSender", "CaptureCLISupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "capture-recv",
            dependencies: [
                "CaptureReceiver", "CAF", "CaptureCLISupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),

        .target(name: "TestSupport", dependencies: ["CaptureCore", "CSndFile"], path: "Tests/TestSupport"),
        .testTarget(name: "CaptureCoreTests", dependencies: ["CaptureCore", "CaptureSndFile", "CSndFile", "TestSupport"]),
        .testTarget(name: "CAFTests", dependencies: ["CAF", "COpus", "TestSupport"]),
        .testTarget(
            name: "CaptureWireTests",
            dependencies: [
                "CaptureWire", "CaptureWireNIO", "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "CaptureCodecsTests", dependencies: ["CaptureCodecs", "COpus", "CAF", "TestSupport"]),
        .testTarget(name: "CaptureALSATests", dependencies: ["CaptureALSA", "CALSA", "TestSupport"]),
        .testTarget(
            name: "DurabilityTests",
            dependencies: ["CaptureSender", "CaptureReceiver", "CaptureCore", "CaptureCodecs", "CAF", "TestSupport"]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["CAF", "CaptureCore", "CaptureWire", "CaptureCLISupport", "CSndFile", "TestSupport", "capture-send", "capture-recv"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
