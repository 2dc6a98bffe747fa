#if canImport(Glibc)
import Glibc
#endif
import CSpawn
import Synchronization

/// One run of a hook's command (`--on-finalize`, `--on-alarm`): `/bin/sh -c CMD NAME ARGUMENTS...` in a process
/// group of its own, with standard input from /dev/null, standard output and error into a pipe the
/// receiver reads (the last 2 KB are kept for the log: nothing is written to a file), default
/// signal handling and mask, and no descriptor of the receiver's but the hand-off's lock (as
/// descriptor `HandOffLock.commandDescriptor`).
///
/// `terminate()` and `kill()` signal the whole process group, from any thread, for as long as the
/// command's shell has not been reaped (its process id, which is the group's, stays reserved until
/// then, so a signal never reaches an unrelated process). Once the shell of a stopped command exits,
/// what is left of its group gets SIGKILL at once.
final class HandOffCommand: Sendable {
    /// How the command ended.
    enum Ending: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)
        /// Stopped before it started (the time limit passed during the export, or the receiver stops).
        case notStarted
        /// It could not be started (the reason, for the log).
        case cannotStart(String)
        /// Its exit status could not be read (the reason, for the log).
        case lost(String)
    }

    private enum State {
        case waiting(cancelled: Bool)
        case running(group: pid_t, signalled: Bool)
        case ended
    }

    private let state = Mutex(State.waiting(cancelled: false))

    /// The most output kept.
    static let outputTail = 2_048

    /// SIGTERM to the command's process group; before it starts, it never starts.
    func terminate() { signal(SIGTERM) }

    /// SIGKILL to the command's process group.
    func kill() { signal(SIGKILL) }

    private func signal(_ number: Int32) {
        state.withLock { state in
            switch state {
            case .waiting:
                state = .waiting(cancelled: true)
            case .running(let group, _):
                _ = Glibc.kill(-group, number)
                state = .running(group: group, signalled: true)
            case .ended:
                break
            }
        }
    }

    /// Runs `command` to its end on the calling thread; returns how it ended and the end of its output.
    /// `name` is the command's `$0`, `arguments` its `$1`...
    func run(
        command: String, name: String, arguments: [String], environment: [String: String], directory: String, lockDescriptor: Int32?
    ) -> (ending: Ending, output: String) {
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe2(&pipeEnds, O_CLOEXEC) == 0 else { return (.cannotStart("cannot make a pipe for its output: \(Self.reason(errno))"), "") }
        let readEnd = pipeEnds[0]
        let writeEnd = pipeEnds[1]
        defer { _ = close(readEnd) }
        _ = fcntl(readEnd, F_SETFL, fcntl(readEnd, F_GETFL) | O_NONBLOCK)

        // The descriptors the child keeps are moved out of its way first (none may be one of 0-2
        // or the lock's number, or a later step would undo an earlier one).
        var moved: [Int32] = []
        defer { moved.forEach { _ = close($0) } }
        func clear(_ descriptor: Int32) -> Int32 {
            guard descriptor <= HandOffLock.commandDescriptor else { return descriptor }
            let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, HandOffLock.commandDescriptor + 1)
            if copy >= 0 { moved.append(copy) }
            return copy >= 0 ? copy : descriptor
        }
        let childOutput = clear(writeEnd)
        let lock = lockDescriptor.map(clear)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, childOutput, 1)
        posix_spawn_file_actions_adddup2(&actions, childOutput, 2)
        if let lock { posix_spawn_file_actions_adddup2(&actions, lock, HandOffLock.commandDescriptor) }
        for descriptor in 3..<HandOffLock.commandDescriptor { posix_spawn_file_actions_addclose(&actions, descriptor) }
        if lock == nil { posix_spawn_file_actions_addclose(&actions, HandOffLock.commandDescriptor) }
        posix_spawn_file_actions_addclosefrom_np(&actions, HandOffLock.commandDescriptor + 1)
        posix_spawn_file_actions_addchdir_np(&actions, directory)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        // What the receiver ignores (SIGPIPE; whatever it was started ignoring) or blocks is not the
        // command's business: it starts with every signal's default action and none blocked.
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)

        let arguments = (["/bin/sh", "-c", command, name] + arguments).map { text in text.withCString { strdup($0) } }
        let variables = environment.sorted { $0.key < $1.key }.map { entry in "\(entry.key)=\(entry.value)".withCString { strdup($0) } }
        defer { (arguments + variables).forEach { free($0) } }
        let started: (pid: pid_t?, failure: Ending?) = state.withLock { state in
            if case .waiting(cancelled: true) = state { return (nil, .notStarted) }
            var pid: pid_t = 0
            let result = (arguments + [nil]).withUnsafeBufferPointer { argv in
                (variables + [nil]).withUnsafeBufferPointer { envp in
                    guard let argv = argv.baseAddress, let envp = envp.baseAddress else { return EINVAL }
                    return posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
                }
            }
            guard result == 0 else { return (nil, .cannotStart("cannot start /bin/sh: \(Self.reason(result))")) }
            state = .running(group: pid, signalled: false)
            return (pid, nil)
        }
        // The child has its copies: without closing ours, the pipe would never reach its end.
        _ = close(writeEnd)
        moved.forEach { _ = close($0) }
        moved = []
        guard let pid = started.pid else { return (started.failure ?? .notStarted, "") }

        var output: [UInt8] = []
        var open = true
        while true {
            if open {
                var descriptor = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 250)
                open = Self.read(readEnd, into: &output)
                if Self.hasExited(pid, waiting: false) { break }
            } else if Self.hasExited(pid, waiting: true) {
                break
            }
        }
        state.withLock { state in
            // A stopped command's shell has exited: nothing of its group may go on holding the lock.
            if case .running(let group, signalled: true) = state { _ = Glibc.kill(-group, SIGKILL) }
            state = .ended
        }
        var status: Int32 = 0
        var reaped: pid_t
        repeat { reaped = waitpid(pid, &status, 0) } while reaped < 0 && errno == EINTR
        let lostReason = reaped < 0 ? Self.reason(errno) : nil
        // What the command wrote just before it ended.
        _ = Self.read(readEnd, into: &output)
        let text = String(decoding: output.suffix(Self.outputTail), as: UTF8.self)
        if let lostReason { return (.lost(lostReason), text) }
        let signal = status & 0x7F
        return (signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal), text)
    }

    /// Reads what the pipe holds now into `output` (keeping its end); false at the pipe's end.
    /// Bounded: a process the command left behind may hold the pipe and keep writing.
    private static func read(_ descriptor: Int32, into output: inout [UInt8]) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4_096)
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                output += buffer[0..<count]
                if output.count > 4 * outputTail { output.removeFirst(output.count - outputTail) }
                continue
            }
            if count < 0, errno == EINTR { continue }
            return count < 0  // EAGAIN: open, nothing more now; 0: the end
        }
        return true
    }

    /// Whether the command's shell has exited, without reaping it (so its process id stays reserved).
    private static func hasExited(_ pid: pid_t, waiting: Bool) -> Bool {
        var info = siginfo_t()
        var result: Int32
        repeat { result = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | (waiting ? 0 : WNOHANG)) } while result < 0 && errno == EINTR
        return result < 0 || info.si_signo == SIGCHLD
    }

    private static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}
