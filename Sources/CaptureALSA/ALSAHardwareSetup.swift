import CALSA
import CaptureCore

/// What the caller asks of a device: the format, the period size and the number of periods in the
/// ring buffer.
struct ALSARequest: Sendable {
    var deviceName: String
    var format: StreamFormat
    var sample: PCMSampleFormat
    var periodFrames: Int
    var bufferCount: Int
}

/// Sets up an open PCM for interleaved capture as close to the request as the device allows, and
/// reads back what it really gives.
enum ALSAHardwareSetup {
    /// Applies hardware and software parameters to `pcm` and returns the negotiation.
    static func configure(_ pcm: OpaquePointer, request: ALSARequest) throws(CaptureError) -> ALSANegotiation {
        var hardwareParameters: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hardwareParameters) == 0, let hw = hardwareParameters else {
            throw .openFailed("out of memory while setting up ALSA capture device '\(request.deviceName)'")
        }
        defer { snd_pcm_hw_params_free(hw) }
        let device = request.deviceName

        try check(snd_pcm_hw_params_any(pcm, hw), device: device, step: "reading its capabilities")
        let accessResult = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        guard accessResult == 0 else {
            throw .unsupportedFormat("ALSA capture device '\(device)' cannot deliver interleaved audio (\(ALSAErrorText.describe(accessResult))). Use a `plughw:` device, which converts.")
        }

        let supported = PCMSampleFormat.allCases.filter {
            snd_pcm_hw_params_test_format(pcm, hw, ALSASampleFormat.alsaFormat(of: $0)) == 0
        }
        guard let chosenSample = ALSASampleFormat.preferenceOrder(for: request.sample).first(where: supported.contains) else {
            throw .unsupportedFormat("ALSA capture device '\(device)' offers none of the sample formats s16, s24 (3 bytes), s32, f32. Use a `plughw:` device, which converts.")
        }
        try check(snd_pcm_hw_params_set_format(pcm, hw, ALSASampleFormat.alsaFormat(of: chosenSample)),
                  device: device, step: "setting sample format \(chosenSample)")

        var channels = UInt32(request.format.channelsPerFrame)
        try check(snd_pcm_hw_params_set_channels_near(pcm, hw, &channels), device: device, step: "setting \(channels) channels")

        var rate = UInt32(request.format.sampleRate.rounded())
        var direction: Int32 = 0
        try check(snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, &direction), device: device, step: "setting the rate near \(rate) Hz")

        var periodFrames = snd_pcm_uframes_t(request.periodFrames)
        direction = 0
        try check(snd_pcm_hw_params_set_period_size_near(pcm, hw, &periodFrames, &direction),
                  device: device, step: "setting the period near \(request.periodFrames) frames")

        let requestedBufferFrames = request.periodFrames * request.bufferCount
        var bufferFrames = snd_pcm_uframes_t(requestedBufferFrames)
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &bufferFrames),
                  device: device, step: "setting the buffer near \(requestedBufferFrames) frames")

        try check(snd_pcm_hw_params(pcm, hw), device: device, step: "applying the hardware parameters")

        let actual = try readBack(hw, device: device)
        try configureSoftware(pcm, device: device, periodFrames: actual.periodFrames)

        return ALSANegotiation(
            deviceName: device, requested: request.format, actual: actual.format,
            requestedPeriodFrames: request.periodFrames, periodFrames: actual.periodFrames,
            requestedBufferFrames: requestedBufferFrames, bufferFrames: actual.bufferFrames,
            supportedSampleFormats: supported
        )
    }

    /// Reads the installed parameters: what the device really gives.
    private static func readBack(_ hw: OpaquePointer, device: String) throws(CaptureError) -> (format: StreamFormat, periodFrames: Int, bufferFrames: Int) {
        var alsaFormat = SND_PCM_FORMAT_UNKNOWN
        var channels: UInt32 = 0
        var rate: UInt32 = 0
        var direction: Int32 = 0
        var periodFrames: snd_pcm_uframes_t = 0
        var bufferFrames: snd_pcm_uframes_t = 0
        try check(snd_pcm_hw_params_get_format(hw, &alsaFormat), device: device, step: "reading the sample format back")
        try check(snd_pcm_hw_params_get_channels(hw, &channels), device: device, step: "reading the channel count back")
        try check(snd_pcm_hw_params_get_rate(hw, &rate, &direction), device: device, step: "reading the rate back")
        try check(snd_pcm_hw_params_get_period_size(hw, &periodFrames, &direction), device: device, step: "reading the period size back")
        try check(snd_pcm_hw_params_get_buffer_size(hw, &bufferFrames), device: device, step: "reading the buffer size back")

        guard let sample = ALSASampleFormat.sampleFormat(of: alsaFormat) else {
            throw .unsupportedFormat("ALSA capture device '\(device)' chose a sample format capture-send does not carry (\(String(cString: snd_pcm_format_name(alsaFormat)))). Use a `plughw:` device, which converts.")
        }
        let format = StreamFormat.linearPCM(sampleRate: Double(rate), channels: Int(channels), sample: sample)
        do {
            try format.validate()
        } catch {
            throw .unsupportedFormat("ALSA capture device '\(device)' offers \(format), which capture-send cannot carry: \(error). Ask for another rate or channel count, or use a `plughw:` device.")
        }
        return (format, Int(periodFrames), Int(bufferFrames))
    }

    /// Start on the first read (threshold 1), wake the reader once a period is ready, and take
    /// status timestamps from the monotonic clock so overrun stalls can be measured.
    private static func configureSoftware(_ pcm: OpaquePointer, device: String, periodFrames: Int) throws(CaptureError) {
        var softwareParameters: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&softwareParameters) == 0, let sw = softwareParameters else {
            throw .openFailed("out of memory while setting up ALSA capture device '\(device)'")
        }
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), device: device, step: "reading the software parameters")
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, 1), device: device, step: "setting the start threshold")
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(periodFrames)), device: device, step: "setting the wake-up size")
        // Best effort: a plugin that keeps no timestamps leaves the overrun estimate at one buffer.
        _ = snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC)
        try check(snd_pcm_sw_params(pcm, sw), device: device, step: "applying the software parameters")
    }

    private static func check(_ result: Int32, device: String, step: String) throws(CaptureError) {
        if result < 0 { throw ALSAErrorText.setupFailed(device: device, step: step, code: result) }
    }
}
