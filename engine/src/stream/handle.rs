//! [`StemStreamHandle`]: the audio-thread side of a stream. Owns every buffer it touches;
//! nothing in it allocates, locks or frees in real-time mode.

use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

use rtrb::{Consumer, Producer};

use super::config::{ProcessingMode, OFFLINE_RUN_LIMIT, OFFLINE_WAIT_TIMEOUT};
use super::shared::Shared;
use super::stats::StreamStats;
use crate::dsp::{flush_subnormal, sanitize_into};
use crate::interleave::interleave_stereo;
use crate::stem::{ExtraStems, Stem, NUM_STEMS};
use crate::stem_sink::StemFrameLayout;

/// The audio-thread side of a stream. Owns every buffer it touches; nothing in it allocates.
pub struct StemStreamHandle {
    /// Sanitized stereo input, interleaved, to the worker.
    input: Producer<f32>,
    /// Finished frames of separated stems from the worker (`Other` is computed here).
    output: Consumer<f32>,
    /// What each of those frames carries.
    frame_layout: StemFrameLayout,
    shared: Arc<Shared>,
    /// To wake the worker after pushing input.
    worker_thread: Thread,
    mode: ProcessingMode,
    /// How long an offline block waits for the worker before it falls back to dry audio.
    offline_wait_timeout: Duration,
    /// See [`StemStreamHandle::set_offline_wait`].
    offline_run_limit: Duration,
    latency_samples: usize,
    max_block_frames: usize,
    /// The newest reset generation this handle requested.
    generation: u64,
    /// True from a reset until the worker acknowledged it.
    is_awaiting_ack: bool,
    input_frames_pushed: u64,
    /// Wake-ups of the worker after input (tests count them).
    #[cfg(test)]
    input_wakeups: u64,
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

/// Everything [`StemStreamHandle::new`] needs, assembled by [`super::spawn_stream`].
pub(super) struct HandleParts {
    pub input: Producer<f32>,
    pub output: Consumer<f32>,
    pub shared: Arc<Shared>,
    pub worker_thread: Thread,
    pub mode: ProcessingMode,
    pub latency_samples: usize,
    pub max_block_frames: usize,
    pub frame_layout: StemFrameLayout,
}

impl StemStreamHandle {
    /// Allocates the handle's buffers. Not realtime-safe: allocates.
    pub(super) fn new(parts: HandleParts) -> Self {
        let HandleParts {
            input,
            output,
            shared,
            worker_thread,
            mode,
            latency_samples,
            max_block_frames,
            frame_layout,
        } = parts;
        let max_block = max_block_frames;
        Self {
            input,
            output,
            frame_layout,
            shared,
            worker_thread,
            mode,
            offline_wait_timeout: OFFLINE_WAIT_TIMEOUT,
            offline_run_limit: OFFLINE_RUN_LIMIT,
            latency_samples,
            max_block_frames,
            generation: 0,
            is_awaiting_ack: false,
            input_frames_pushed: 0,
            #[cfg(test)]
            input_wakeups: 0,
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
        }
    }

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

    /// Switches between live playback and an offline render from the next block on, without a
    /// gap: the timeline and latency stay as they are; offline blocks wait for the worker,
    /// real-time blocks never do. Realtime-safe.
    pub fn set_mode(&mut self, mode: ProcessingMode) {
        self.mode = mode;
    }

