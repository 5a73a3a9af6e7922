//! [`RtfMeter`]: the worker's real-time factor, measured over windows of [`RTF_WINDOW`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use stemflow_engine::stream::StreamStats;

/// How often the worker's real-time factor is re-measured.
pub(super) const RTF_WINDOW: Duration = Duration::from_millis(750);

/// Measures the worker's real-time factor over windows of [`RTF_WINDOW`].
#[derive(Default)]
pub(super) struct RtfMeter {
    /// The stats being measured (a new stream starts over).
    stats: Option<Arc<StreamStats>>,
    /// Start of the current window: when, busy ns, processed frames.
    window_start: Option<(Instant, u64, u64)>,
    value: Option<f64>,
}

impl RtfMeter {
    pub(super) fn update(&mut self, stats: &Arc<StreamStats>, sample_rate_hz: f32) -> Option<f64> {
        let now = Instant::now();
        let sample = (stats.worker_busy_ns(), stats.worker_processed_frames());
        if !self.stats.as_ref().is_some_and(|s| Arc::ptr_eq(s, stats)) {
            self.stats = Some(stats.clone());
            self.window_start = Some((now, sample.0, sample.1));
            self.value = rtf(sample.0, sample.1, sample_rate_hz);
        }
        if let Some((started, busy_ns, frames)) = self.window_start {
            if now.duration_since(started) >= RTF_WINDOW {
                if let Some(value) = rtf(sample.0 - busy_ns, sample.1 - frames, sample_rate_hz) {
                    self.value = Some(value);
                }
                self.window_start = Some((now, sample.0, sample.1));
            }
        }
        self.value
    }
}

/// Busy time over audio time; `None` without audio.
pub(super) fn rtf(busy_ns: u64, frames: u64, sample_rate_hz: f32) -> Option<f64> {
    (frames > 0 && sample_rate_hz > 0.0)
        .then(|| (busy_ns as f64 * 1e-9) / (frames as f64 / sample_rate_hz as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtf_is_busy_time_over_audio_time() {
        assert_eq!(rtf(0, 0, 48_000.0), None);
        let value = rtf(250_000_000, 48_000, 48_000.0).unwrap();
        assert!((value - 0.25).abs() < 1e-9, "{value}");
    }
}
