//! [`StreamStats`]: what a stream counts and reports, for the editor, the CLI and tests.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::runtime::devices::ActiveDevice;
use crate::separator::SeparatorError;

/// Counters and status shared by the handle, the worker and whoever displays them.
///
/// The counters are relaxed atomics: statistics, not synchronisation; the audio thread only
/// ever adds to them. The status (texts and the active device) sits behind one mutex that only
/// the worker thread and readers (GUI, CLI) take — never the audio thread.
#[derive(Debug, Default)]
pub struct StreamStats {
    underrun_blocks: AtomicU64,
    underrun_frames: AtomicU64,
    input_overflows: AtomicU64,
    non_finite_input_samples: AtomicU64,
    separator_failures: AtomicU64,
    device_switches: AtomicU64,
    worker_busy_ns: AtomicU64,
    worker_processed_frames: AtomicU64,
    status: Mutex<StreamStatus>,
}

/// The status part of [`StreamStats`]: what went wrong and where the model runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamStatus {
    /// Why the worker thread stopped, if it died.
    pub worker_error: Option<String>,
    /// The first hop the separator could not separate (its stems went to `Other`), if any.
    pub separator_error: Option<SeparatorError>,
    /// The device the model runs on; `None` for DSP separators.
    pub active_device: Option<ActiveDevice>,
    /// The last device switch that failed (the previous device kept running).
    pub device_warning: Option<String>,
}

impl StreamStats {
    /// Blocks in which at least one frame was not ready in time (real-time mode). Realtime-safe.
    pub fn underrun_blocks(&self) -> u64 {
        self.underrun_blocks.load(Ordering::Relaxed)
    }

    /// Frames that were output as dry fallback because they were not ready in time.
    /// Realtime-safe.
    pub fn underrun_frames(&self) -> u64 {
        self.underrun_frames.load(Ordering::Relaxed)
    }

    /// Times the input ring was full (the worker stalled) and the stream restarted itself.
    /// Realtime-safe.
    pub fn input_overflows(&self) -> u64 {
        self.input_overflows.load(Ordering::Relaxed)
    }

    /// NaN or infinite input samples that were replaced with silence. Realtime-safe.
    pub fn non_finite_input_samples(&self) -> u64 {
        self.non_finite_input_samples.load(Ordering::Relaxed)
    }

    /// Hops the separator failed to separate (their stems went to `Other`). Realtime-safe.
    pub fn separator_failures(&self) -> u64 {
        self.separator_failures.load(Ordering::Relaxed)
    }

    /// How many device switches the separator reported.
    pub fn device_switches(&self) -> u64 {
        self.device_switches.load(Ordering::Relaxed)
    }

    /// Nanoseconds the worker spent separating since the stream started. With
    /// [`StreamStats::worker_processed_frames`] this gives the worker's real-time factor: busy
    /// time over audio time (below 1 keeps up). Realtime-safe.
    pub fn worker_busy_ns(&self) -> u64 {
        self.worker_busy_ns.load(Ordering::Relaxed)
    }

    /// Input frames (at the host rate) the worker has separated since the stream started.
    /// Realtime-safe.
    pub fn worker_processed_frames(&self) -> u64 {
        self.worker_processed_frames.load(Ordering::Relaxed)
    }

    /// A copy of the status. Not realtime-safe: locks and clones.
    pub fn status(&self) -> StreamStatus {
        self.status.lock().clone()
    }

    /// Why the worker stopped, if it died. Not realtime-safe: locks and clones.
    pub fn worker_error(&self) -> Option<String> {
        self.status.lock().worker_error.clone()
    }

    /// The first separator failure, if any. Not realtime-safe: locks and clones.
    pub fn separator_error(&self) -> Option<SeparatorError> {
        self.status.lock().separator_error.clone()
    }

    /// The device the model runs on, `None` for DSP separators. Not realtime-safe: locks.
    pub fn active_device(&self) -> Option<ActiveDevice> {
        self.status.lock().active_device.clone()
    }

    /// The last device switch that failed (the previous device kept running). Not
    /// realtime-safe: locks.
    pub fn device_warning(&self) -> Option<String> {
        self.status.lock().device_warning.clone()
    }

    pub(super) fn add_underrun(&self, missing_frames: u64) {
        self.underrun_blocks.fetch_add(1, Ordering::Relaxed);
        self.underrun_frames
            .fetch_add(missing_frames, Ordering::Relaxed);
    }

    pub(super) fn add_input_overflow(&self) {
        self.input_overflows.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn add_non_finite_input(&self, num_samples: u64) {
        self.non_finite_input_samples
            .fetch_add(num_samples, Ordering::Relaxed);
    }

    pub(super) fn add_work(&self, busy_ns: u64, frames: u64) {
        self.worker_busy_ns.fetch_add(busy_ns, Ordering::Relaxed);
        self.worker_processed_frames
            .fetch_add(frames, Ordering::Relaxed);
    }

    /// Counts a failed hop and keeps the first error. Worker thread only.
    pub(super) fn record_separator_failure(&self, error: SeparatorError) {
        if self.separator_failures.fetch_add(1, Ordering::Relaxed) == 0 {
            log::error!("Stemflow: {error}; its stems go to Other until it recovers");
        }
        let mut status = self.status.lock();
        if status.separator_error.is_none() {
            status.separator_error = Some(error);
        }
    }

    pub(super) fn set_worker_error(&self, message: String) {
        self.status.lock().worker_error = Some(message);
    }

    pub(super) fn set_active_device(&self, device: Option<ActiveDevice>) {
        self.status.lock().active_device = device;
    }

    /// A switch to `device` happened. Worker thread only.
    pub(super) fn record_device_switch(&self, device: ActiveDevice) {
        let mut status = self.status.lock();
        status.active_device = Some(device);
        status.device_warning = None;
        self.device_switches.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn set_device_warning(&self, warning: String) {
        self.status.lock().device_warning = Some(warning);
    }
}
