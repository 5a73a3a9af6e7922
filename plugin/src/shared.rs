//! What the plugin's threads share with the editor: the meters the audio thread fills while the
//! editor is open, the running stream (the worker, its statistics and the mailbox that swaps in
//! a new stream while playing), and a separator the editor loaded while the plugin was inactive.
//!
//! Who touches what:
//! - the audio thread only reads [`PluginShared::is_editor_open`] and writes [`StemMeters`], both
//!   lock-free atomics, and takes new streams from its end of the swap mailbox;
//! - the main thread (`activate`) installs the [`RunningStream`];
//! - the GUI thread reads the stream's statistics, sends it device changes and swaps in streams
//!   for newly chosen models, under a short lock the audio thread never takes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::stream::{spawn_stream, StemStreamController, StreamConfig, StreamStats};
use stemflow_engine::{LookAhead, Separator, SeparatorChoice, NUM_STEMS};

use crate::swap::StreamSwapSender;

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

/// What the editor shows of a stream's separator, read from it before the stream takes it.
#[derive(Debug, Clone)]
pub struct SeparatorFacts {
    /// The separator's display name.
    pub name: String,
    /// Whether the separator runs a model (and so a device matters).
    pub is_model: bool,
    /// Whether that model computes in float16 (made for GPUs).
    pub is_float16: bool,
    /// How many times as often as at Full its model runs.
    pub compute_factor: f64,
    /// The real-time factor measured when a shortened look-ahead was built.
    pub predicted_rtf: Option<f64>,
}

impl SeparatorFacts {
    /// Reads them from `separator`.
    pub fn of(separator: &dyn Separator) -> Self {
        let info = separator.info();
        Self {
            name: info.name().to_owned(),
            is_model: separator.device().is_some(),
            is_float16: info.is_float16(),
            compute_factor: info.compute_factor(),
            predicted_rtf: info.predicted_real_time_factor(),
        }
    }
}

/// The stream that runs while the plugin is active (and stays, idle, while it is inactive, so a
/// reactivation with the same settings reuses it).
pub struct RunningStream {
    /// Owner of the worker thread. Dropping it joins the thread, so it is only dropped outside
    /// the lock.
    pub controller: StemStreamController,
    /// What the stream was started with.
    pub config: StreamConfig,
    /// The separator it runs.
    pub choice: SeparatorChoice,
    /// The device choice it runs on (updated by device changes).
    pub device: DeviceChoice,
    /// The look-ahead its separator was built with.
    pub look_ahead: LookAhead,
    /// What the editor shows of its separator.
    pub facts: SeparatorFacts,
    /// The GUI end of the audio thread's swap mailbox.
    pub swap: StreamSwapSender,
    /// Controllers of streams sent away by a swap whose handles the audio thread has not handed
    /// back yet, oldest first. Each is dropped with its handle.
    pub retiring: VecDeque<StemStreamController>,
}

impl RunningStream {
    /// Frees the streams the audio thread has handed back, with their controllers (joining
    /// their workers). Not realtime-safe. Call without holding the shared lock where possible.
    fn take_retired(&mut self) -> Vec<Retired> {
        self.swap
            .take_returned()
            .into_iter()
            .map(|handle| Retired {
                _handle: handle,
                _controller: self.retiring.pop_front(),
            })
            .collect()
    }
}

/// A stream the audio thread no longer uses, to be dropped outside the lock.
struct Retired {
    _handle: Box<stemflow_engine::stream::StemStreamHandle>,
    _controller: Option<StemStreamController>,
}

/// Why [`PluginShared::swap_separator`] did not install a separator.
pub enum SwapRefused {
    /// The plugin is not active: the separator comes back, for the next activation.
    NotActive(Box<dyn Separator>),
    /// The stream could not start, or earlier swaps are still waiting for the audio thread.
    Failed(String),
}

/// A separator the editor built and validated while the plugin was inactive, waiting for the
/// activation that installs it.
pub struct PreparedSeparator {
    /// What it was built for.
    pub choice: SeparatorChoice,
    /// The device choice it was built for.
    pub device: DeviceChoice,
    /// The look-ahead it was built with.
    pub look_ahead: LookAhead,
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
    /// What the editor shows of its separator.
    pub facts: SeparatorFacts,
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
    /// The running stream. Set in `activate` (main thread), read and swapped by the GUI. The
    /// audio thread never locks it.
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

    /// Takes the running stream (for `activate`, which decides whether to reuse it). Not
    /// realtime-safe.
    pub fn take_stream(&self) -> Option<RunningStream> {
        self.stream.lock().take()
    }

