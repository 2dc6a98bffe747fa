#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing two pieces of memory one after the other at a file offset with `pwritev`, so that a
/// payload can be written behind its header, or new audio behind the audio gathered before it,
/// without first copying them together. Shared by `DurableFile` and the CAF module's file, which
/// turn its result into their own errors.
public enum PositionalWrite {
    /// Writes all of `head` and then all of `tail` at `offset` of `descriptor`, completing short
    /// writes and retrying `EINTR`. Returns 0, or the `errno` of the failure (`EIO` when the kernel
    /// wrote nothing).
    public static func write(_ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, to descriptor: Int32, at offset: Int64) -> Int32 {
        let total = head.count + tail.count
        var written = 0
        while written < total {
            var vectors: [iovec] = []
            if written < head.count, let base = head.baseAddress {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base + written), iov_len: head.count - written))
            }
            let tailDone = max(0, written - head.count)
            if tailDone < tail.count, let base = tail.baseAddress {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base + tailDone), iov_len: tail.count - tailDone))
            }
            var result: Int
            repeat {
                result = vectors.withUnsafeBufferPointer { list in
                    pwritev(descriptor, list.baseAddress, Int32(list.count), off_t(offset) + off_t(written))
                }
            } while result == -1 && errno == EINTR
            if result < 0 { return errno }
            if result == 0 { return EIO }
            written += result
        }
        return 0
    }
}
