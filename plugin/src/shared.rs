//! What the plugin's threads share with the editor: the meters the audio thread fills while the
//! editor is open, the running stream (the worker and its statistics), and a separator the editor
//! loaded ahead of a restart.
//!
//! Who touches what:
//! - the audio thread only reads [`PluginShared::is_editor_open`] and writes [`StemMeters`], both
//!   lock-free atomics;
//! - the main thread (`activate`/`deactivate`) installs and removes the [`RunningStream`];
//! - the GUI thread reads the stream's statistics and sends it device changes, under a short lock
//!   the audio thread never takes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use parking_lot::Mutex;
use std::sync::Arc;
use stemflow_engine::choice::SeparatorChoice;
use stemflow_engine::runtime::devices::DeviceChoice;
use stemflow_engine::separator::Separator;
use stemflow_engine::stream::{StemStreamController, StreamStats};
use stemflow_engine::NUM_STEMS;

/// Per-stem peak levels from the audio thread to the editor.
///
/// Each slot holds the largest absolute sample since the editor last read it, as `f32` bits. For
/// non-negative floats the bit patterns order like the values, so the audio thread merges a
/// block's peak with one `fetch_max` and no peak is lost between two GUI frames.
#[derive(Debug, Default)]
pub struct StemMeters {
    peaks: [AtomicU32; NUM_STEMS],
}

impl StemMeters {
    /// Merges a block's peak (linear, ≥ 0) into `stem_index`'s slot. NaN and negative values are
    /// ignored. Realtime-safe: one relaxed atomic, no lock, no allocation.
    #[inline]
    pub fn record(&self, stem_index: usize, peak: f32) {
        if peak > 0.0 && peak.is_finite() {
            self.peaks[stem_index].fetch_max(peak.to_bits(), Ordering::Relaxed);
        }
    }

    /// The peaks since the last call, clearing them. Realtime-safe, but meant for the GUI.
    pub fn take(&self) -> [f32; NUM_STEMS] {
        std::array::from_fn(|i| f32::from_bits(self.peaks[i].swap(0, Ordering::Relaxed)))
    }
}

/// The stream that runs while the plugin is active.
pub struct RunningStream {
    /// Owner of the worker thread. Dropping it joins the thread, so it is only dropped on the
    /// main thread, outside the lock.
    pub controller: StemStreamController,
    /// The host's sample rate.
    pub sample_rate_hz: f32,
    /// The separator's display name.
    pub separator_name: String,
    /// Whether the separator runs a model (and so a device matters).
    pub is_model: bool,
}

/// A separator the editor built and validated, waiting for the restart that installs it.
pub struct PreparedSeparator {
    /// What it was built for.
    pub choice: SeparatorChoice,
    /// The device choice it was built for.
    pub device: DeviceChoice,
    /// The separator.
    pub separator: Box<dyn Separator>,
}

/// What a snapshot of the running stream shows the editor.
#[derive(Debug, Clone)]
pub struct StreamSnapshot {
    /// The stream's fixed latency.
    pub latency_samples: usize,
    /// The host's sample rate.
    pub sample_rate_hz: f32,
    /// The separator's display name.
    pub separator_name: String,
    /// Whether the separator runs a model.
    pub is_model: bool,
    /// Counters and device state.
    pub stats: Arc<StreamStats>,
}

/// One per plugin instance, created in `Default`, shared by the plugin and its editor.
#[derive(Default)]
pub struct PluginShared {
    /// Set while an editor window is open; `process()` only measures meters then. Written by the
    /// editor's open guard, read by the audio thread (relaxed: a late frame of meters is harmless).
    editor_open: AtomicBool,
    /// Peaks per stem, filled by `process()` while the editor is open.
    pub meters: StemMeters,
    /// The running stream. Set in `activate`, taken in `deactivate` (main thread), read by the
    /// GUI. The audio thread never locks it.
    stream: Mutex<Option<RunningStream>>,
    /// A separator loaded by the editor, used by the next `activate` if it matches the saved
    /// choice (so a model is not loaded twice).
    prepared: Mutex<Option<PreparedSeparator>>,
}