    /// Starts a stream for `separator` with the running stream's settings and sends it to the
    /// audio thread, which installs it at its next block (with a short fade) and reports the new
    /// latency to the host; no restart needed. Returns at once. Not realtime-safe: spawns a
    /// worker thread and allocates.
    pub fn swap_separator(
        &self,
        choice: SeparatorChoice,
        device: DeviceChoice,
        look_ahead: LookAhead,
        separator: Box<dyn Separator>,
    ) -> Result<(), SwapRefused> {
        let mut retired = Vec::new();
        let result = {
            let mut guard = self.stream.lock();
            match guard.as_mut() {
                None => Err(SwapRefused::NotActive(separator)),
                Some(running) => {
                    retired.extend(running.take_retired());
                    let facts = SeparatorFacts::of(separator.as_ref());
                    match spawn_stream(separator, &running.config) {
                        Err(error) => Err(SwapRefused::Failed(error.to_string())),
                        Ok((handle, controller)) => match running.swap.send(Box::new(handle)) {
                            Err(_unsent) => Err(SwapRefused::Failed(
                                "the previous model change has not reached the audio thread \
                                 yet (is the host processing?)"
                                    .into(),
                            )),
                            Ok(()) => {
                                let old = std::mem::replace(&mut running.controller, controller);
                                running.retiring.push_back(old);
                                running.choice = choice;
                                running.device = device;
                                running.look_ahead = look_ahead;
                                running.facts = facts;
                                Ok(())
                            }
                        },
                    }
                }
            }
        };
        // Joins the replaced workers outside the lock.
        drop(retired);
        result
    }

    /// Frees streams the audio thread has handed back after a swap. Not realtime-safe.
    pub fn collect_retired(&self) {
        let retired = self
            .stream
            .lock()
            .as_mut()
            .map(RunningStream::take_retired)
            .unwrap_or_default();
        drop(retired);
    }

    /// The look-ahead of the running stream's separator, `None` when none runs. Not
    /// realtime-safe: locks briefly.
    pub fn running_look_ahead(&self) -> Option<LookAhead> {
        self.stream.lock().as_ref().map(|stream| stream.look_ahead)
    }

    /// A view of the running stream for the editor. Not realtime-safe: locks briefly.
    pub fn stream_snapshot(&self) -> Option<StreamSnapshot> {
        self.stream.lock().as_ref().map(|stream| StreamSnapshot {
            latency_samples: stream.controller.latency_samples(),
            sample_rate_hz: stream.config.host_sample_rate_hz,
            facts: stream.facts.clone(),
            stats: stream.controller.stats().clone(),
        })
    }

    /// Asks the running worker, if any, to move its model to `choice`. Returns at once.
    /// Not realtime-safe: locks briefly and sends a message.
    pub fn set_device(&self, choice: DeviceChoice) {
        if let Some(stream) = self.stream.lock().as_mut() {
            stream.device = choice;
            stream.controller.set_device(choice);
        }
    }

    /// Keeps a separator for the next activation. Returns the one it replaces, for the caller
    /// to drop. Not realtime-safe.
    pub fn set_prepared(&self, prepared: PreparedSeparator) -> Option<PreparedSeparator> {
        self.prepared.lock().replace(prepared)
    }

    /// Takes the prepared separator if it was built for this separator, device and look-ahead.
    /// Not realtime-safe.
    pub fn take_prepared(
        &self,
        separator: &SeparatorChoice,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Option<Box<dyn Separator>> {
        let prepared = self.prepared.lock().take()?;
        (prepared.choice == *separator
            && prepared.device == device
            && prepared.look_ahead == look_ahead)
            .then_some(prepared.separator)
    }

    /// [`PluginShared::take_prepared`] for the tests' usual choice: the built-in separator, the
    /// automatic device and full look-ahead.
    #[cfg(test)]
    pub(crate) fn take_prepared_builtin(&self) -> Option<Box<dyn Separator>> {
        self.take_prepared(
            &SeparatorChoice::Builtin,
            DeviceChoice::Auto,
            LookAhead::Full,
        )
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
            look_ahead: LookAhead::Full,
            separator: Box::new(stemflow_engine::BuiltinSeparator::new()),
        };
        shared.set_prepared(prepare());
        assert!(shared
            .take_prepared(
                &SeparatorChoice::Model("/x.onnx".into()),
                DeviceChoice::Auto,
                LookAhead::Full
            )
            .is_none());
        // A mismatch consumes it: it was for a choice that is no longer wanted.
        assert!(shared.take_prepared_builtin().is_none());
        shared.set_prepared(prepare());
        assert!(shared.take_prepared_builtin().is_some());
    }
}
