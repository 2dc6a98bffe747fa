import CaptureCore
import CaptureStatus
import Foundation
import XCTest

/// Measures `frames` frames of a `ToneSource` tone (the sender's own tone generator) with `LevelMeter`.
func measureTone(levelDBFS: Double, sample: PCMSampleFormat, channels: Int = 2, frames: Int = 48_000, frequency: Double = 997) throws -> LevelMeter.Reading {
    let settings = ToneSource.Settings(
        frequency: frequency, levelDBFS: levelDBFS, sampleRate: 48_000, channels: channels, sample: sample,
        duration: .seconds(Double(frames) / 48_000), paced: false
    )
    let source = try ToneSource(settings: settings)
    var meter = LevelMeter(format: source.format)
    let frameBytes = Int(source.format.bytesPerFrame)
    let framesPerRead = 4_800
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: framesPerRead * frameBytes, alignment: 16)
    defer { buffer.deallocate() }
    try source.start()
    var sampleTime: Int64 = 0
    reading: while true {
        switch try source.read(into: buffer, frameCapacity: framesPerRead) {
        case .frames(let count):
            meter.measure(CapturedBuffer(
                bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<(count * frameBytes)]),
                startTime: CaptureTimestamp(sampleTime: sampleTime, hostTime: 0), packetCount: count
            ))
            sampleTime += Int64(count)
        case .overrun, .endOfStream:
            break reading
        }
    }
    source.close()
    return meter.take()
}

/// Measures interleaved samples given per frame and channel as numbers in -1...1, written exactly as
/// a capture device's integers would be.
func measureSamples(_ frames: [[Double]], sample: PCMSampleFormat) -> LevelMeter.Reading {
    let channels = frames.first?.count ?? 1
    let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: channels, sample: sample)
    var meter = LevelMeter(format: format)
    let frameBytes = Int(format.bytesPerFrame)
    let writer = PCMSampleWriter(sample: sample)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, frames.count * frameBytes), alignment: 16)
    defer { buffer.deallocate() }
    for (index, frame) in frames.enumerated() {
        for (channel, value) in frame.enumerated() {
            writer.write(value, to: buffer, at: index * frameBytes + channel * sample.bytesPerSample)
        }
    }
    meter.measure(CapturedBuffer(
        bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<(frames.count * frameBytes)]),
        startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: frames.count
    ))
    return meter.take()
}

/// A scheduler whose time moves only when the test says so.
final class ManualStatusScheduler: StatusScheduler, @unchecked Sendable {
    private final class Entry: @unchecked Sendable {
        let period: Duration
        var due: Duration
        var cancelled = false
        let tick: @Sendable () -> Void
        init(period: Duration, due: Duration, tick: @escaping @Sendable () -> Void) {
            self.period = period
            self.due = due
            self.tick = tick
        }
    }

    private struct Handle: StatusSchedule, @unchecked Sendable {
        let entry: Entry
        let lock: NSLock
        func cancel() { lock.withLock { entry.cancelled = true } }
    }

    private let lock = NSLock()
    private var entries: [Entry] = []
    private(set) var now = Duration.zero
    private(set) var periods: [Duration] = []

    func scheduleRepeating(every period: Duration, _ tick: @escaping @Sendable () -> Void) -> any StatusSchedule {
        let entry = Entry(period: period, due: now + period, tick: tick)
        lock.withLock {
            entries.append(entry)
            periods.append(period)
        }
        return Handle(entry: entry, lock: lock)
    }

    var activeSchedules: Int { lock.withLock { entries.filter { !$0.cancelled }.count } }

    /// Moves time forward, firing every tick that falls due, in time order.
    func advance(by amount: Duration) {
        let end = now + amount
        while true {
            let next: Entry? = lock.withLock {
                entries.filter { !$0.cancelled && $0.due <= end }.min { $0.due < $1.due }
            }
            guard let next else { break }
            lock.withLock {
                now = next.due
                next.due = next.due + next.period
            }
            next.tick()
        }
        lock.withLock { now = end }
    }
}

/// Collects what a reporter writes, with the time of each write.
final class OutputRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var writes: [(text: String, at: Date)] = []

    func record(_ text: String) { lock.withLock { writes.append((text, Date())) } }
    var texts: [String] { lock.withLock { writes.map(\.text) } }
    var times: [Date] { lock.withLock { writes.map(\.at) } }
}


/// The value of `key` in a plain `key=value` status line.
func plainValue(_ key: String, in line: String) -> String? {
    line.split(separator: " ").first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
}
