import CALSA
#if canImport(Glibc)
import Glibc
#endif

/// An ALSA PCM that can capture, as `arecord -L` lists it.
public struct ALSADevice: Hashable, Sendable, CustomStringConvertible {
    /// The name to pass as the device (for example `default`, `hw:CARD=PCH,DEV=0`).
    public var name: String
    /// The human description from the configuration's hint; its lines joined by " / ".
    /// Empty when the PCM has none.
    public var description: String

    /// Creates a device entry.
    public init(name: String, description: String) {
        self.name = name
        self.description = description
    }
}

/// Lists the ALSA PCMs that can capture.
public enum ALSADeviceList {
    /// The capture PCMs from the ALSA configuration's name hints (`snd_device_name_hint`, as
    /// `arecord -L`): every PCM whose direction (IOID) is unset or "Input". Empty if ALSA has no
    /// configuration to read.
    public static func captureDevices() -> [ALSADevice] {
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) == 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }

        var devices: [ALSADevice] = []
        var index = 0
        while let hint = hints[index] {
            index += 1
            guard let name = hintValue(hint, "NAME") else { continue }
            let direction = hintValue(hint, "IOID")
            guard direction == nil || direction == "Input" else { continue }
            let description = (hintValue(hint, "DESC") ?? "")
                .split(separator: "\n", omittingEmptySubsequences: true)
                .joined(separator: " / ")
            devices.append(ALSADevice(name: name, description: description))
        }
        return devices
    }

    private static func hintValue(_ hint: UnsafeMutableRawPointer, _ key: String) -> String? {
        guard let value = snd_device_name_get_hint(hint, key) else { return nil }
        defer { free(value) }
        return String(cString: value)
    }
}
