//! What the handle and the worker share: stop and liveness flags, the reset handshake, the
//! statistics, and the wake-up an offline render waits on.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::stats::StreamStats;

/// How often a waiting offline render looks again even without a wake-up (a safety net).
const OFFLINE_WAIT_POLL: Duration = Duration::from_millis(20);
/// A wait this long is a wait without a limit.
const NO_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// State shared between the handle (audio thread) and the worker thread.
pub(super) struct Shared {
    /// Set by the owner (controller or handle) to stop the worker thread.
    pub should_stop: AtomicBool,
    /// Cleared by the worker when it exits (normally or by panic).
    pub is_worker_alive: AtomicBool,
    /// Set by the worker when the separator panicked: it separates nothing until the next reset
    /// (the handle outputs dry audio on `Other` meanwhile and never waits for it).
    pub is_separator_failed: AtomicBool,
    /// The newest reset generation requested by the handle.
    pub reset_generation: AtomicU64,
    /// Input frame count at which the newest generation starts. Written before
    /// `reset_generation` (release), read after it (acquire).
    pub reset_at_input_frame: AtomicU64,
    /// The newest generation the worker has switched to.
    pub acked_generation: AtomicU64,
    /// Output frame count at which the acknowledged generation's frames start. Written before
    /// `acked_generation`.
    pub generation_first_output_frame: AtomicU64,
    /// Counters and status; also handed to the controller and the plugin's editor.
    pub stats: Arc<StreamStats>,
    /// Set while the handle waits (offline mode) so the worker knows to wake it.
    is_handle_waiting: AtomicBool,
    /// The count of pushed output frames an offline handle waits for (0: none named), so the
    /// worker does not wake it for every chunk of a block it still has to finish.
    pub wanted_output_frames: AtomicU64,
    /// The count of pushed input frames the worker sleeps until: the end of the chunk it
    /// gathers, or a chunk's worth more while it passes leading silence or drains a crashed
    /// separator's input (0: it waits for something else, wake it at every block). A live
    /// handle wakes it only then, not at every block of a small-block host.
    pub wanted_input_frames: AtomicU64,
    /// Set once the last real input is in (whole-file separation flushing the latency with
    /// silence): from then on the worker separates a chunk only when the handle waits for its
    /// frames, never one wholly in the silence after the last frame anybody reads.
    pub is_input_ended: AtomicBool,
    /// The mutex and condition variable of that wait. Only taken in offline mode and by the
    /// worker after it published output while the handle waits: a real-time audio thread never
    /// touches them.
    wake_lock: Mutex<()>,
    wake: Condvar,
    /// When the worker last started or finished a chunk, in microseconds since `epoch`, plus
    /// one (0: never).
    progress_micros: AtomicU64,
    /// Whether the worker is inside a chunk (a model run) now.
    is_chunk_running: AtomicBool,
    epoch: Instant,
}

impl Shared {
    pub fn new(stats: Arc<StreamStats>) -> Self {
        Self {
            should_stop: AtomicBool::new(false),
            is_worker_alive: AtomicBool::new(true),
            is_separator_failed: AtomicBool::new(false),
            reset_generation: AtomicU64::new(0),
            reset_at_input_frame: AtomicU64::new(0),
            acked_generation: AtomicU64::new(0),
            generation_first_output_frame: AtomicU64::new(0),
            stats,
            is_handle_waiting: AtomicBool::new(false),
            wanted_output_frames: AtomicU64::new(0),
            wanted_input_frames: AtomicU64::new(0),
            is_input_ended: AtomicBool::new(false),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
            progress_micros: AtomicU64::new(0),
            is_chunk_running: AtomicBool::new(false),
            epoch: Instant::now(),
        }
    }

    /// Worker side: a chunk starts (`true`) or ended (`false`). Lets a waiting offline render
    /// tell a long model run from a stuck worker.
    pub fn set_chunk_running(&self, is_running: bool) {
        let micros = self.epoch.elapsed().as_micros() as u64 + 1;
        self.progress_micros.store(micros, Ordering::Release);
        self.is_chunk_running.store(is_running, Ordering::Release);
    }

    /// When the wait that started at `start` ends: `timeout` after the later of `start` and the
    /// worker's last progress, or `run_limit` after the start of a chunk under way.
    fn wait_deadline(&self, start: Instant, timeout: Duration, run_limit: Duration) -> Instant {
        let progress = match self.progress_micros.load(Ordering::Acquire) {
            0 => start,
            micros => self.epoch + Duration::from_micros(micros - 1),
        };
        // A limit of `Duration::MAX` (whole-file separation's run limit) means none: capped at
        // a year, so the sum cannot overflow.
        let after = |instant: Instant, duration: Duration| instant + duration.min(NO_LIMIT);
        if self.is_chunk_running.load(Ordering::Acquire) {
            after(progress, run_limit).max(after(start, timeout))
        } else {
            after(progress.max(start), timeout)
        }
    }

    /// Worker side: wakes the handle if it waits. Call after publishing output, an
    /// acknowledgement or the worker's exit.
    pub fn wake_handle(&self) {
        // Pairs with the fence in `wait_until`: either the handle sees what was published
        // before this call, or this call sees that it waits.
        fence(Ordering::SeqCst);
        if self.is_handle_waiting.load(Ordering::Relaxed) {
            // Taking the lock orders this wake-up after the handle's last look under it (it
            // either saw what was published or is asleep); notifying after releasing it lets
            // the woken handle take the lock at once instead of waiting for it.
            drop(
                self.wake_lock
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            self.wake.notify_all();
        }
    }

    /// Handle side, offline mode only: blocks until `is_ready` holds, the worker died, the
    /// separator crashed (when `is_failure_final`: not while a reset may revive it), or the
    /// worker made no progress for `timeout` (a chunk under way may take `run_limit` from its
    /// start). Returns whether `is_ready` held. Sleeps on a condition variable, so a waiting
    /// render leaves the cores to the worker. Not realtime-safe: waits.
    pub fn wait_until(
        &self,
        timeout: Duration,
        run_limit: Duration,
        is_failure_final: bool,
        mut is_ready: impl FnMut() -> bool,
    ) -> bool {
        if is_ready() {
            return true;
        }
        let start = Instant::now();
        self.is_handle_waiting.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut guard = self
            .wake_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let is_done = loop {
            if is_ready() {
                break true;
            }
            if !self.is_worker_alive.load(Ordering::Acquire)
                || (is_failure_final && self.is_separator_failed.load(Ordering::Acquire))
            {
                break false;
            }
            let now = Instant::now();
            let deadline = self.wait_deadline(start, timeout, run_limit);
            if now >= deadline {
                break false;
            }
            guard = self
                .wake
                .wait_timeout(guard, (deadline - now).min(OFFLINE_WAIT_POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        drop(guard);
        self.is_handle_waiting.store(false, Ordering::Relaxed);
        is_done
    }
}
