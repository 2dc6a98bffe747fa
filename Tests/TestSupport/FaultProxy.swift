import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy that injects network faults between a sender and a receiver, for tests.
///
/// Each accepted connection is relayed to `127.0.0.1:upstreamPort` by two threads (one per
/// direction). What happens to the bytes depends on `mode`, which tests switch at any time:
/// - `.pass`: relayed unchanged;
/// - `.resetAfterRandomBytes(range)`: each connection is reset (RST on both sides) after a number of
///   relayed bytes drawn from `range` with the proxy's seeded generator, so the cut falls in the
///   middle of frames;
/// - `.stall`: nothing is relayed (bytes wait in the kernel) until the mode changes;
/// - `.throttle(bytesPerSecond)`: relayed at that rate;
/// - `.blackHole`: connections are accepted but everything is swallowed and nothing is answered or
///   relayed, like a peer that vanished without closing (half-open connection);
/// - `.dropReplies`: what the client sends is relayed, what the upstream answers is swallowed (a
///   return path that fails while the other direction still works); closes are still relayed;
/// - `.sharedLink(bytesPerSecond:bufferBytes:)`: one thin uplink shared by every connection, like a
///   field unit's 3G modem: what the clients send goes through one first-in first-out queue of up
///   to `bufferBytes`, drained at `bytesPerSecond` (a connection's bytes wait behind whatever any
///   connection queued before them); the replies are not paced. Leaving the mode sends what is
///   queued at once.
public final class FaultProxy: @unchecked Sendable {
    /// What the proxy does to the traffic.
    public enum Mode: Sendable, Equatable {
        case pass
        case resetAfterRandomBytes(ClosedRange<Int>)
        case stall
        case throttle(bytesPerSecond: Int)
        case blackHole
        case dropReplies
        case sharedLink(bytesPerSecond: Int, bufferBytes: Int)
    }

    /// The port the proxy listens on (127.0.0.1).
    public let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var currentMode: Mode = .pass
    private var upstream: Int
    private var random: UInt64
    private var stopped = false
    private var live: [Relay] = []
    private var accepted = 0
    private var resets = 0
    /// `.sharedLink`: when the link finishes sending everything queued so far (monotonic seconds).
    private var linkFreeAt = 0.0
    private var upstreamSends: [(time: Double, bytes: Int)] = []