impl PluginShared {
    /// Whether an editor window is open. Realtime-safe.
    #[inline]
    pub fn is_editor_open(&self) -> bool {
        self.editor_open.load(Ordering::Relaxed)
    }

    /// Marks the editor open or closed; opening clears stale meter peaks.
    pub fn set_editor_open(&self, is_open: bool) {
        if is_open {
            self.meters.take();
        }
        self.editor_open.store(is_open, Ordering::Relaxed);
    }

    /// Installs a new stream and returns the previous one, which the caller drops outside the
    /// lock. Not realtime-safe.
    pub fn replace_stream(&self, stream: Option<RunningStream>) -> Option<RunningStream> {
        std::mem::replace(&mut *self.stream.lock(), stream)
    }

    /// A view of the running stream for the editor. Not realtime-safe: locks briefly.
    pub fn stream_snapshot(&self) -> Option<StreamSnapshot> {
        self.stream.lock().as_ref().map(|stream| StreamSnapshot {
            latency_samples: stream.controller.latency_samples(),
            sample_rate_hz: stream.sample_rate_hz,
            separator_name: stream.separator_name.clone(),
            is_model: stream.is_model,
            stats: stream.controller.stats().clone(),
        })
    }

    /// Asks the running worker, if any, to move its model to `choice`. Returns at once.
    /// Not realtime-safe: locks briefly and sends a message.
    pub fn set_device(&self, choice: DeviceChoice) {
        if let Some(stream) = self.stream.lock().as_ref() {
            stream.controller.set_device(choice);
        }
    }

    /// Keeps a separator for the next activation. Returns the one it replaces, for the caller
    /// to drop. Not realtime-safe.
    pub fn set_prepared(&self, prepared: PreparedSeparator) -> Option<PreparedSeparator> {
        self.prepared.lock().replace(prepared)
    }

    /// Takes the prepared separator if it was built for this separator and device.
    /// Not realtime-safe.
    pub fn take_prepared(
        &self,
        separator: &SeparatorChoice,
        device: DeviceChoice,
    ) -> Option<Box<dyn Separator>> {
        let prepared = self.prepared.lock().take()?;
        (prepared.choice == *separator && prepared.device == device).then_some(prepared.separator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_keep_the_largest_peak_until_read() {
        let meters = StemMeters::default();
        meters.record(0, 0.25);
        meters.record(0, 0.5);
        meters.record(0, 0.125);
        meters.record(2, 1.5);
        meters.record(1, f32::NAN);
        meters.record(1, -3.0);
        assert_eq!(meters.take(), [0.5, 0.0, 1.5, 0.0, 0.0, 0.0]);
        assert_eq!(meters.take(), [0.0; NUM_STEMS]);
    }

    #[test]
    fn opening_the_editor_clears_stale_peaks() {
        let shared = PluginShared::default();
        shared.meters.record(3, 0.9);
        assert!(!shared.is_editor_open());
        shared.set_editor_open(true);
        assert!(shared.is_editor_open());
        assert_eq!(shared.meters.take(), [0.0; NUM_STEMS]);
        shared.set_editor_open(false);
        assert!(!shared.is_editor_open());
    }

    #[test]
    fn a_prepared_separator_is_only_used_for_its_own_choice() {
        let shared = PluginShared::default();
        let prepare = || PreparedSeparator {
            choice: SeparatorChoice::Builtin,
            device: DeviceChoice::Auto,
            separator: Box::new(stemflow_engine::builtin::BuiltinSeparator::new()),
        };
        shared.set_prepared(prepare());
        assert!(shared
            .take_prepared(
                &SeparatorChoice::Model("/x.onnx".into()),
                DeviceChoice::Auto
            )
            .is_none());
        // A mismatch consumes it: it was for a choice that is no longer wanted.
        assert!(shared
            .take_prepared(&SeparatorChoice::Builtin, DeviceChoice::Auto)
            .is_none());
        shared.set_prepared(prepare());
        assert!(shared
            .take_prepared(&SeparatorChoice::Builtin, DeviceChoice::Auto)
            .is_some());
    }
}
