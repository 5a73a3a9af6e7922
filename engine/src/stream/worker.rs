//! [`StemStreamWorker`]: the background thread's state and loop. It gathers input chunks from
//! the handle's ring, runs the pipeline, pushes stem frames back, and handles resets and
//! separator requests between chunks (which are hop boundaries).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use rtrb::{Consumer, Producer};

use super::shared::Shared;
use crate::interleave::deinterleave_stereo;
use crate::pipeline::StemPipeline;
use crate::runtime::devices::DeviceEvent;
use crate::separator::{Separator, SeparatorError, SeparatorRequest};
use crate::stem_sink::StemSink;

/// How long the worker sleeps at most when it has nothing to do and nobody wakes it: a safety
/// net, since the handle wakes it when the input it waits for is in, and a reset, a request or
/// a stop wake it too.
const WORKER_IDLE_PARK: Duration = Duration::from_millis(50);

/// Messages from the plugin, editor or CLI to the worker (never from the audio thread).
#[derive(Debug, Clone)]
pub(super) enum WorkerCommand {
    /// Forward a request to the separator between hops.
    Separator(SeparatorRequest),
}

/// The worker thread's state. Lives on the thread `spawn_stream` starts; the main thread holds
/// its owner, [`super::StemStreamController`].
pub(super) struct StemStreamWorker {
    pub pipeline: StemPipeline,
    pub input: Consumer<f32>,
    pub output: Producer<f32>,
    pub shared: Arc<Shared>,
    pub commands: Receiver<WorkerCommand>,
    pub generation: u64,
    pub input_frames_popped: u64,
    pub output_frames_pushed: u64,
    /// Silent frames pushed after each reset so the new generation lines up with the latency.
    pub prefill_frames: usize,
    pub prefill_remaining: usize,
    /// Frames of the chunk being gathered (in the pipeline's
    /// [`StemPipeline::chunk_input_mut`]): input frames
    /// `input_frames_popped - chunk_fill .. input_frames_popped`.
    pub chunk_fill: usize,
    pub max_output_per_chunk: usize,
    /// True from the start of a generation until its first non-silent frame: leading digital
    /// silence passes straight through as silent stems, so the separator's framing starts at
    /// the audio's first non-silent frame — the same framing whether the host feeds seconds of
    /// pre-roll first (a DAW's export) or not (`stemflow separate`).
    pub is_before_signal: bool,
    /// Leading silent frames found among the frames a reset kept (see `switch_generation`).
    pub silent_kept_frames: usize,
}

impl StemStreamWorker {
    /// Runs until asked to stop, then hands the separator back (for reuse by another stream).
    pub fn run(mut self) -> Box<dyn Separator> {
        while !self.shared.should_stop.load(Ordering::Acquire) {
            self.handle_control();
            let generation = self.shared.reset_generation.load(Ordering::Acquire);
            if generation != self.generation {
                self.switch_generation(generation);
            }
            let (pushed_before, fill_before) = (self.output_frames_pushed, self.chunk_fill);
            let has_progressed = self.step();
            if has_progressed {
                // Nothing the handle waits for: input gathered for an unfinished chunk, or
                // output short of what a waiting offline handle asked for.
                let is_gathering =
                    self.output_frames_pushed == pushed_before && self.chunk_fill > fill_before;
                let is_short = self.output_frames_pushed > pushed_before
                    && self.output_frames_pushed
                        < self.shared.wanted_output_frames.load(Ordering::Acquire);
                if !is_gathering && !is_short {
                    self.shared.wake_handle();
                }
            } else {
                self.sleep();
            }
        }
        self.pipeline.into_separator()
    }

    /// Sleeps until the handle has pushed the input this worker waits for (it wakes it then),
    /// or anything else wakes it, or [`WORKER_IDLE_PARK`] passed.
    fn sleep(&self) {
        let wanted = self.wanted_input_frames();
        self.shared
            .wanted_input_frames
            .store(wanted, Ordering::Relaxed);
        // Pairs with the fence in the handle's `wake_worker_if_wanted`: frames pushed before
        // the handle could see `wanted` woke nobody, so look at the ring once more.
        fence(Ordering::SeqCst);
        let available = (self.input.slots() / 2) as u64;
        if wanted == 0 || self.input_frames_popped + available < wanted {
            std::thread::park_timeout(WORKER_IDLE_PARK);
        }
    }

