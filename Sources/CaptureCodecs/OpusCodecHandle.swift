import COpus

/// Owns one libopus encoder: a plain `OpusEncoder` for 1 or 2 channels, or a multistream surround
/// encoder (mapping family 1) for 3 to 8, and hides which behind one set of calls. Destroys it on
/// deinit.
final class OpusCodecHandle {
    private enum Encoder {
        case single(OpaquePointer)
        case multistream(OpaquePointer)
    }

    private let encoder: Encoder
    /// The RFC 7845 channel mapping family: 0 for mono and stereo, 1 for 3 to 8 channels.
    let mappingFamily: UInt8
    /// Opus streams in each packet (1 unless multistream).
    let streamCount: Int
    /// How many of those streams are coupled (stereo) streams.
    let coupledStreamCount: Int
    /// For each input channel, the decoded channel it comes from (RFC 7845 channel mapping table);
    /// empty for mapping family 0.
    let channelMapping: [UInt8]

    /// Creates an encoder for `channels` channels at `sampleRate` Hz.
    init(sampleRate: Int, channels: Int, application: OpusApplication) throws(EncoderError) {
        var error: Int32 = OPUS_OK
        let applicationValue = Self.applicationValue(application)
        if channels <= 2 {
            guard let pointer = opus_encoder_create(Int32(sampleRate), Int32(channels), applicationValue, &error),
                  error == OPUS_OK else {
                throw .codecFailed("libopus could not create an encoder (\(sampleRate) Hz, \(channels) ch): \(Self.message(error))")
            }
            encoder = .single(pointer)
            mappingFamily = 0
            streamCount = 1
            coupledStreamCount = channels - 1
            channelMapping = []
        } else {
            var streams: Int32 = 0
            var coupled: Int32 = 0
            var mapping = [UInt8](repeating: 0, count: channels)
            let pointer = opus_multistream_surround_encoder_create(
                Int32(sampleRate), Int32(channels), 1, &streams, &coupled, &mapping, applicationValue, &error
            )
            guard let pointer, error == OPUS_OK else {
                throw .codecFailed(
                    "libopus could not create a surround encoder (\(sampleRate) Hz, \(channels) ch, mapping family 1): \(Self.message(error))"
                )
            }
            encoder = .multistream(pointer)
            mappingFamily = 1
            streamCount = Int(streams)
            coupledStreamCount = Int(coupled)
            channelMapping = mapping
        }
    }

    deinit {
        switch encoder {
        case .single(let pointer): opus_encoder_destroy(pointer)
        case .multistream(let pointer): opus_multistream_encoder_destroy(pointer)
        }
    }

    /// Applies an integer `OPUS_SET_*` request.
    func set(_ request: Int32, _ value: Int32, what: String) throws(EncoderError) {
        let status: Int32
        switch encoder {
        case .single(let pointer): status = capture_opus_set_int(pointer, request, value)
        case .multistream(let pointer): status = capture_opus_ms_set_int(pointer, request, value)
        }
        guard status == OPUS_OK else {
            throw .codecFailed("libopus refused \(what) = \(value): \(Self.message(status))")
        }
    }

    /// Reads an integer `OPUS_GET_*` request.
    func get(_ request: Int32, what: String) throws(EncoderError) -> Int32 {
        var value: Int32 = 0
        let status: Int32
        switch encoder {
        case .single(let pointer): status = capture_opus_get_int(pointer, request, &value)
        case .multistream(let pointer): status = capture_opus_ms_get_int(pointer, request, &value)
        }
        guard status == OPUS_OK else {
            throw .codecFailed("libopus could not report \(what): \(Self.message(status))")
        }
        return value
    }

    /// Encodes one frame of interleaved float samples; returns the packet size or a negative libopus error.
    func encode(
        float samples: UnsafePointer<Float>, frameSize: Int, into packet: UnsafeMutablePointer<UInt8>, capacity: Int
    ) -> Int32 {
        switch encoder {
        case .single(let pointer):
            return opus_encode_float(pointer, samples, Int32(frameSize), packet, Int32(capacity))
        case .multistream(let pointer):
            return opus_multistream_encode_float(pointer, samples, Int32(frameSize), packet, Int32(capacity))
        }
    }

    /// Encodes one frame of interleaved 16-bit samples; returns the packet size or a negative libopus error.
    func encode(
        int16 samples: UnsafePointer<Int16>, frameSize: Int, into packet: UnsafeMutablePointer<UInt8>, capacity: Int
    ) -> Int32 {
        switch encoder {
        case .single(let pointer):
            return opus_encode(pointer, samples, Int32(frameSize), packet, Int32(capacity))
        case .multistream(let pointer):
            return opus_multistream_encode(pointer, samples, Int32(frameSize), packet, Int32(capacity))
        }
    }

    /// libopus's text for an error code.
    static func message(_ code: Int32) -> String {
        guard let text = opus_strerror(code) else { return "error \(code)" }
        return String(cString: text) + " (\(code))"
    }

    private static func applicationValue(_ application: OpusApplication) -> Int32 {
        switch application {
        case .audio: return OPUS_APPLICATION_AUDIO
        case .voip: return OPUS_APPLICATION_VOIP
        case .lowdelay: return OPUS_APPLICATION_RESTRICTED_LOWDELAY
        }
    }
}
