//! The real-time boundary: [`StemStreamHandle`] on the audio thread, [`StemStreamWorker`] behind
//! it, talking through lock-free `rtrb` ring buffers and a few atomics.
//!
//! Timeline: the handle reports a fixed latency `L`. Output frame `t` of every stem is the stem of
//! input frame `t − L`. The worker's [`StemPipeline`] delays by `D ≤ L`; the output ring is
//! pre-filled with `L − D` silent frames, so each frame the audio thread reads lines up without
//! any bookkeeping. When a frame is not ready in time (an underrun, real-time mode only), the
//! handle outputs the dry input delayed by `L` on `Other` and silence on the other stems, keeps
//! the mix complete, and later drops the late frame so the timeline never shifts.
//!
//! In offline mode the handle waits for the worker instead, so every frame is separated and the
//! result is bit-identical whatever the host's block size.
//!
//! A reset (transport jump) is a generation counter: the handle publishes the input frame count
//! at which the new generation starts, the worker discards everything before it, clears its
//! pipeline and acknowledges with the output frame count at which new-generation frames start.
//! Nothing is allocated or freed on the audio thread.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use rtrb::{Consumer, Producer, RingBuffer};

use crate::onnx::ActiveDevice;
use crate::runtime::devices::DeviceChoice;
use crate::runtime::session::{acquire_session, AcquiredSession};

use crate::dsp::sanitize_sample;
use crate::pipeline::StemPipeline;
use crate::separator::Separator;
use crate::stem::{ExtraStems, Stem, NUM_STEMS, STEM_FRAME_SAMPLES};
use crate::EngineError;

/// Extra latency that covers the host's block and the worker's scheduling in real-time mode.
pub const SCHEDULING_MARGIN_MS: f64 = 100.0;
/// How long an offline render waits for a stuck worker before falling back to dry audio.
pub const OFFLINE_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the worker sleeps when it has nothing to do and nobody wakes it.
const WORKER_IDLE_PARK: Duration = Duration::from_millis(2);

/// Whether the audio thread may wait for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessingMode {
    /// Live playback: never wait; late frames become dry audio on `Other` (an underrun).
    Realtime,
    /// The host's offline render: wait for every frame, so the output is exact.
    Offline,
}

/// How a stream is set up. Everything the audio side needs is sized from this.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamConfig {
    /// The host's sample rate.
    pub host_sample_rate_hz: f32,
    /// The largest block the host will pass to [`StemStreamHandle::process`].
    pub max_block_frames: usize,
    /// Real-time or offline.
    pub mode: ProcessingMode,
}

/// The latency a stream reports: the pipeline's delay and chunk quantization plus the
/// scheduling margin, which is at least one host block. A pure function of its inputs.
pub fn stream_latency_samples(
    pipeline_delay_samples: usize,
    pipeline_quantization_samples: usize,
    host_sample_rate_hz: u32,
    max_block_frames: usize,
) -> usize {
    let margin_samples =
        ((SCHEDULING_MARGIN_MS / 1000.0) * host_sample_rate_hz as f64).ceil() as usize;
    pipeline_delay_samples + pipeline_quantization_samples + margin_samples.max(max_block_frames)
}

/// Counters shared by the handle, the worker and whoever displays them. All relaxed atomics:
/// they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct StreamStats {
    underrun_blocks: AtomicU64,
    underrun_frames: AtomicU64,
    input_overflows: AtomicU64,
    non_finite_input_samples: AtomicU64,
    worker_error: Mutex<Option<String>>,
    active_device: Mutex<Option<ActiveDevice>>,
    device_warning: Mutex<Option<String>>,
    device_switches: AtomicU64,
    worker_busy_ns: AtomicU64,
    worker_processed_frames: AtomicU64,
}

impl StreamStats {
    /// Blocks in which at least one frame was not ready in time (real-time mode).
    pub fn underrun_blocks(&self) -> u64 {
        self.underrun_blocks.load(Ordering::Relaxed)
    }

    /// Frames that were output as dry fallback because they were not ready in time.
    pub fn underrun_frames(&self) -> u64 {
        self.underrun_frames.load(Ordering::Relaxed)
    }

    /// Times the input ring was full (the worker stalled) and the stream restarted itself.
    pub fn input_overflows(&self) -> u64 {
        self.input_overflows.load(Ordering::Relaxed)
    }

    /// NaN or infinite input samples that were replaced with silence.
    pub fn non_finite_input_samples(&self) -> u64 {
        self.non_finite_input_samples.load(Ordering::Relaxed)
    }

    /// Why the worker stopped, if it died. Not realtime-safe: locks and clones.
    pub fn worker_error(&self) -> Option<String> {
        self.worker_error.lock().clone()
    }

    /// The device the model runs on, `None` for DSP separators. Not realtime-safe: locks.
    pub fn active_device(&self) -> Option<ActiveDevice> {
        self.active_device.lock().clone()
    }

    /// The last device switch that failed (the previous device kept running). Not realtime-safe.
    pub fn device_warning(&self) -> Option<String> {
        self.device_warning.lock().clone()
    }

    /// How many sessions the worker has swapped in.
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
}

/// Messages from the plugin, editor or CLI to the worker (never from the audio thread).
#[derive(Debug, Clone)]
pub enum WorkerCommand {
    /// Run the model on another device: the new session is built and warmed up beside the old
    /// one, which keeps running until the swap at a hop boundary.
    SetDevice(DeviceChoice),
}