    /// The count of pushed input frames after which this worker has work again: the end of
    /// the chunk it gathers; a chunk's worth more while it looks for the signal's first frame
    /// or drains the input after a crash; 0 (any block) while it waits for something else
    /// (room in the output ring for its pre-fill or its finished chunk, an offline handle's
    /// request).
    fn wanted_input_frames(&self) -> u64 {
        if self.prefill_remaining > 0 {
            return 0;
        }
        let chunk_frames = self.pipeline.input_chunk_frames();
        if self.is_before_signal || self.shared.is_separator_failed.load(Ordering::Acquire) {
            // Silence passed a chunk at a time is still passed before the handle reads it (a
            // chunk is due a latency after its first frame, and the latency holds a chunk),
            // and a chunk that starts at the first non-silent frame ends after these frames:
            // looking then is never late. The input ring holds more than a chunk.
            return self.input_frames_popped + chunk_frames as u64;
        }
        let missing = chunk_frames - self.chunk_fill;
        if missing == 0 {
            0
        } else {
            self.input_frames_popped + missing as u64
        }
    }

    /// Forwards requests to the separator and publishes what it reports. Runs between chunks,
    /// which are hop boundaries.
    fn handle_control(&mut self) {
        let separator = self.pipeline.separator_mut();
        while let Ok(command) = self.commands.try_recv() {
            match command {
                WorkerCommand::Separator(request) => separator.request(request),
            }
        }
        let stats = &self.shared.stats;
        separator.poll_events(&mut |event| match event {
            DeviceEvent::DeviceSwitched(device) => stats.record_device_switch(device),
            DeviceEvent::DeviceFellBack(device) => stats.set_active_device(Some(device)),
            DeviceEvent::DeviceSwitchFailed(warning) => stats.set_device_warning(warning),
        });
    }

    fn output_free_frames(&self) -> usize {
        self.output.slots() / self.pipeline.frame_layout().frame_samples()
    }

