//! The real-time boundary: [`StemStreamHandle`] on the audio thread, the worker thread behind
//! it (owned by a [`StemStreamController`] on the main thread), talking through lock-free `rtrb`
//! ring buffers and a few atomics.
//!
//! - `handle.rs`: everything the audio thread runs;
//! - `worker.rs`: the worker thread's loop and its commands;
//! - `controller.rs`: the main thread's owner of the worker;
//! - `stats.rs`: counters and status for displays; `config.rs`: set-up and latency;
//!   `shared.rs`: the flags, handshakes and wake-up between the two threads.
//!
//! Timeline: the handle reports a fixed latency `L`. Output frame `t` of every stem is the stem of
//! input frame `t − L`. The worker's `StemPipeline` delays by `D ≤ L`; the output ring is
//! pre-filled with `L − D` silent frames, so each frame the audio thread reads lines up without
//! any bookkeeping. The ring carries the separated stems only
//! (`stem_sink::StemFrameLayout`): the handle already keeps its input delayed by `L`
//! for fallback and bypass, and computes `Other` from it as the exact residual,
//! `input(t − L) − (vocals + drums + bass + guitar + piano)`, so the stems sum to the input.
//!
//! When a frame is not ready in time (an underrun, real-time mode only), the handle outputs the
//! dry input delayed by `L` on `Other` and silence on the other stems, keeps the mix complete,
//! and later drops the late frame so the timeline never shifts.
//!
//! In offline mode the handle waits for the worker instead (sleeping on a condition variable),
//! so every frame is separated and the result is bit-identical whatever the host's block size.
//!
//! A reset (transport jump) is a generation counter: the handle publishes the input frame count
//! at which the new generation starts, the worker discards everything before it, clears its
//! pipeline and acknowledges with the output frame count at which new-generation frames start.
//! Nothing is allocated or freed on the audio thread.

mod config;
mod controller;
mod handle;
mod shared;
mod stats;
#[cfg(test)]
mod tests;
mod worker;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use rtrb::RingBuffer;

pub use config::{
    stream_latency_samples, ProcessingMode, StreamConfig, OFFLINE_RUN_LIMIT, OFFLINE_WAIT_TIMEOUT,
    SCHEDULING_MARGIN_MS,
};
pub use controller::StemStreamController;
pub use handle::StemStreamHandle;
pub use stats::{StreamStats, StreamStatus};

use crate::error::EngineError;
use crate::pipeline::StemPipeline;
use crate::separator::Separator;
use handle::HandleParts;
use shared::Shared;
use worker::StemStreamWorker;

/// Creates a handle and the worker thread behind it, owned by the returned controller.
/// Not realtime-safe: allocates and spawns a thread.
pub fn spawn_stream(
    separator: Box<dyn Separator>,
    config: &StreamConfig,
) -> Result<(StemStreamHandle, StemStreamController), EngineError> {
    let host_rate_hz = crate::error::validate_sample_rate(config.host_sample_rate_hz)?;
    if config.max_block_frames == 0 || config.max_block_frames > 1 << 20 {
        return Err(EngineError::InvalidBlockSize(config.max_block_frames));
    }
    let pipeline = StemPipeline::new(separator, host_rate_hz)?;
    let latency_samples = stream_latency_samples(
        pipeline.delay_samples(),
        pipeline.quantization_samples(),
        host_rate_hz,
        config.max_block_frames,
        config.is_offline_only,
    );
    let prefill_frames = latency_samples - pipeline.delay_samples();
    let max_output_per_chunk = pipeline.max_output_frames_per_chunk();
    let frame_layout = pipeline.frame_layout();
    let frame_samples = frame_layout.frame_samples();
    let chunk_frames = pipeline.input_chunk_frames();

    // The latency, a block and a chunk, and at least a second: a worker stalled that long has
    // been late for a while (its output is due a latency after its input), so input is dropped
    // (and the pipeline restarted) only after the stems have already fallen back to dry audio.
    let input_capacity_frames =
        (latency_samples + config.max_block_frames + chunk_frames).max(host_rate_hz as usize);
    // The ring never holds more than the pre-fill, a block and a chunk's output: output frames
    // pushed are the pre-fill plus the input frames processed, and the handle reads a block for
    // each block it writes; the worker writes a chunk only when it fits, and after a reset
    // writes the new pre-fill only as the handle drops the old frames. (The pipeline's delay,
    // most of a long model's latency, is history inside the pipeline, not frames in the ring.)
    let output_capacity_frames = prefill_frames + config.max_block_frames + max_output_per_chunk;
    let (input_producer, input_consumer) = RingBuffer::new(input_capacity_frames * 2);
    let (mut output_producer, output_consumer) =
        RingBuffer::new(output_capacity_frames * frame_samples);

    // The initial pre-fill goes in before the thread starts, so real-time playback starts
    // without underruns however slowly the worker wakes up.
    for _ in 0..prefill_frames * frame_samples {
        let _ = output_producer.push(0.0);
    }

    let stats = Arc::new(StreamStats::default());
    stats.set_active_device(pipeline.separator().device());
    let (command_sender, command_receiver) = crossbeam_channel::unbounded();
    let shared = Arc::new(Shared::new(stats));

    let worker = StemStreamWorker {
        pipeline,
        input: input_consumer,
        output: output_producer,
        shared: shared.clone(),
        commands: command_receiver,
        generation: 0,
        input_frames_popped: 0,
        output_frames_pushed: prefill_frames as u64,
        prefill_frames,
        prefill_remaining: 0,
        chunk_fill: 0,
        max_output_per_chunk,
        is_before_signal: true,
        silent_kept_frames: 0,
    };
    let thread_shared = shared.clone();
    let join_handle = std::thread::Builder::new()
        .name("stemflow-worker".into())
        .spawn(move || {
            crate::dsp::flush_denormals_on_this_thread();
            let result = std::panic::catch_unwind(AssertUnwindSafe(move || worker.run()));
            let separator = match result {
                Ok(separator) => Some(separator),
                Err(panic) => {
                    let message = worker::panic_message(panic.as_ref());
                    log::error!("Stemflow worker stopped: {message}");
                    thread_shared.stats.set_worker_error(message);
                    None
                }
            };
            thread_shared
                .is_worker_alive
                .store(false, std::sync::atomic::Ordering::Release);
            thread_shared.wake_handle();
            separator
        })
        .map_err(|e| EngineError::Worker(e.to_string()))?;

    let handle = StemStreamHandle::new(HandleParts {
        input: input_producer,
        output: output_consumer,
        shared: shared.clone(),
        worker_thread: join_handle.thread().clone(),
        mode: config.mode,
        latency_samples,
        max_block_frames: config.max_block_frames,
        frame_layout,
    });
    let controller = StemStreamController {
        shared,
        join_handle: Some(join_handle),
        latency_samples,
        commands: command_sender,
    };
    Ok((handle, controller))
}
