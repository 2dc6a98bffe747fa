import CaptureCore
import Foundation
import Synchronization

/// Counters the hub's executor updates and anyone may read.
final class ListenCounters: Sendable {
    let listeners = Atomic<Int>(0)
    let activeEncoders = Atomic<Int>(0)
    let encodersCreated = Atomic<Int>(0)
    let buffersProcessed = Atomic<Int>(0)
    let listenersDropped = Atomic<Int>(0)

    var snapshot: ListenHubStatistics {
        ListenHubStatistics(
            listeners: listeners.load(ordering: .relaxed), activeEncoders: activeEncoders.load(ordering: .relaxed),
            encodersCreated: encodersCreated.load(ordering: .relaxed), buffersProcessed: buffersProcessed.load(ordering: .relaxed),
            listenersDropped: listenersDropped.load(ordering: .relaxed)
        )
    }
}

/// Where a stream's Opus packets come from.
enum ListenSource: Sendable {
    /// An Opus stream: its packets are remuxed as they are.
    case opus(ListenOpusHead, OpusPacketSplitter)
    /// A PCM stream: encoded while anybody listens.
    case pcm(StreamFormat)
}

/// The hub's state and work, confined to the hub's serial dispatch queue: every method runs on it,
/// which is what makes the unchecked sendability sound.
///
/// Sendability (`@unchecked Sendable`): the listeners, the pre-roll, the encoder and `finished` are
/// touched only on its `ListenHub`'s serial queue (`capture.listen`), which runs every method; the
/// counters are atomics and the rest is immutable.
final class ListenPipeline: @unchecked Sendable {
    private struct Attached {
        let id: Int
        let channel: ListenerChannel
        let muxer: OggOpusMuxer
    }

    private let source: ListenSource
    private let limits: ListenLimits
    private let counters: ListenCounters
    private var listeners: [Attached] = []
    private var preRoll: PreRoll
    private var encoder: ListenEncoder?
    private var finished = false

    init(source: ListenSource, limits: ListenLimits, counters: ListenCounters) {
        self.source = source
        self.limits = limits
        self.counters = counters
        self.preRoll = PreRoll(minimumSamples: limits.preRollSamples)
    }

    /// Attaches a listener: its headers and the pre-roll go out at once.
    func add(id: Int, channel: ListenerChannel) {
        guard !finished else {
            channel.end(.streamEnded)
            counters.listeners.subtract(1, ordering: .relaxed)
            return
        }
        let head: ListenOpusHead
        switch source {
        case .opus(let streamHead, _):
            head = streamHead
        case .pcm(let format):
            if encoder == nil {
                do {
                    encoder = try ListenEncoder(format: format, bitratePerChannel: limits.encoderBitratePerChannel)
                    counters.encodersCreated.add(1, ordering: .relaxed)
                    counters.activeEncoders.store(1, ordering: .relaxed)
                } catch {
                    channel.end(.failed("\(error)"))
                    counters.listeners.subtract(1, ordering: .relaxed)
                    return
                }
            }
            guard let encoder else { return }
            head = encoder.opusHead
        }
        let muxer = OggOpusMuxer(
            identificationHeader: head.withPreSkip(atLeast: limits.preRollSamples), serialNumber: Int32.random(in: 1...Int32.max)
        )
        var bytes = muxer.headerPages()
        for packet in preRoll.packets { muxer.append(packet: packet.bytes, samples: packet.samples) }
        bytes += muxer.takePages()
        listeners.append(Attached(id: id, channel: channel, muxer: muxer))
        if !channel.deliver(bytes, samples: preRoll.samples) { remove(id: id) }
    }

    /// Detaches a listener (it cancelled); releases the encoder with the last one.
    func remove(id: Int) {
        guard let index = listeners.firstIndex(where: { $0.id == id }) else { return }
        listeners.remove(at: index)
        counters.listeners.subtract(1, ordering: .relaxed)
        if listeners.isEmpty { releaseResources() }
    }

    /// Takes in one offered buffer.
    func process(payload: Data, packetSizes: [UInt32]) {
        guard !listeners.isEmpty, !finished else { return }
        counters.buffersProcessed.add(1, ordering: .relaxed)
        let packets: [ListenPacket]
        switch source {
        case .opus(_, let splitter):
            packets = splitter.split(payload, sizes: packetSizes)
        case .pcm:
            guard let encoder else { return }
            do {
                packets = try payload.withUnsafeBytes { raw throws(ListenError) in try encoder.encode(raw) }
            } catch {
                return endAll(.failed("\(error)"))
            }
        }
        distribute(packets)
    }

    /// Drops every listener because the hub's queue fell behind.
    func dropAllBehind() {
        guard !listeners.isEmpty else { return }
        counters.listenersDropped.add(listeners.count, ordering: .relaxed)
        endAll(.receiverBehind(bound: limits.queueBacklog))
    }

    /// The stream ended: flush the encoder's tail, end every listener, refuse new ones.
    func finish() {
        guard !finished else { return }
        if let encoder, !listeners.isEmpty { distribute(encoder.finish()) }
        finished = true
        endAll(.streamEnded)
    }

    private func distribute(_ packets: [ListenPacket]) {
        guard !packets.isEmpty else { return }
        var samples = 0
        for packet in packets {
            preRoll.append(packet)
            samples += packet.samples
        }
        var gone: [Int] = []
        for listener in listeners {
            for packet in packets { listener.muxer.append(packet: packet.bytes, samples: packet.samples) }
            if !listener.channel.deliver(listener.muxer.takePages(), samples: samples) {
                if case .tooSlow = listener.channel.endReason { counters.listenersDropped.add(1, ordering: .relaxed) }
                gone.append(listener.id)
            }
        }
        for id in gone { remove(id: id) }
    }

    private func endAll(_ reason: ListenEndReason) {
        let ending = listeners
        listeners.removeAll()
        counters.listeners.subtract(ending.count, ordering: .relaxed)
        for listener in ending { listener.channel.end(reason) }
        releaseResources()
    }

    private func releaseResources() {
        preRoll.removeAll()
        if encoder != nil {
            encoder = nil
            counters.activeEncoders.store(0, ordering: .relaxed)
        }
    }
}
