import CaptureCore
@testable import CaptureReceiver
import Crypto
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Claims are bytes of one lock file per output folder: a stream is held once in a process and once
/// across processes (another open file description stands in for another receiver, which the kernel
/// excludes the same way), the file is open only while a claim is held, and a damaged lock file is
/// reported with what to do.
final class StreamLockTableTests: XCTestCase {
    private var folder = ""
    private var index: StreamIndex { StreamIndex(outputDirectory: folder) }

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "lock-table-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try index.prepare()
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    func testAStreamIsHeldOnceInAProcessAndAgainstAnotherReceiver() throws {
        let stream = UUID()
        let claim = try index.claimNew(stream, relativePath: "a.caf").get()
        guard case .failure(.held) = index.claimExisting(stream) else { return XCTFail("another connection of this receiver") }
        let other = try OtherReceiver(folder: index.directory)
        XCTAssertFalse(other.lock(stream), "another receiver cannot take it while it is held")
        let neighbour = UUID()
        XCTAssertTrue(other.lock(neighbour), "another stream's byte is free")
        guard case .failure(.held) = index.claimNew(neighbour) else { return XCTFail("held by the other receiver") }
        claim.release(removingEntry: false)
        XCTAssertTrue(other.lock(stream), "let go: the other receiver takes it over")
        guard case .failure(.held) = index.claimExisting(stream) else { return XCTFail("now held by the other receiver") }
        other.unlock(stream)
        let again = try index.claimExisting(stream).get()
        XCTAssertEqual(try again.contents(), "a.caf")
        again.release(removingEntry: true)
        guard case .failure(.missing) = index.claimExisting(stream) else { return XCTFail("the entry is gone") }
    }

    func testTheLockFileIsOpenOnlyWhileAClaimIsHeld() throws {
        let lockFile = StreamLockTable.lockFilePath(index.directory)
        let claims = try (0..<50).map { _ in try index.claimNew(UUID()).get() }
        XCTAssertEqual(Self.descriptors(of: lockFile), 1, "one descriptor for all the claims")
        for claim in claims.dropLast() { claim.release(removingEntry: true) }
        XCTAssertEqual(Self.descriptors(of: lockFile), 1)
        claims.last?.release(removingEntry: true)
        XCTAssertEqual(Self.descriptors(of: lockFile), 0, "closed with the last claim")
    }

    func testTheByteIsKeyedByTheFoldersSecretNotByTheStreamIdAlone() throws {
        let stream = UUID()
        let first = SymmetricKey(data: [UInt8](repeating: 1, count: 16))
        let second = SymmetricKey(data: [UInt8](repeating: 2, count: 16))
        XCTAssertEqual(StreamLockTable.offset(of: stream, key: first), StreamLockTable.offset(of: stream, key: first))
        XCTAssertNotEqual(StreamLockTable.offset(of: stream, key: first), StreamLockTable.offset(of: stream, key: second))
        let offsets = Set((0..<10_000).map { _ in StreamLockTable.offset(of: UUID(), key: first) })
        XCTAssertEqual(offsets.count, 10_000)
        XCTAssertTrue(offsets.allSatisfy { $0 >= 0 })
        // The key is written once, by the first claim in the folder, and kept.
        let claim = try index.claimNew(stream).get()
        let header = try XCTUnwrap(FileManager.default.contents(atPath: StreamLockTable.lockFilePath(index.directory)))
        claim.release(removingEntry: true)
        _ = try index.claimNew(stream).get()
        XCTAssertEqual(FileManager.default.contents(atPath: StreamLockTable.lockFilePath(index.directory)), header)
        XCTAssertEqual(header.count, 32)
        XCTAssertEqual(Array(header.prefix(8)), Array("CSLK".utf8) + [0, 0, 0, 1])
    }

    func testADamagedLockFileIsReportedWithWhatToDo() throws {
        let lockFile = StreamLockTable.lockFilePath(index.directory)
        XCTAssertTrue(FileManager.default.createFile(atPath: lockFile, contents: Data("not a lock file".utf8)))
        guard case .failure(.failed(let error)) = index.claimNew(UUID()) else { return XCTFail("a damaged lock file claims nothing") }
        XCTAssertTrue(error.description.contains(lockFile), error.description)
        XCTAssertTrue(error.description.contains("stop every receiver writing to this folder, then remove it"), error.description)
        XCTAssertEqual(Self.descriptors(of: lockFile), 0)
    }

    /// How many descriptors of this process are open on `path`.
    private static func descriptors(of path: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == path }.count
    }
}

/// Another receiver's hold on the folder's lock file: its own open file description, whose OFD
/// locks conflict with this process's as another process's would.
private final class OtherReceiver {
    private let descriptor: Int32
    private let key: SymmetricKey

    init(folder: String) throws {
        let path = StreamLockTable.lockFilePath(folder)
        let opened = open(path, O_RDWR | O_CLOEXEC)
        guard opened >= 0 else { throw CocoaError(.fileNoSuchFile) }
        var header = [UInt8](repeating: 0, count: 32)
        _ = header.withUnsafeMutableBytes { pread(opened, $0.baseAddress, 32, 0) }
        descriptor = opened
        key = SymmetricKey(data: header[8..<24])
    }

    deinit { close(descriptor) }

    func lock(_ stream: UUID) -> Bool { set(F_WRLCK, stream) }
    func unlock(_ stream: UUID) { _ = set(F_UNLCK, stream) }

    private func set(_ type: Int32, _ stream: UUID) -> Bool {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(StreamLockTable.offset(of: stream, key: key))
        lock.l_len = 1
        return fcntl(descriptor, 37, &lock) == 0
    }
}