/// State shared between the handle and the worker.
struct Shared {
    /// Set by the worker owner to stop the thread.
    should_stop: AtomicBool,
    /// Cleared by the worker when it exits (normally or by panic).
    is_worker_alive: AtomicBool,
    /// The newest reset generation requested by the handle.
    reset_generation: AtomicU64,
    /// Input frame count at which the newest generation starts. Written before
    /// `reset_generation` (release), read after it (acquire).
    reset_at_input_frame: AtomicU64,
    /// The newest generation the worker has switched to.
    acked_generation: AtomicU64,
    /// Output frame count at which the acknowledged generation's frames start. Written before
    /// `acked_generation`.
    generation_first_output_frame: AtomicU64,
    stats: Arc<StreamStats>,
}

/// Creates a handle and its worker. Not realtime-safe: allocates and spawns a thread.
pub fn spawn_stream(
    separator: Box<dyn Separator>,
    config: &StreamConfig,
) -> Result<(StemStreamHandle, StemStreamWorker), EngineError> {
    let host_rate_hz = crate::validate_sample_rate(config.host_sample_rate_hz)?;
    if config.max_block_frames == 0 || config.max_block_frames > 1 << 20 {
        return Err(EngineError::InvalidBlockSize(config.max_block_frames));
    }
    let pipeline = StemPipeline::new(separator, host_rate_hz)?;
    let latency_samples = stream_latency_samples(
        pipeline.delay_samples(),
        pipeline.quantization_samples(),
        host_rate_hz,
        config.max_block_frames,
    );
    let prefill_frames = latency_samples - pipeline.delay_samples();
    let max_output_per_chunk = pipeline.max_output_frames_per_chunk();
    let chunk_frames = pipeline.input_chunk_frames();

    // At least a second of input, so a worker stall has to be long before input is dropped.
    let input_capacity_frames =
        (2 * (latency_samples + config.max_block_frames + chunk_frames)).max(host_rate_hz as usize);
    let output_capacity_frames =
        2 * (latency_samples + config.max_block_frames + max_output_per_chunk);
    let (input_producer, input_consumer) = RingBuffer::new(input_capacity_frames * 2);
    let (mut output_producer, output_consumer) =
        RingBuffer::new(output_capacity_frames * STEM_FRAME_SAMPLES);

    // The initial pre-fill goes in before the thread starts, so real-time playback starts
    // without underruns however slowly the worker wakes up.
    for _ in 0..prefill_frames * STEM_FRAME_SAMPLES {
        let _ = output_producer.push(0.0);
    }

    let stats = Arc::new(StreamStats::default());
    *stats.active_device.lock() = pipeline.separator().active_device();
    let (command_sender, command_receiver) = crossbeam_channel::unbounded();
    let (session_sender, session_receiver) = crossbeam_channel::unbounded();
    let shared = Arc::new(Shared {
        should_stop: AtomicBool::new(false),
        is_worker_alive: AtomicBool::new(true),
        reset_generation: AtomicU64::new(0),
        reset_at_input_frame: AtomicU64::new(0),
        acked_generation: AtomicU64::new(0),
        generation_first_output_frame: AtomicU64::new(0),
        stats: stats.clone(),
    });

    let worker_loop = WorkerLoop {
        pipeline,
        input: input_consumer,
        output: output_producer,
        shared: shared.clone(),
        generation: 0,
        input_frames_popped: 0,
        output_frames_pushed: prefill_frames as u64,
        prefill_frames,
        prefill_remaining: 0,
        chunk: [vec![0.0; chunk_frames], vec![0.0; chunk_frames]],
        chunk_fill: 0,
        chunk_output: Vec::with_capacity(max_output_per_chunk * STEM_FRAME_SAMPLES),
        max_output_per_chunk,
        commands: command_receiver,
        session_sender,
        session_receiver,
    };
    let thread_shared = shared.clone();
    let join_handle = std::thread::Builder::new()
        .name("stemflow-worker".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(move || {
                let mut worker_loop = worker_loop;
                worker_loop.run();
            }));
            if let Err(panic) = result {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                log::error!("Stemflow worker stopped: {message}");
                *thread_shared.stats.worker_error.lock() = Some(message);
            }
            thread_shared
                .is_worker_alive
                .store(false, Ordering::Release);
        })
        .map_err(|e| EngineError::Worker(e.to_string()))?;

    let max_block = config.max_block_frames;
    let handle = StemStreamHandle {
        input: input_producer,
        output: output_consumer,
        shared: shared.clone(),
        worker_thread: join_handle.thread().clone(),
        mode: config.mode,
        latency_samples,
        max_block_frames: max_block,
        generation: 0,
        is_awaiting_ack: false,
        input_frames_pushed: 0,
        output_frames_popped: 0,
        owed_output_frames: 0,
        forced_fallback_frames: 0,
        dry_delay: [
            vec![0.0; latency_samples + max_block],
            vec![0.0; latency_samples + max_block],
        ],
        dry_write_pos: 0,
        frames_since_reset: 0,
        input_scratch: [vec![0.0; max_block], vec![0.0; max_block]],
        stem_outputs: std::array::from_fn(|_| [vec![0.0; max_block], vec![0.0; max_block]]),
        dry_output: [vec![0.0; max_block], vec![0.0; max_block]],
        block_frames: 0,
        extra_stems: ExtraStems::default(),
    };
    let worker = StemStreamWorker {
        shared,
        join_handle: Some(join_handle),
        stats,
        latency_samples,
        commands: command_sender,
    };
    Ok((handle, worker))
}

