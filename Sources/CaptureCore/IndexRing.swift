import Synchronization

/// A single-producer, single-consumer ring of buffer indices, lock-free and allocation-free after
/// creation. The capture queue passes buffer ownership between its capture thread and its delivery
/// thread through two of these (free buffers one way, filled buffers the other).
///
/// Sendability (`@unchecked Sendable`): one producer thread writes a slot before it publishes `head` (release) and one consumer reads it after loading `head` (acquire); `tail` the other way round.
final class IndexRing: @unchecked Sendable {
    private let storage: UnsafeMutablePointer<Int>
    private let capacity: Int
    /// Count of pushes; written by the producer only.
    private let head = Atomic<Int>(0)
    /// Count of pops; written by the consumer only.
    private let tail = Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        storage = UnsafeMutablePointer<Int>.allocate(capacity: self.capacity)
        storage.initialize(repeating: -1, count: self.capacity)
    }

    deinit { storage.deallocate() }

    /// Adds an index; producer side only. Returns false when the ring is full.
    @discardableResult
    func push(_ index: Int) -> Bool {
        let pushed = head.load(ordering: .relaxed)
        guard pushed - tail.load(ordering: .acquiring) < capacity else { return false }
        storage[pushed % capacity] = index
        head.store(pushed + 1, ordering: .releasing)
        return true
    }

    /// Takes the oldest index; consumer side only.
    func pop() -> Int? {
        let popped = tail.load(ordering: .relaxed)
        guard popped < head.load(ordering: .acquiring) else { return nil }
        let index = storage[popped % capacity]
        tail.store(popped + 1, ordering: .releasing)
        return index
    }

    /// Indices currently in the ring (a snapshot).
    var count: Int { head.load(ordering: .acquiring) - tail.load(ordering: .acquiring) }
}