    /// How long an offline block may wait for a worker that makes no progress before it gives
    /// up and outputs dry audio on `Other` (default [`OFFLINE_WAIT_TIMEOUT`]), and how long for
    /// one model run under way (default [`OFFLINE_RUN_LIMIT`]; never less than `timeout`).
    /// Realtime-safe.
    pub fn set_offline_wait(&mut self, timeout: Duration, run_limit: Duration) {
        self.offline_wait_timeout = timeout;
        self.offline_run_limit = run_limit.max(timeout);
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

    /// Says that the input has ended: the blocks that follow are silence flushing the latency
    /// (whole-file separation), so the worker separates only the frames this handle waits for
    /// from now on — no model run wholly in the silence after the end. Offline mode only;
    /// later input is still separated, but only on demand. Realtime-safe.
    pub fn end_input(&mut self) {
        self.shared.is_input_ended.store(true, Ordering::Release);
        self.worker_thread.unpark();
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
            let dest = &mut self.input_scratch[channel][..num_frames];
            num_non_finite += sanitize_into(&source[..num_frames], dest) as u64;
        }
        if num_non_finite > 0 {
            self.shared.stats.add_non_finite_input(num_non_finite);
        }

        // 2. Hand the input to the worker. A full ring means the worker stalled: restart the
        //    pipeline after this block rather than shift the timeline.
        let is_pushed = self.push_input(num_frames);

        // 3. The dry signal delayed by the latency, for fallback and bypass.
        self.update_dry_delay(num_frames);
        self.wake_worker_if_wanted();

        // 4. Read the stems.
        if self.is_awaiting_ack && !self.check_ack() && self.mode == ProcessingMode::Offline {
            let shared = self.shared.clone();
            let generation = self.generation;
            if shared.wait_until(
                self.offline_wait_timeout,
                self.offline_run_limit,
                false,
                || shared.acked_generation.load(Ordering::Acquire) == generation,
            ) {
                self.check_ack();
            }
        }
        let is_separator_failed = self.shared.is_separator_failed.load(Ordering::Acquire);
        if is_separator_failed && !self.is_awaiting_ack {
            // The separator crashed and sits out until a reset: dry audio on Other, and the
            // frames it will not deliver are not owed.
            self.output_fallback(0, num_frames);
        } else if self.is_awaiting_ack || !is_pushed {
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
        if self.frame_layout == StemFrameLayout::FiveStems {
            // (Without guitar and piano, both choices are the same.)
            self.extra_stems
                .apply(&mut self.stem_outputs, 0..num_frames);
        }
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
        // The ring's free slots are written as they are: clearing them first (rtrb's
        // `write_chunk`) would be a wasted pass over every sample.
        let Ok(mut chunk) = self.input.write_chunk_uninit(num_frames * 2) else {
            self.shared.stats.add_input_overflow();
            return false;
        };
        let (first, second) = chunk.as_mut_slices();
        let [left, right] = &self.input_scratch;
        interleave_stereo(&left[..num_frames], &right[..num_frames], first, second);
        // SAFETY: the chunk is `num_frames` pairs long, and `interleave_stereo` wrote every pair
        // (it panics rather than leave one out).
        unsafe { chunk.commit_all() };
        self.input_frames_pushed += num_frames as u64;
        true
    }

    /// Wakes the worker once it has the input it sleeps until (live mode: usually a whole
    /// chunk, so a host's small blocks do not each cost a system call here and a context switch
    /// there), and at every block in offline mode.
    fn wake_worker_if_wanted(&mut self) {
        // Pairs with the fence in the worker's `sleep`: either this load sees what it now
        // waits for, or the worker sees the frames just pushed and does not sleep.
        fence(Ordering::SeqCst);
        let wanted = self.shared.wanted_input_frames.load(Ordering::Relaxed);
        if self.mode == ProcessingMode::Offline || self.input_frames_pushed >= wanted {
            self.worker_thread.unpark();
            #[cfg(test)]
            {
                self.input_wakeups += 1;
            }
        }
    }

    /// How often [`StemStreamHandle::process`] woke the worker.
    #[cfg(test)]
    pub(super) fn input_wakeups(&self) -> u64 {
        self.input_wakeups
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
        // The ring holds the latency and a block, so writing the whole block before reading
        // overwrites nothing that is still to be read.
        let len = self.dry_delay[0].len();
        let write_start = self.dry_write_pos;
        let read_start = (write_start + len - self.latency_samples) % len;
        for (channel, ring) in self.dry_delay.iter_mut().enumerate() {
            let input = &self.input_scratch[channel][..num_frames];
            let first = (len - write_start).min(num_frames);
            ring[write_start..write_start + first].copy_from_slice(&input[..first]);
            ring[..num_frames - first].copy_from_slice(&input[first..]);
            let output = &mut self.dry_output[channel][..num_frames];
            let first = (len - read_start).min(num_frames);
            output[..first].copy_from_slice(&ring[read_start..read_start + first]);
            output[first..].copy_from_slice(&ring[..num_frames - first]);
        }
        // Until the latency has passed since the reset, the delayed input is silence.
        let num_silent = (self.latency_samples as u64)
            .saturating_sub(self.frames_since_reset)
            .min(num_frames as u64) as usize;
        for output in &mut self.dry_output {
            output[..num_silent].fill(0.0);
        }
        self.dry_write_pos = (write_start + num_frames) % len;
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
        self.output.slots() / self.frame_layout.frame_samples()
    }

    fn drop_frames(&mut self, num_frames: usize) -> usize {
        let num_frames = num_frames.min(self.available_frames());
        if let Ok(chunk) = self
            .output
            .read_chunk(num_frames * self.frame_layout.frame_samples())
        {
            chunk.commit_all();
        }
        self.output_frames_popped += num_frames as u64;
        num_frames
    }

    /// Offline mode: waits until `num_frames` frames are in the ring (or the worker died, the
    /// separator crashed, or the wait timed out). Returns whether they are.
    fn wait_for_output(&self, num_frames: usize) -> bool {
        if self.available_frames() >= num_frames {
            return true;
        }
        self.shared.wanted_output_frames.store(
            self.output_frames_popped + num_frames as u64,
            Ordering::Release,
        );
        // After the input ended, the worker waits for this.
        self.worker_thread.unpark();
        let output = &self.output;
        let frame_samples = self.frame_layout.frame_samples();
        self.shared.wait_until(
            self.offline_wait_timeout,
            self.offline_run_limit,
            true,
            || output.slots() / frame_samples >= num_frames,
        )
    }

    /// Reads the stems for frames `start..end` of the block.
    fn read_stems(&mut self, start: usize, end: usize) {
        let num_frames = end - start;
        if num_frames == 0 {
            return;
        }
        if self.mode == ProcessingMode::Offline {
            // Frames owed from a live stretch (the handle played dry audio in their place) are
            // dropped as they arrive, so the ring never has to hold them all at once.
            while self.owed_output_frames > 0 {
                let dropped = self.drop_frames(self.owed_output_frames as usize);
                self.owed_output_frames -= dropped as u64;
                if self.owed_output_frames > 0 && !self.wait_for_output(1) {
                    break;
                }
            }
            if self.owed_output_frames == 0 {
                self.wait_for_output(num_frames);
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
        let layout = self.frame_layout;
        if let Ok(chunk) = self
            .output
            .read_chunk(ready_frames * layout.frame_samples())
        {
            const THREE: usize = StemFrameLayout::ThreeStems.frame_samples();
            const FIVE: usize = StemFrameLayout::FiveStems.frame_samples();
            let (first, second) = chunk.as_slices();
            let mut offset = start;
            for part in [first, second] {
                let (outputs, dry) = (&mut self.stem_outputs, &self.dry_output);
                offset += match layout {
                    StemFrameLayout::ThreeStems => {
                        copy_stem_frames::<THREE>(part, outputs, dry, offset)
                    }
                    StemFrameLayout::FiveStems => {
                        copy_stem_frames::<FIVE>(part, outputs, dry, offset)
                    }
                };
            }
            chunk.commit_all();
        }
        self.output_frames_popped += ready_frames as u64;
        if ready_frames < num_frames {
            let missing = num_frames - ready_frames;
            self.output_fallback(start + ready_frames, end);
            self.owed_output_frames += missing as u64;
            self.shared.stats.add_underrun(missing as u64);
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

/// Copies the interleaved frames of `WIDTH` separated samples in `ring` into `stem_outputs` from
/// frame `offset` on, in one pass, and writes `Other` there: the dry input (delayed by the
/// latency, as the stems are) less the separated stems' sum, summed in [`Stem::ALL`] order from
/// zero, so the six stems add up to the input exactly. (The stems a layout does not carry are
/// silent, and a sum from zero is unchanged by adding zeros: it is never −0.) Returns the frames
/// copied.
#[inline]
fn copy_stem_frames<const WIDTH: usize>(
    ring: &[f32],
    stem_outputs: &mut [[Vec<f32>; 2]; NUM_STEMS],
    dry_output: &[Vec<f32>; 2],
    offset: usize,
) -> usize {
    let (frames, _) = ring.as_chunks::<WIDTH>();
    let range = offset..offset + frames.len();
    let [separated @ .., other] = stem_outputs;
    // Output channel `sample` is the frame's sample of the same index: stem `sample / 2`,
    // channel `sample % 2`.
    let mut channels = separated
        .iter_mut()
        .flatten()
        .map(|channel| &mut channel[range.clone()]);
    let mut outputs: [&mut [f32]; WIDTH] = std::array::from_fn(|_| channels.next().unwrap());
    let [other_left, other_right] = other;
    let mut others = [
        &mut other_left[range.clone()],
        &mut other_right[range.clone()],
    ];
    let dry = [&dry_output[0][range.clone()], &dry_output[1][range]];
    for (i, frame) in frames.iter().enumerate() {
        for (output, &value) in outputs.iter_mut().zip(frame) {
            output[i] = value;
        }
        for (channel, other) in others.iter_mut().enumerate() {
            let mut sum = 0.0;
            for stem in 0..WIDTH / 2 {
                sum += frame[stem * 2 + channel];
            }
            other[i] = flush_subnormal(dry[channel][i] - sum);
        }
    }
    frames.len()
}