/// The audio-thread side of a stream. Owns every buffer it touches; nothing in it allocates.
pub struct StemStreamHandle {
    /// Sanitized stereo input, interleaved, to the worker.
    input: Producer<f32>,
    /// Finished stem frames ([`STEM_FRAME_SAMPLES`] each) from the worker.
    output: Consumer<f32>,
    shared: Arc<Shared>,
    /// To wake the worker after pushing input.
    worker_thread: Thread,
    mode: ProcessingMode,
    latency_samples: usize,
    max_block_frames: usize,
    /// The newest reset generation this handle requested.
    generation: u64,
    /// True from a reset until the worker acknowledged it.
    is_awaiting_ack: bool,
    input_frames_pushed: u64,
    output_frames_popped: u64,
    /// Frames output as fallback whose separated versions must be dropped when they arrive.
    owed_output_frames: u64,
    /// Frames still to be output as fallback after an overflow restart: a new generation's
    /// first `latency` frames (pre-fill and pipeline history) are silence, but the audio before
    /// the restart is not.
    forced_fallback_frames: usize,
    /// The dry input, `latency + max_block` frames per channel, for fallback and bypass.
    dry_delay: [Vec<f32>; 2],
    dry_write_pos: usize,
    /// Dry frames older than this are from before the last reset and read as silence.
    frames_since_reset: u64,
    input_scratch: [Vec<f32>; 2],
    stem_outputs: [[Vec<f32>; 2]; NUM_STEMS],
    dry_output: [Vec<f32>; 2],
    block_frames: usize,
    /// Where a six-stem model's guitar and piano go.
    extra_stems: ExtraStems,
}

impl StemStreamHandle {
    /// The stream's fixed latency in host samples. Realtime-safe.
    pub fn latency_samples(&self) -> usize {
        self.latency_samples
    }

    /// The largest block [`StemStreamHandle::process`] accepts. Realtime-safe.
    pub fn max_block_frames(&self) -> usize {
        self.max_block_frames
    }

    /// Real-time or offline. Realtime-safe.
    pub fn mode(&self) -> ProcessingMode {
        self.mode
    }

    /// Stem frames the worker has delivered that are waiting to be read. Realtime-safe.
    pub fn ready_frames(&self) -> usize {
        self.available_frames()
    }

    /// Shared statistics (underruns, overflows). Realtime-safe.
    pub fn stats(&self) -> &Arc<StreamStats> {
        &self.shared.stats
    }

    /// Where a six-stem model's guitar and piano go from the next block on (default: into
    /// `Other`). Realtime-safe.
    pub fn set_extra_stems(&mut self, extra_stems: ExtraStems) {
        self.extra_stems = extra_stems;
    }

    /// Clears the pipeline, for transport jumps: the next `latency_samples()` output frames are
    /// silent, then the stems of the input after the reset follow. Realtime-safe: publishes a
    /// generation and wakes the worker; nothing is allocated or freed.
    pub fn reset(&mut self) {
        self.generation += 1;
        self.shared
            .reset_at_input_frame
            .store(self.input_frames_pushed, Ordering::Relaxed);
        self.shared
            .reset_generation
            .store(self.generation, Ordering::Release);
        self.is_awaiting_ack = true;
        self.owed_output_frames = 0;
        self.forced_fallback_frames = 0;
        self.frames_since_reset = 0;
        self.worker_thread.unpark();
    }

    /// Processes one block of `left.len()` frames (at most
    /// [`StemStreamHandle::max_block_frames`]; longer input is truncated, so split it first).
    /// Afterwards [`StemStreamHandle::stem_output`] and [`StemStreamHandle::dry_output`] hold
    /// this block's output. Returns the number of frames processed.
    ///
    /// Realtime-safe in [`ProcessingMode::Realtime`]: copies to and from preallocated ring
    /// buffers, never waits. In [`ProcessingMode::Offline`] it waits for the worker.
    pub fn process(&mut self, left: &[f32], right: &[f32]) -> usize {
        let num_frames = left.len().min(right.len()).min(self.max_block_frames);
        self.block_frames = num_frames;
        if num_frames == 0 {
            return 0;
        }

        // 1. Sanitize the input: NaN/Inf and subnormals become silence.
        let mut num_non_finite = 0u64;
        for (channel, source) in [left, right].into_iter().enumerate() {
            for (dest, &sample) in self.input_scratch[channel][..num_frames]
                .iter_mut()
                .zip(source)
            {
                num_non_finite += u64::from(!sample.is_finite());
                *dest = sanitize_sample(sample);
            }
        }
        if num_non_finite > 0 {
            self.shared
                .stats
                .non_finite_input_samples
                .fetch_add(num_non_finite, Ordering::Relaxed);
        }

        // 2. Hand the input to the worker. A full ring means the worker stalled: restart the
        //    pipeline after this block rather than shift the timeline.
        let is_pushed = self.push_input(num_frames);

        // 3. The dry signal delayed by the latency, for fallback and bypass.
        self.update_dry_delay(num_frames);
        self.worker_thread.unpark();

        // 4. Read the stems.
        if self.is_awaiting_ack && !self.check_ack() && self.mode == ProcessingMode::Offline {
            let shared = self.shared.clone();
            let generation = self.generation;
            if wait_until(&shared, || {
                shared.acked_generation.load(Ordering::Acquire) == generation
            }) {
                self.check_ack();
            }
        }
        if self.is_awaiting_ack || !is_pushed {
            self.output_fallback(0, num_frames);
            if is_pushed {
                self.owed_output_frames += num_frames as u64;
                self.forced_fallback_frames =
                    self.forced_fallback_frames.saturating_sub(num_frames);
            } else {
                self.request_overflow_reset();
            }
        } else {
            let forced = self.forced_fallback_frames.min(num_frames);
            if forced > 0 {
                self.output_fallback(0, forced);
                self.owed_output_frames += forced as u64;
                self.forced_fallback_frames -= forced;
            }
            self.read_stems(forced, num_frames);
        }
        self.extra_stems
            .apply(&mut self.stem_outputs, 0..num_frames);
        self.frames_since_reset += num_frames as u64;
        num_frames
    }

