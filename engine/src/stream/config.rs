//! How a stream is set up, and the latency it reports: a pure function of its inputs.

use std::time::Duration;

/// Extra latency that covers the host's block and the worker's scheduling in real-time mode.
pub const SCHEDULING_MARGIN_MS: f64 = 100.0;
/// How long an offline render waits for a worker that makes no progress (no model run under way,
/// none finished) before falling back to dry audio.
pub const OFFLINE_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an offline render waits for one model run under way: a big model on a slow CPU
/// (htdemucs_ft on two cores, a RoFormer at 50 times real time) takes minutes per chunk, and a
/// bounce must still be exact; only a run this long is taken for a hung device. Whole-file
/// separation ([`crate::OfflineStream`]) has no such limit: it waits as long as the worker lives
/// and a model run is under way.
pub const OFFLINE_RUN_LIMIT: Duration = Duration::from_secs(10 * 60);

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
    /// The largest block the host will pass to [`super::StemStreamHandle::process`].
    pub max_block_frames: usize,
    /// Real-time or offline at the start; [`super::StemStreamHandle::set_mode`] changes it.
    pub mode: ProcessingMode,
    /// The stream is never played live (whole-file separation, [`crate::OfflineStream`]): its
    /// latency leaves out the scheduling margin, which only real-time blocks need — an offline
    /// block waits for its frames. The stems are the same either way (a latency only shifts
    /// them); a shorter one means less silence separated after the end.
    pub is_offline_only: bool,
}

/// The latency a stream reports: the pipeline's delay and chunk quantization plus, unless it is
/// never played live, the scheduling margin, which is at least one host block. A pure function
/// of its inputs.
pub fn stream_latency_samples(
    pipeline_delay_samples: usize,
    pipeline_quantization_samples: usize,
    host_sample_rate_hz: u32,
    max_block_frames: usize,
    is_offline_only: bool,
) -> usize {
    let margin_samples =
        ((SCHEDULING_MARGIN_MS / 1000.0) * host_sample_rate_hz as f64).ceil() as usize;
    let margin_samples = if is_offline_only {
        0
    } else {
        margin_samples.max(max_block_frames)
    };
    pipeline_delay_samples + pipeline_quantization_samples + margin_samples
}
