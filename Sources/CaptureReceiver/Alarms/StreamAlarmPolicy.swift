#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which alarm conditions each stream gets: the receiver's own (`--alarm-*`, or none with
/// `--no-alarms`), changed for the streams whose names match a pattern (`--alarm-override`), each
/// matching override in the order given.
public struct StreamAlarmPolicy: Sendable, Equatable {
    /// The conditions of every stream that no override changes.
    public var conditions: StreamAlarmConditions
    /// Whether streams have alarms unless an override says otherwise.
    public var enabled: Bool
    /// The overrides, applied in order to each stream whose name matches.
    public var overrides: [StreamAlarmOverride]

    public init(conditions: StreamAlarmConditions = StreamAlarmConditions(), enabled: Bool = true, overrides: [StreamAlarmOverride] = []) {
        self.conditions = conditions
        self.enabled = enabled
        self.overrides = overrides
    }

    /// No alarms for any stream.
    public static let off = StreamAlarmPolicy(enabled: false)

    /// The conditions of the stream named `name`; nil when it has no alarms.
    public func conditions(forStream name: String) -> StreamAlarmConditions? {
        var result: StreamAlarmConditions? = enabled ? conditions : nil
        for override in overrides where override.matches(name) {
            for change in override.changes {
                switch change {
                case .off: result = nil
                case .on: result = result ?? conditions
                case .set(let setting): if var changed = result { setting.apply(to: &changed); result = changed }
                }
            }
        }
        return result
    }
}

/// Alarm conditions for the streams whose names match a shell pattern (`fnmatch`: `*`, `?`,
/// `[...]`), as `--alarm-override PATTERN:CHANGE,...` gives them.
public struct StreamAlarmOverride: Sendable, Equatable {
    /// One change an override makes.
    public enum Change: Sendable, Equatable {
        /// No alarms for these streams.
        case off
        /// Alarms for these streams, also under `--no-alarms`.
        case on
        /// One condition changed.
        case set(Setting)
    }

    /// A condition's new value.
    public enum Setting: Sendable, Equatable {
        case silenceDBFS(Double)
        /// `StreamAlarmConditions.silenceDuration`.
        case silenceDuration(Duration)
        case clippedBuffers(Int)
        /// `StreamAlarmConditions.clippingWindow`.
        case clippingWindow(Duration)
        case loudnessMinimumLUFS(Double)
        case loudnessMaximumLUFS(Double)
        /// `StreamAlarmConditions.loudnessDuration`.
        case loudnessDuration(Duration)
        /// `StreamAlarmConditions.linkDownDuration`.
        case linkDownDuration(Duration)
        /// `StreamAlarmConditions.noAudioDuration`.
        case noAudioDuration(Duration)

        func apply(to conditions: inout StreamAlarmConditions) {
            switch self {
            case .silenceDBFS(let value): conditions.silenceBelowDBFS = value
            case .silenceDuration(let value): conditions.silenceDuration = value
            case .clippedBuffers(let value): conditions.clippedBuffers = value
            case .clippingWindow(let value): conditions.clippingWindow = value
            case .loudnessMinimumLUFS(let value):
                conditions.loudnessRangeLUFS = min(value, conditions.loudnessRangeLUFS.upperBound)...conditions.loudnessRangeLUFS.upperBound
            case .loudnessMaximumLUFS(let value):
                conditions.loudnessRangeLUFS = conditions.loudnessRangeLUFS.lowerBound...max(value, conditions.loudnessRangeLUFS.lowerBound)
            case .loudnessDuration(let value): conditions.loudnessDuration = value
            case .linkDownDuration(let value): conditions.linkDownDuration = value
            case .noAudioDuration(let value): conditions.noAudioDuration = value
            }
        }
    }

    /// The stream names it applies to, a shell pattern.
    public var pattern: String
    /// What it changes, in order.
    public var changes: [Change]

    public init(pattern: String, changes: [Change]) {
        self.pattern = pattern
        self.changes = changes
    }

    /// Whether the stream named `name` matches the pattern.
    public func matches(_ name: String) -> Bool {
        fnmatch(pattern, name, 0) == 0
    }
}
