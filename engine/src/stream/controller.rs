//! [`StemStreamController`]: the main thread's owner of a stream's worker thread. Not to be
//! confused with the worker itself, which runs on its own thread.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use super::shared::Shared;
use super::stats::StreamStats;
use super::worker::WorkerCommand;
use crate::runtime::devices::DeviceChoice;
use crate::separator::{Separator, SeparatorRequest};

/// Owns the worker thread: sends it requests, shows its statistics, and stops and joins it when
/// dropped. Not realtime-safe: lives on the main thread (the plugin keeps it next to, not inside,
/// the audio state).
pub struct StemStreamController {
    pub(super) shared: Arc<Shared>,
    /// The thread; it returns the separator when it stops normally.
    pub(super) join_handle: Option<JoinHandle<Option<Box<dyn Separator>>>>,
    pub(super) latency_samples: usize,
    pub(super) commands: Sender<WorkerCommand>,
}

impl StemStreamController {
    /// Forwards a request to the separator; it is handled between hops. Returns at once.
    /// Not realtime-safe: sends a message.
    pub fn request(&self, request: SeparatorRequest) {
        let _ = self.commands.send(WorkerCommand::Separator(request));
        if let Some(join_handle) = &self.join_handle {
            join_handle.thread().unpark();
        }
    }

    /// Asks the worker to move the model to another device. Returns at once; the switch happens
    /// when the new session is ready ([`StreamStats::active_device`] shows it). Not realtime-safe.
    pub fn set_device(&self, choice: DeviceChoice) {
        self.request(SeparatorRequest::SetDevice(choice));
    }

    /// Shared statistics.
    pub fn stats(&self) -> &Arc<StreamStats> {
        &self.shared.stats
    }

    /// The stream's latency in host samples.
    pub fn latency_samples(&self) -> usize {
        self.latency_samples
    }

    /// Whether the thread still runs.
    pub fn is_alive(&self) -> bool {
        self.shared.is_worker_alive.load(Ordering::Acquire)
    }

    /// Stops the worker and hands its separator back, reset, so the next stream can use it
    /// without loading the model again. `None` when the worker died. Not realtime-safe: joins.
    pub fn into_separator(mut self) -> Option<Box<dyn Separator>> {
        let mut separator = self.stop_and_join()?;
        separator.reset();
        Some(separator)
    }

    fn stop_and_join(&mut self) -> Option<Box<dyn Separator>> {
        self.shared.should_stop.store(true, Ordering::Release);
        let join_handle = self.join_handle.take()?;
        join_handle.thread().unpark();
        join_handle.join().ok().flatten()
    }
}

impl Drop for StemStreamController {
    fn drop(&mut self) {
        // The separator (and its model session) is dropped here, on the main thread.
        drop(self.stop_and_join());
    }
}