    /// Does one unit of work. Returns whether anything happened.
    fn step(&mut self) -> bool {
        if self.shared.is_separator_failed.load(Ordering::Acquire) {
            // Until the next reset: drain the input so the ring never fills, separate nothing.
            let available = self.input.slots();
            if let Ok(read) = self.input.read_chunk(available) {
                read.commit_all();
            }
            self.input_frames_popped += (available / 2) as u64;
            return available > 0;
        }
        if self.prefill_remaining > 0 {
            let num_frames = self.prefill_remaining.min(self.output_free_frames());
            let frame_samples = self.pipeline.frame_layout().frame_samples();
            if let Ok(mut write) = self.output.write_chunk(num_frames * frame_samples) {
                let (first, second) = write.as_mut_slices();
                first.fill(0.0);
                second.fill(0.0);
                write.commit_all();
            }
            self.prefill_remaining -= num_frames;
            self.output_frames_pushed += num_frames as u64;
            return num_frames > 0;
        }

        if self.is_before_signal {
            return self.pass_leading_silence();
        }

        // Gather input for the chunk.
        let chunk_frames = self.pipeline.input_chunk_frames();
        let wanted = chunk_frames - self.chunk_fill;
        let available = (self.input.slots() / 2).min(wanted);
        if available > 0 {
            if let Ok(read) = self.input.read_chunk(available * 2) {
                let (first, second) = read.as_slices();
                let [left, right] = self.pipeline.chunk_input_mut();
                let frames = self.chunk_fill..self.chunk_fill + available;
                deinterleave_stereo(first, second, &mut left[frames.clone()], &mut right[frames]);
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
        // After the input ended, a chunk runs only when the handle waits for frames it has not
        // got: the rest of the flush's silence is separated by nobody.
        if self.shared.is_input_ended.load(Ordering::Acquire)
            && self.output_frames_pushed >= self.shared.wanted_output_frames.load(Ordering::Acquire)
        {
            return available > 0;
        }
        // The stems are written straight into the ring, where the audio side reads them (into
        // its free slots as they are: clearing them first would be a wasted pass).
        let layout = self.pipeline.frame_layout();
        let Ok(mut write) = self
            .output
            .write_chunk_uninit(self.max_output_per_chunk * layout.frame_samples())
        else {
            // The audio side is behind; wait for it to read.
            return available > 0;
        };
        let started = Instant::now();
        let pipeline = &mut self.pipeline;
        let (first, second) = write.as_mut_slices();
        let mut sink = StemSink::new(first, second, layout);
        self.shared.set_chunk_running(true);
        let result =
            std::panic::catch_unwind(AssertUnwindSafe(|| pipeline.process_chunk(&mut sink)));
        self.shared.set_chunk_running(false);
        let num_frames = sink.written_frames();
        let stats = &self.shared.stats;
        stats.add_work(started.elapsed().as_nanos() as u64, chunk_frames as u64);
        match result {
            Ok(Ok(())) => {}
            Ok(Err(error)) => stats.record_separator_failure(error),
            Err(panic) => {
                // The separator's state is unknown: it sits out until the host resets the
                // stream (the handle outputs dry audio on Other meanwhile).
                stats.record_separator_failure(SeparatorError {
                    separator: self.pipeline.separator_name().to_owned(),
                    reason: format!("it crashed ({})", panic_message(panic.as_ref())),
                });
                self.chunk_fill = 0;
                self.shared
                    .is_separator_failed
                    .store(true, Ordering::Release);
                return true;
            }
        }
        self.chunk_fill = 0;
        // SAFETY: the sink hands out its room in order and counts what it handed out; the
        // pipeline writes every frame it takes (`emit`), so the first `num_frames` frames are
        // initialised.
        unsafe { write.commit(num_frames * layout.frame_samples()) };
        self.output_frames_pushed += num_frames as u64;
        true
    }

    /// Consumes the leading silent frames waiting in the input ring and has the same number of
    /// silent output frames written (as pre-fill); the first non-silent frame ends the leading
    /// silence. Returns whether anything happened.
    fn pass_leading_silence(&mut self) -> bool {
        let available = self.input.slots() / 2;
        let Ok(read) = self.input.read_chunk(available * 2) else {
            return false;
        };
        let (first, second) = read.as_slices();
        let num_silent = first
            .chunks_exact(2)
            .chain(second.chunks_exact(2))
            .take_while(|frame| frame[0] == 0.0 && frame[1] == 0.0)
            .count();
        read.commit(num_silent * 2);
        self.input_frames_popped += num_silent as u64;
        self.prefill_remaining += num_silent;
        if num_silent < available {
            self.is_before_signal = false;
        }
        num_silent > 0 || !self.is_before_signal
    }

    /// Discards input before the reset point, clears the pipeline and acknowledges.
    fn switch_generation(&mut self, generation: u64) {
        let reset_at = self.shared.reset_at_input_frame.load(Ordering::Acquire);
        let chunk_start = self.input_frames_popped - self.chunk_fill as u64;
        if reset_at <= self.input_frames_popped {
            // Some post-reset frames are already in the chunk: keep them.
            let keep_from = reset_at.saturating_sub(chunk_start) as usize;
            let chunk = self.pipeline.chunk_input_mut();
            for channel in chunk {
                channel.copy_within(keep_from..self.chunk_fill, 0);
            }
            self.chunk_fill -= keep_from;
            // Leading silence among the kept frames passes through like any other.
            let [left, right] = self.pipeline.chunk_input_mut();
            let num_silent = (0..self.chunk_fill)
                .take_while(|&i| left[i] == 0.0 && right[i] == 0.0)
                .count();
            for channel in [left, right] {
                channel.copy_within(num_silent..self.chunk_fill, 0);
            }
            self.chunk_fill -= num_silent;
            self.silent_kept_frames = num_silent;
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
        let is_reset = std::panic::catch_unwind(AssertUnwindSafe(|| self.pipeline.reset())).is_ok();
        self.prefill_remaining = self.prefill_frames + std::mem::take(&mut self.silent_kept_frames);
        self.is_before_signal = self.chunk_fill == 0;
        self.shared
            .generation_first_output_frame
            .store(self.output_frames_pushed, Ordering::Relaxed);
        // A separator that crashed gets its new chance here (if its reset works).
        self.shared
            .is_separator_failed
            .store(!is_reset, Ordering::Release);
        self.shared
            .acked_generation
            .store(generation, Ordering::Release);
        self.generation = generation;
        self.shared.wake_handle();
    }
}

/// The text of a panic's payload.
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
