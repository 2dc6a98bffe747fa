import CaptureMetrics
import CaptureReceiver

/// The receiver's metrics, published by the console: the recording core counts through
/// `ReceiverMetricsRecorder`, which `ReceiverMetrics` implements as it is. Wired here, where both
/// modules meet, so that neither depends on the other.
extension ReceiverMetrics: ReceiverMetricsRecorder {}
