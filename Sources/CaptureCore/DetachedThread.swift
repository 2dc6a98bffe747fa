#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts a named, detached POSIX thread that runs a closure (the capture queue's capture and
/// delivery threads), and names threads started otherwise. Plain pthreads keep the capture path
/// free of Foundation (and of the start-up cost of loading it) for programs that embed the queue.
public enum DetachedThread {
    /// Names the calling thread `name` (at most 15 bytes are kept on Linux), as `top -H`, `perf`
    /// and core dumps show it. Foundation's `Thread.name` does not reach the system's thread name on
    /// Linux, so threads started with `Thread` call this first thing in their body.
    public static func nameCurrentThread(_ name: String) {
        #if canImport(Glibc)
        // pthread_setname_np is not visible to Swift without _GNU_SOURCE; the kernel's comm file
        // sets the same name.
        let descriptor = open("/proc/thread-self/comm", O_WRONLY)
        if descriptor >= 0 {
            let bytes = Array(name.utf8.prefix(15))
            _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
        #else
        _ = pthread_setname_np(name)
        #endif
    }

    /// Starts `body` on a new detached thread named `name` (at most 15 bytes are kept on Linux).
    ///
    /// - Throws: `CaptureError.invalidState` when the system refuses to create a thread.
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(CaptureError) {
        let context = Unmanaged.passRetained(ThreadContext(name: name, body: body)).toOpaque()
        #if canImport(Glibc)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let status = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let context = Unmanaged<ThreadContext>.fromOpaque(raw).takeRetainedValue()
            context.run()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<ThreadContext>.fromOpaque(context).release()
            throw CaptureError.invalidState("could not start the \(name) thread (error \(status)); the system is out of threads or memory")
        }
        #if canImport(Glibc)
        pthread_detach(thread)
        #else
        if let thread { pthread_detach(thread) }
        #endif
    }
}

/// What a new thread needs: its name and its work.
private final class ThreadContext {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }

    func run() {
        DetachedThread.nameCurrentThread(name)
        body()
    }
}