    /// Starts a proxy in front of `127.0.0.1:upstreamPort`; `seed` makes the fault pattern repeatable.
    public init(upstreamPort: Int, seed: UInt64) throws {
        upstream = upstreamPort
        random = seed | 1
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        guard listener >= 0 else { throw ProxyError("socket() failed: \(errno)") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw ProxyError("cannot listen on 127.0.0.1: \(errno)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: actual.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    /// What the proxy does now; a change applies to live connections at once.
    public var mode: Mode {
        get { lock.withLock { currentMode } }
        set { lock.withLock { currentMode = newValue } }
    }

    /// Where new connections are relayed to (change it after restarting the receiver elsewhere).
    public var upstreamPort: Int {
        get { lock.withLock { upstream } }
        set { lock.withLock { upstream = newValue } }
    }

    /// Every send the proxy made towards the upstream so far (monotonic seconds, bytes), in order:
    /// what the clients sent, as it crossed the proxy.
    public var upstreamTraffic: [(time: Double, bytes: Int)] { lock.withLock { upstreamSends } }

    fileprivate func noteUpstream(_ bytes: Int) {
        let now = Self.monotonicSeconds()
        lock.withLock { upstreamSends.append((now, bytes)) }
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int { lock.withLock { accepted } }
    /// Connections the proxy reset so far.
    public var resetConnections: Int { lock.withLock { resets } }

    /// Resets every live connection now (RST to both peers).
    public func resetAll() {
        let relays = lock.withLock { live }
        relays.forEach { $0.reset() }
    }

    /// Stops accepting and resets every connection.
    public func stop() {
        let wasStopped = lock.withLock { () -> Bool in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        resetAll()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if lock.withLock({ stopped }) { return }
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let (mode, upstreamPort, budget) = lock.withLock { () -> (Mode, Int, Int) in
                accepted += 1
                var budget = Int.max
                if case .resetAfterRandomBytes(let range) = currentMode { budget = nextRandom(in: range) }
                return (currentMode, upstream, budget)
            }
            var server: Int32 = -1
            if mode != .blackHole {
                server = Self.connectLoopback(port: upstreamPort)
                if server < 0 {
                    Self.hardClose(client)
                    continue
                }
            }
            let relay = Relay(client: client, server: server, budget: budget, proxy: self)
            lock.withLock { live.append(relay) }
            relay.start()
        }
    }

    fileprivate func finished(_ relay: Relay, wasReset: Bool) {
        lock.withLock {
            live.removeAll { $0 === relay }
            if wasReset { resets += 1 }
        }
    }

    /// `.sharedLink`: queues `count` bytes on the shared link; returns when they will have crossed
    /// it (monotonic seconds), or nil when the link's buffer is full (the caller waits and asks again).
    fileprivate func queueOnSharedLink(_ count: Int, rate: Int, bufferBytes: Int) -> Double? {
        lock.withLock {
            let now = Self.monotonicSeconds()
            let start = max(now, linkFreeAt)
            guard (start - now) * Double(rate) <= Double(max(0, bufferBytes - count)) else { return nil }
            linkFreeAt = start + Double(count) / Double(max(rate, 1))
            return linkFreeAt
        }
    }

    static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// A fresh budget for a connection when the mode became `.resetAfterRandomBytes` after it opened.
    fileprivate func budgetIfResetting() -> Int? {
        lock.withLock {
            guard case .resetAfterRandomBytes(let range) = currentMode else { return nil }
            return nextRandom(in: range)
        }
    }

    private func nextRandom(in range: ClosedRange<Int>) -> Int {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        let span = UInt64(range.upperBound - range.lowerBound + 1)
        return range.lowerBound + Int(random % span)
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    static func connectLoopback(port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// Closes with SO_LINGER 0, so the peer sees a reset rather than an orderly close.
    static func hardClose(_ descriptor: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(descriptor)
    }
}

/// One proxied connection: two pumps and the shared byte budget before a reset. The sockets are
/// closed by the last pump to finish (so no thread ever uses a descriptor number after it was
/// closed and reused), with a reset (SO_LINGER 0) when the connection was reset.
private final class Relay: @unchecked Sendable {
    private let client: Int32
    private let server: Int32
    private weak var proxy: FaultProxy?
    private let lock = NSLock()
    private var budget: Int
    private var closing = false
    private var hard = false
    private var pumpsLeft = 2

    init(client: Int32, server: Int32, budget: Int, proxy: FaultProxy) {
        self.client = client
        self.server = server
        self.budget = budget
        self.proxy = proxy
        for descriptor in [client, server] where descriptor >= 0 {
            var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    func start() {
        Thread { [self] in pump(from: client, to: server) }.start()
        Thread { [self] in pump(from: server, to: client) }.start()
    }

    /// Resets both sides (within one receive timeout).
    func reset() {
        lock.withLock {
            closing = true
            hard = true
        }
    }

    private var isClosing: Bool { lock.withLock { closing } }

    private func pumpEnded() {
        let (last, reset) = lock.withLock { () -> (Bool, Bool) in
            pumpsLeft -= 1
            return (pumpsLeft == 0, hard)
        }
        guard last else { return }
        for descriptor in [client, server] where descriptor >= 0 {
            if reset { FaultProxy.hardClose(descriptor) } else { close(descriptor) }
        }
        proxy?.finished(self, wasReset: reset)
    }

    private func pump(from source: Int32, to destination: Int32) {
        defer { pumpEnded() }
        guard source >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var pending: ArraySlice<UInt8> = []
        while !isClosing {
            let mode = proxy?.mode ?? .pass
            if case .sharedLink = mode, source == client, destination >= 0 {
                guard pumpSharedLink(from: source, to: destination, carrying: &pending) else { return }
                continue
            }
            if mode == .stall {
                usleep(10_000)
                continue
            }
            if pending.isEmpty {
                let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                if count == 0 {
                    if destination >= 0 { shutdown(destination, Int32(SHUT_WR)) }
                    return
                }
                if count < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                    return reset()
                }
                pending = buffer[0..<count]
            }
            if mode == .blackHole || destination < 0 || (mode == .dropReplies && source == server) {
                pending = []
                continue
            }
            var slice = pending
            if case .throttle(let rate) = mode {
                slice = pending.prefix(max(1, rate / 50))
                usleep(UInt32(1_000_000 * Double(slice.count) / Double(max(rate, 1))))
            }
            if case .resetAfterRandomBytes = mode {
                let allowed: Int = lock.withLock {
                    if budget == Int.max, let fresh = proxy?.budgetIfResetting() { budget = fresh }
                    return budget
                }
                if allowed < slice.count {
                    _ = slice.prefix(allowed).withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    return reset()
                }
            }
            let sent = slice.withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                return reset()
            }
            lock.withLock { if budget != Int.max { budget -= sent } }
            if source == client { proxy?.noteUpstream(sent) }
            pending = pending.dropFirst(sent)
        }
    }
}

extension Relay {
    /// `.sharedLink` for the client's direction: reads into the shared queue while its buffer has
    /// room, and sends each chunk once it has crossed the link. Returns when the mode changes (what
    /// is queued is sent at once; true) or the connection ends (false). `pending` is what was read
    /// and not yet queued.
    fileprivate func pumpSharedLink(from source: Int32, to destination: Int32, carrying pending: inout ArraySlice<UInt8>) -> Bool {
        var queued: [(due: Double, bytes: [UInt8])] = []
        var buffer = [UInt8](repeating: 0, count: 4 << 10)
        var sourceEnded = false
        func sendAll(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                    return false
                }
                proxy?.noteUpstream(sent)
                offset += sent
            }
            return true
        }
        while true {
            guard !isClosing, let proxy else { return false }
            guard case .sharedLink(let rate, let bufferBytes) = proxy.mode else {
                for chunk in queued where !sendAll(chunk.bytes) { reset(); return false }
                return true
            }
            let now = FaultProxy.monotonicSeconds()
            while let first = queued.first, first.due <= now {
                guard sendAll(first.bytes) else { reset(); return false }
                queued.removeFirst()
            }
            if sourceEnded {
                if queued.isEmpty {
                    shutdown(destination, Int32(SHUT_WR))
                    return false
                }
            } else if pending.isEmpty {
                var poller = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
                let wait = queued.first.map { max(0, min(0.05, $0.due - now)) } ?? 0.05
                if poll(&poller, 1, Int32((wait * 1_000).rounded(.up))) > 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                    if count == 0 {
                        sourceEnded = true
                    } else if count < 0 {
                        if errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR { reset(); return false }
                    } else {
                        pending = buffer[0..<count]
                    }
                }
                continue
            }
            if !pending.isEmpty {
                if let due = proxy.queueOnSharedLink(pending.count, rate: rate, bufferBytes: bufferBytes) {
                    queued.append((due, Array(pending)))
                    pending = []
                    continue
                }
            }
            // The link's buffer is full, or nothing to read: wait for the next chunk to cross.
            let wait = queued.first.map { max(0, min(0.05, $0.due - FaultProxy.monotonicSeconds())) } ?? 0.01
            usleep(UInt32(max(1_000, wait * 1e6)))
        }
    }
}

/// Why the proxy could not start.
public struct ProxyError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