    /// One stem's output for the last processed block. Realtime-safe.
    pub fn stem_output(&self, stem: Stem, channel: usize) -> &[f32] {
        &self.stem_outputs[stem.index()][channel][..self.block_frames]
    }

    /// The dry input delayed by the latency, for the last processed block. Realtime-safe.
    pub fn dry_output(&self, channel: usize) -> &[f32] {
        &self.dry_output[channel][..self.block_frames]
    }

    fn push_input(&mut self, num_frames: usize) -> bool {
        let Ok(mut chunk) = self.input.write_chunk(num_frames * 2) else {
            self.shared
                .stats
                .input_overflows
                .fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let (first, second) = chunk.as_mut_slices();
        let [left, right] = &self.input_scratch;
        let mut frames = left.iter().zip(right.iter()).take(num_frames);
        for pair in first.chunks_exact_mut(2).chain(second.chunks_exact_mut(2)) {
            if let Some((&l, &r)) = frames.next() {
                pair[0] = l;
                pair[1] = r;
            }
        }
        chunk.commit_all();
        self.input_frames_pushed += num_frames as u64;
        true
    }

    /// Restarts the pipeline at the current input position after a dropped block.
    fn request_overflow_reset(&mut self) {
        // The dropped block is not part of the new generation, so nothing is owed for it, and
        // the dry history stays valid.
        let frames_since_reset = self.frames_since_reset;
        self.reset();
        self.frames_since_reset = frames_since_reset;
        self.forced_fallback_frames = self.latency_samples;
    }

    fn update_dry_delay(&mut self, num_frames: usize) {
        let len = self.dry_delay[0].len();
        for i in 0..num_frames {
            let write_pos = (self.dry_write_pos + i) % len;
            let read_pos = (write_pos + len - self.latency_samples) % len;
            let is_valid = self.frames_since_reset + i as u64 >= self.latency_samples as u64;
            for channel in 0..2 {
                self.dry_delay[channel][write_pos] = self.input_scratch[channel][i];
                self.dry_output[channel][i] = if is_valid {
                    self.dry_delay[channel][read_pos]
                } else {
                    0.0
                };
            }
        }
        self.dry_write_pos = (self.dry_write_pos + num_frames) % len;
    }

    /// Sees whether the worker switched to our generation, and drops the stale frames before it.
    fn check_ack(&mut self) -> bool {
        if self.shared.acked_generation.load(Ordering::Acquire) != self.generation {
            return false;
        }
        let first_frame = self
            .shared
            .generation_first_output_frame
            .load(Ordering::Relaxed);
        let stale_frames = first_frame.saturating_sub(self.output_frames_popped);
        self.drop_frames(stale_frames as usize);
        self.is_awaiting_ack = false;
        true
    }

    fn available_frames(&self) -> usize {
        self.output.slots() / STEM_FRAME_SAMPLES
    }

    fn drop_frames(&mut self, num_frames: usize) -> usize {
        let num_frames = num_frames.min(self.available_frames());
        if let Ok(chunk) = self.output.read_chunk(num_frames * STEM_FRAME_SAMPLES) {
            chunk.commit_all();
        }
        self.output_frames_popped += num_frames as u64;
        num_frames
    }

    /// Reads the stems for frames `start..end` of the block.
    fn read_stems(&mut self, start: usize, end: usize) {
        let num_frames = end - start;
        if num_frames == 0 {
            return;
        }
        if self.mode == ProcessingMode::Offline {
            let needed = self.owed_output_frames as usize + num_frames;
            if self.available_frames() < needed {
                let shared = self.shared.clone();
                let output = &self.output;
                wait_until(&shared, || output.slots() / STEM_FRAME_SAMPLES >= needed);
            }
        }
        if self.owed_output_frames > 0 {
            let dropped = self.drop_frames(self.owed_output_frames as usize);
            self.owed_output_frames -= dropped as u64;
        }
        let ready_frames = if self.owed_output_frames > 0 {
            0
        } else {
            self.available_frames().min(num_frames)
        };
        if let Ok(chunk) = self.output.read_chunk(ready_frames * STEM_FRAME_SAMPLES) {
            let (first, second) = chunk.as_slices();
            for (i, frame) in first
                .chunks_exact(STEM_FRAME_SAMPLES)
                .chain(second.chunks_exact(STEM_FRAME_SAMPLES))
                .enumerate()
            {
                for (stem, outputs) in self.stem_outputs.iter_mut().enumerate() {
                    outputs[0][start + i] = frame[stem * 2];
                    outputs[1][start + i] = frame[stem * 2 + 1];
                }
            }
            chunk.commit_all();
        }
        self.output_frames_popped += ready_frames as u64;
        if ready_frames < num_frames {
            let missing = num_frames - ready_frames;
            self.output_fallback(start + ready_frames, end);
            self.owed_output_frames += missing as u64;
            let stats = &self.shared.stats;
            stats.underrun_blocks.fetch_add(1, Ordering::Relaxed);
            stats
                .underrun_frames
                .fetch_add(missing as u64, Ordering::Relaxed);
        }
    }

    /// Dry (delayed) input on `Other`, silence on the rest, for frames `start..end`.
    fn output_fallback(&mut self, start: usize, end: usize) {
        for stem in Stem::ALL {
            for channel in 0..2 {
                let out = &mut self.stem_outputs[stem.index()][channel][start..end];
                if stem == Stem::Other {
                    out.copy_from_slice(&self.dry_output[channel][start..end]);
                } else {
                    out.fill(0.0);
                }
            }
        }
    }
}

impl Drop for StemStreamHandle {
    fn drop(&mut self) {
        // Not on the audio thread: the plugin drops handles in deactivate.
        self.shared.should_stop.store(true, Ordering::Release);
        self.worker_thread.unpark();
    }
}

/// Waits (offline mode only) until `is_ready` holds, the worker died or the timeout passed.
/// Spins briefly, then yields, then sleeps in short naps. Not realtime-safe: waits.
fn wait_until(shared: &Shared, mut is_ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut iterations = 0u32;
    loop {
        if is_ready() {
            return true;
        }
        if !shared.is_worker_alive.load(Ordering::Acquire) || start.elapsed() > OFFLINE_WAIT_TIMEOUT
        {
            return false;
        }
        iterations += 1;
        if iterations < 64 {
            std::hint::spin_loop();
        } else if iterations < 256 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Owns the worker thread. Dropping it stops and joins the thread. Not realtime-safe: lives on
/// the main thread (the plugin keeps it next to, not inside, the audio state).
pub struct StemStreamWorker {
    shared: Arc<Shared>,
    join_handle: Option<JoinHandle<()>>,
    stats: Arc<StreamStats>,
    latency_samples: usize,
    commands: Sender<WorkerCommand>,
}

impl StemStreamWorker {
    /// Asks the worker to move the model to another device. Returns at once; the switch happens
    /// when the new session is ready ([`StreamStats::active_device`] shows it). Not realtime-safe.
    pub fn set_device(&self, choice: DeviceChoice) {
        let _ = self.commands.send(WorkerCommand::SetDevice(choice));
        if let Some(join_handle) = &self.join_handle {
            join_handle.thread().unpark();
        }
    }

    /// Shared statistics.
    pub fn stats(&self) -> &Arc<StreamStats> {
        &self.stats
    }

    /// The stream's latency in host samples.
    pub fn latency_samples(&self) -> usize {
        self.latency_samples
    }

    /// Whether the thread still runs.
    pub fn is_alive(&self) -> bool {
        self.shared.is_worker_alive.load(Ordering::Acquire)
    }
}

impl Drop for StemStreamWorker {
    fn drop(&mut self) {
        self.shared.should_stop.store(true, Ordering::Release);
        if let Some(join_handle) = self.join_handle.take() {
            join_handle.thread().unpark();
            let _ = join_handle.join();
        }
    }
}

/// The worker thread's state.
struct WorkerLoop {
    pipeline: StemPipeline,
    input: Consumer<f32>,
    output: Producer<f32>,
    shared: Arc<Shared>,
    generation: u64,
    input_frames_popped: u64,
    output_frames_pushed: u64,
    prefill_frames: usize,
    prefill_remaining: usize,
    /// The chunk being gathered, `chunk_fill` frames so far: input frames
    /// `input_frames_popped - chunk_fill .. input_frames_popped`.
    chunk: [Vec<f32>; 2],
    chunk_fill: usize,
    chunk_output: Vec<f32>,
    max_output_per_chunk: usize,
    commands: Receiver<WorkerCommand>,
    /// Sessions built on helper threads arrive here.
    session_sender: Sender<Result<AcquiredSession, String>>,
    session_receiver: Receiver<Result<AcquiredSession, String>>,
}

impl WorkerLoop {
    /// Handles commands and installs sessions that are ready. Runs between chunks, which are hop
    /// boundaries.
    fn handle_control(&mut self) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                WorkerCommand::SetDevice(choice) => {
                    let Some(source) = self.pipeline.separator().session_source() else {
                        continue;
                    };
                    let sender = self.session_sender.clone();
                    let spawned = std::thread::Builder::new()
                        .name("stemflow-session-builder".into())
                        .spawn(move || {
                            let result =
                                acquire_session(&source.model, choice, source.warm_up.as_ref());
                            let _ = sender.send(result);
                        });
                    if let Err(e) = spawned {
                        *self.shared.stats.device_warning.lock() = Some(e.to_string());
                    }
                }
            }
        }
        while let Ok(result) = self.session_receiver.try_recv() {
            let stats = &self.shared.stats;
            match result {
                Ok(session) => {
                    self.pipeline.separator_mut().install_session(session);
                    *stats.active_device.lock() = self.pipeline.separator().active_device();
                    *stats.device_warning.lock() = None;
                    stats.device_switches.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => *stats.device_warning.lock() = Some(error),
            }
        }
    }

    fn run(&mut self) {
        while !self.shared.should_stop.load(Ordering::Acquire) {
            self.handle_control();
            let generation = self.shared.reset_generation.load(Ordering::Acquire);
            if generation != self.generation {
                self.switch_generation(generation);
            }
            let has_progressed = self.step();
            if !has_progressed {
                std::thread::park_timeout(WORKER_IDLE_PARK);
            }
        }
    }

    fn output_free_frames(&self) -> usize {
        self.output.slots() / STEM_FRAME_SAMPLES
    }

    /// Does one unit of work. Returns whether anything happened.
    fn step(&mut self) -> bool {
        if self.prefill_remaining > 0 {
            let num_frames = self.prefill_remaining.min(self.output_free_frames());
            if let Ok(mut write) = self.output.write_chunk(num_frames * STEM_FRAME_SAMPLES) {
                let (first, second) = write.as_mut_slices();
                first.fill(0.0);
                second.fill(0.0);
                write.commit_all();
            }
            self.prefill_remaining -= num_frames;
            self.output_frames_pushed += num_frames as u64;
            return num_frames > 0;
        }

        // Gather input for the chunk.
        let chunk_frames = self.pipeline.input_chunk_frames();
        let wanted = chunk_frames - self.chunk_fill;
        let available = (self.input.slots() / 2).min(wanted);
        if available > 0 {
            if let Ok(read) = self.input.read_chunk(available * 2) {
                let (first, second) = read.as_slices();
                for (i, pair) in first
                    .chunks_exact(2)
                    .chain(second.chunks_exact(2))
                    .enumerate()
                {
                    self.chunk[0][self.chunk_fill + i] = pair[0];
                    self.chunk[1][self.chunk_fill + i] = pair[1];
                }
                read.commit_all();
            }
            self.chunk_fill += available;
            self.input_frames_popped += available as u64;
        }
        if self.chunk_fill < chunk_frames {
            return available > 0;
        }
        // A reset published while we gathered must be handled before these frames are used.
        if self.shared.reset_generation.load(Ordering::Acquire) != self.generation {
            return true;
        }
        if self.output_free_frames() < self.max_output_per_chunk {
            // The audio side is behind; wait for it to read.
            return available > 0;
        }
        self.chunk_output.clear();
        let started = Instant::now();
        self.pipeline
            .process_chunk(&self.chunk[0], &self.chunk[1], &mut self.chunk_output);
        let stats = &self.shared.stats;
        stats
            .worker_busy_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        stats
            .worker_processed_frames
            .fetch_add(chunk_frames as u64, Ordering::Relaxed);
        // A mid-session device failure moves the model to the CPU inside the separator.
        let active = self.pipeline.separator().active_device();
        if active.is_some() {
            let mut current = self.shared.stats.active_device.lock();
            if *current != active {
                *current = active;
            }
        }
        self.chunk_fill = 0;
        let num_frames = self.chunk_output.len() / STEM_FRAME_SAMPLES;
        if let Ok(mut write) = self.output.write_chunk(self.chunk_output.len()) {
            let (first, second) = write.as_mut_slices();
            let split = first.len();
            first.copy_from_slice(&self.chunk_output[..split]);
            second.copy_from_slice(&self.chunk_output[split..]);
            write.commit_all();
        }
        self.output_frames_pushed += num_frames as u64;
        true
    }

    /// Discards input before the reset point, clears the pipeline and acknowledges.
    fn switch_generation(&mut self, generation: u64) {
        let reset_at = self.shared.reset_at_input_frame.load(Ordering::Acquire);
        let chunk_start = self.input_frames_popped - self.chunk_fill as u64;
        if reset_at <= self.input_frames_popped {
            // Some post-reset frames are already in the chunk: keep them.
            let keep_from = reset_at.saturating_sub(chunk_start) as usize;
            for channel in &mut self.chunk {
                channel.copy_within(keep_from..self.chunk_fill, 0);
            }
            self.chunk_fill -= keep_from;
        } else {
            let mut to_discard = (reset_at - self.input_frames_popped) as usize;
            while to_discard > 0 {
                let num_frames = (self.input.slots() / 2).min(to_discard);
                if let Ok(read) = self.input.read_chunk(num_frames * 2) {
                    read.commit_all();
                }
                to_discard -= num_frames;
                self.input_frames_popped += num_frames as u64;
                if num_frames == 0 {
                    // Published before the generation, so this cannot happen; never spin.
                    break;
                }
            }
            self.chunk_fill = 0;
        }
        self.pipeline.reset();
        self.prefill_remaining = self.prefill_frames;
        self.shared
            .generation_first_output_frame
            .store(self.output_frames_pushed, Ordering::Relaxed);
        self.shared
            .acked_generation
            .store(generation, Ordering::Release);
        self.generation = generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::separator::{PassthroughSeparator, PlanarBlock};

    /// Feeds `input` in blocks of the given sizes (cycled) and collects every stem's output.
    fn render(
        handle: &mut StemStreamHandle,
        input: &[Vec<f32>; 2],
        block_sizes: &[usize],
    ) -> [[Vec<f32>; 2]; NUM_STEMS] {
        let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
        let mut position = 0;
        let mut i = 0;
        while position < input[0].len() {
            let block = block_sizes[i % block_sizes.len()].min(input[0].len() - position);
            i += 1;
            let n = handle.process(
                &input[0][position..position + block],
                &input[1][position..position + block],
            );
            assert_eq!(n, block);
            for stem in Stem::ALL {
                for channel in 0..2 {
                    out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
                }
            }
            position += block;
        }
        out
    }

    fn test_signal(len: usize, seed: u64) -> [Vec<f32>; 2] {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let left: Vec<f32> = (0..len)
            .map(|i| 0.3 * (i as f32 * 0.05).sin() + 0.2 * next())
            .collect();
        let right: Vec<f32> = (0..len)
            .map(|i| 0.3 * (i as f32 * 0.031).sin() + 0.2 * next())
            .collect();
        [left, right]
    }

    fn offline_config(rate_hz: f32, max_block_frames: usize) -> StreamConfig {
        StreamConfig {
            host_sample_rate_hz: rate_hz,
            max_block_frames,
            mode: ProcessingMode::Offline,
        }
    }

    #[test]
    fn offline_output_is_bit_identical_for_any_block_size() {
        let input = test_signal(48_000, 1);
        let mut reference = None;
        for block_sizes in [
            vec![4096],
            vec![64],
            vec![1000],
            vec![1, 7, 4096, 333, 2048, 5],
        ] {
            let (mut handle, _worker) = spawn_stream(
                Box::new(BuiltinSeparator::new()),
                &offline_config(48_000.0, 4096),
            )
            .unwrap();
            let out = render(&mut handle, &input, &block_sizes);
            match &reference {
                None => reference = Some(out),
                Some(reference) => assert!(reference == &out, "block sizes {block_sizes:?} differ"),
            }
        }
    }

    #[test]
    fn worker_counts_busy_time_and_separated_frames() {
        let input = test_signal(48_000, 2);
        let (mut handle, worker) = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(48_000.0, 512),
        )
        .unwrap();
        let stats = worker.stats().clone();
        assert_eq!(stats.worker_processed_frames(), 0);
        render(&mut handle, &input, &[512]);
        // Offline, every output frame waited for the worker, so nearly all input was separated.
        let frames = stats.worker_processed_frames();
        assert!(frames > 0 && frames <= 48_000, "{frames}");
        assert!(stats.worker_busy_ns() > 0);
    }

    #[test]
    fn impulse_comes_out_exactly_at_the_reported_latency() {
        for rate_hz in [22_050.0, 44_100.0, 48_000.0, 96_000.0] {
            let (mut handle, _worker) = spawn_stream(
                Box::new(PassthroughSeparator::new(44_100, 512, 100)),
                &offline_config(rate_hz, 512),
            )
            .unwrap();
            let latency = handle.latency_samples();
            let mut input = [vec![0.0; latency + 5_000], vec![0.0; latency + 5_000]];
            input[0][1_000] = 1.0;
            input[1][1_000] = 1.0;
            let out = render(&mut handle, &input, &[512]);
            let mix: Vec<f32> = (0..input[0].len())
                .map(|t| (0..NUM_STEMS).map(|s| out[s][0][t]).sum())
                .collect();
            let peak = (0..mix.len())
                .max_by(|&a, &b| mix[a].abs().total_cmp(&mix[b].abs()))
                .unwrap();
            assert_eq!(peak, 1_000 + latency, "{rate_hz} Hz");
            assert!((mix[peak] - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn reset_restarts_the_timeline_as_if_new() {
        let input = test_signal(30_000, 2);
        let (mut fresh, _w1) = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(44_100.0, 256),
        )
        .unwrap();
        let expected = render(&mut fresh, &input, &[256]);

        let (mut handle, _w2) = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(44_100.0, 256),
        )
        .unwrap();
        let other = test_signal(7_777, 3);
        render(&mut handle, &other, &[100]);
        handle.reset();
        let after_reset = render(&mut handle, &input, &[256]);
        assert!(after_reset == expected);
    }

    /// A passthrough separator that stalls on some hops, to provoke underruns.
    struct StallingPassthrough {
        inner: PassthroughSeparator,
        hop_index: usize,
        stalling_hops: std::ops::Range<usize>,
        stall: Duration,
    }

    impl Separator for StallingPassthrough {
        fn name(&self) -> &str {
            "stalling"
        }
        fn sample_rate_hz(&self) -> u32 {
            self.inner.sample_rate_hz()
        }
        fn hop_frames(&self) -> usize {
            self.inner.hop_frames()
        }
        fn latency_frames(&self) -> usize {
            self.inner.latency_frames()
        }
        fn reset(&mut self) {
            self.inner.reset()
        }
        fn process_hop(&mut self, input: &PlanarBlock, stems: &mut PlanarBlock) {
            if self.stalling_hops.contains(&self.hop_index) {
                std::thread::sleep(self.stall);
            }
            self.hop_index += 1;
            self.inner.process_hop(input, stems)
        }
    }

    #[test]
    fn underruns_keep_the_mix_complete_and_the_timeline_fixed() {
        let stats = stall_worker_and_check_timeline(Duration::from_millis(300));
        assert!(stats.underrun_blocks() > 0, "expected underruns");
        assert_eq!(stats.input_overflows(), 0);
    }

    #[test]
    fn a_stall_longer_than_the_input_ring_restarts_without_losing_audio() {
        let stats = stall_worker_and_check_timeline(Duration::from_millis(1_300));
        assert!(
            stats.input_overflows() > 0,
            "expected the input ring to overflow"
        );
    }

    /// Stalls the worker for `stall` in the middle of a paced real-time run and checks that every
    /// output frame is either separated exactly on time or dry on `Other`, and that separation
    /// resumes afterwards.
    fn stall_worker_and_check_timeline(stall: Duration) -> Arc<StreamStats> {
        const BLOCK: usize = 256;
        let separator = StallingPassthrough {
            inner: PassthroughSeparator::new(44_100, BLOCK, 700),
            hop_index: 0,
            stalling_hops: 20..21,
            stall,
        };
        let config = StreamConfig {
            host_sample_rate_hz: 44_100.0,
            max_block_frames: BLOCK,
            mode: ProcessingMode::Realtime,
        };
        let (mut handle, _worker) = spawn_stream(Box::new(separator), &config).unwrap();
        let latency = handle.latency_samples();
        let num_blocks = (stall.as_secs_f64() / 0.0058) as usize + 80;
        let input = test_signal(latency + num_blocks * BLOCK, 4);
        // Paced at about real time (5.8 ms per block), so the worker keeps up except while stalled.
        let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
        for (left, right) in input[0].chunks(BLOCK).zip(input[1].chunks(BLOCK)) {
            std::thread::sleep(Duration::from_micros(5_800));
            handle.process(left, right);
            for stem in Stem::ALL {
                for channel in 0..2 {
                    out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
                }
            }
        }
        let mut separated_after_underrun = 0;
        let mut first_fallback = None;
        for t in latency..input[0].len() {
            for channel in 0..2 {
                let expected = input[channel][t - latency];
                let sum: f32 = (0..NUM_STEMS).map(|s| out[s][channel][t]).sum();
                assert!((sum - expected).abs() < 1e-6, "mix incomplete at {t}");
                let vocals = out[Stem::Vocals.index()][channel][t];
                if vocals != 0.0 {
                    // A separated frame: exactly on time, never shifted.
                    assert!((vocals - expected).abs() < 1e-6, "shifted at {t}");
                    if first_fallback.is_some() {
                        separated_after_underrun += 1;
                    }
                } else if expected != 0.0 && first_fallback.is_none() {
                    first_fallback = Some(t);
                }
            }
        }
        assert!(first_fallback.is_some(), "no fallback frames seen");
        assert!(separated_after_underrun > 0, "the stream never recovered");
        handle.stats().clone()
    }

    #[test]
    fn a_dying_worker_leaves_dry_audio_on_other() {
        struct Panicking;
        impl Separator for Panicking {
            fn name(&self) -> &str {
                "panics"
            }
            fn sample_rate_hz(&self) -> u32 {
                44_100
            }
            fn hop_frames(&self) -> usize {
                128
            }
            fn latency_frames(&self) -> usize {
                0
            }
            fn reset(&mut self) {}
            fn process_hop(&mut self, _: &PlanarBlock, _: &mut PlanarBlock) {
                panic!("model exploded");
            }
        }
        let (mut handle, worker) =
            spawn_stream(Box::new(Panicking), &offline_config(44_100.0, 128)).unwrap();
        let latency = handle.latency_samples();
        let input = test_signal(latency + 2_000, 5);
        let out = render(&mut handle, &input, &[128]);
        assert!(!worker.is_alive());
        assert_eq!(
            worker.stats().worker_error().as_deref(),
            Some("model exploded")
        );
        for t in latency + 500..input[0].len() {
            assert_eq!(out[Stem::Other.index()][0][t], input[0][t - latency]);
            assert_eq!(out[Stem::Vocals.index()][0][t], 0.0);
        }
    }

    #[test]
    fn non_finite_and_subnormal_input_never_reaches_the_output() {
        let (mut handle, _worker) = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(44_100.0, 512),
        )
        .unwrap();
        let latency = handle.latency_samples();
        let mut input = test_signal(latency + 8_192, 6);
        for t in (0..input[0].len()).step_by(97) {
            input[0][t] = f32::NAN;
            input[1][t] = if t % 2 == 0 { f32::INFINITY } else { 1e-40 };
        }
        let out = render(&mut handle, &input, &[512]);
        assert!(handle.stats().non_finite_input_samples() > 0);
        for stem in out.iter().flatten() {
            assert!(stem.iter().all(|x| x.is_finite() && !x.is_subnormal()));
        }
    }

    #[test]
    fn bad_configurations_are_clear_errors() {
        let bad_rate = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(f32::NAN, 64),
        );
        assert!(matches!(
            bad_rate,
            Err(EngineError::UnsupportedSampleRate(_))
        ));
        let too_low = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(100.0, 64),
        );
        assert!(too_low
            .err()
            .unwrap()
            .to_string()
            .contains("unsupported sample rate"));
        let bad_block = spawn_stream(
            Box::new(BuiltinSeparator::new()),
            &offline_config(48_000.0, 0),
        );
        assert!(matches!(bad_block, Err(EngineError::InvalidBlockSize(0))));
    }
}
