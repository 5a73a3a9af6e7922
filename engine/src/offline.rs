//! Whole-buffer separation through the same streaming path the plugin's offline render uses.

use crate::separator::Separator;
use crate::stem::{Stem, NUM_STEMS};
use crate::stream::{spawn_stream, ProcessingMode, StreamConfig};
use crate::EngineError;

/// Block size used to feed the stream. Any size gives the same result; this one is fast.
pub const OFFLINE_BLOCK_FRAMES: usize = 4096;

/// Separated stems, aligned with the input (no latency offset), same length and rate.
pub struct SeparatedStems {
    /// The sample rate of input and stems.
    pub sample_rate_hz: u32,
    /// `[stem][channel][frame]` in [`Stem::ALL`] order.
    pub stems: [[Vec<f32>; 2]; NUM_STEMS],
    /// The latency the stream had (and that was removed).
    pub latency_samples: usize,
}

impl SeparatedStems {
    /// One stem's channels.
    pub fn stem(&self, stem: Stem) -> &[Vec<f32>; 2] {
        &self.stems[stem.index()]
    }
}

/// Separates a whole stereo signal. Runs the stream in offline mode, feeds the input followed by
/// `latency` frames of silence and keeps the output from frame `latency` on, so the result is
/// exactly what the plugin renders offline, shifted by its latency. Not realtime-safe.
pub fn separate(
    separator: Box<dyn Separator>,
    input: &[Vec<f32>; 2],
    sample_rate_hz: u32,
) -> Result<SeparatedStems, EngineError> {
    separate_with_progress(separator, input, sample_rate_hz, |_| {})
}

/// [`separate`], calling `progress` with the fraction done (0..=1) after each block.
pub fn separate_with_progress(
    separator: Box<dyn Separator>,
    input: &[Vec<f32>; 2],
    sample_rate_hz: u32,
    mut progress: impl FnMut(f32),
) -> Result<SeparatedStems, EngineError> {
    assert_eq!(input[0].len(), input[1].len(), "channels differ in length");
    let config = StreamConfig {
        host_sample_rate_hz: sample_rate_hz as f32,
        max_block_frames: OFFLINE_BLOCK_FRAMES,
        mode: ProcessingMode::Offline,
    };
    let (mut handle, worker) = spawn_stream(separator, &config)?;
    let latency = handle.latency_samples();
    let num_frames = input[0].len();
    let total_frames = num_frames + latency;
    let mut stems: [[Vec<f32>; 2]; NUM_STEMS] = std::array::from_fn(|_| {
        [
            Vec::with_capacity(num_frames),
            Vec::with_capacity(num_frames),
        ]
    });
    let silence = vec![0.0f32; OFFLINE_BLOCK_FRAMES];
    let mut position = 0;
    while position < total_frames {
        let block = OFFLINE_BLOCK_FRAMES.min(total_frames - position);
        let (left, right): (&[f32], &[f32]) = if position + block <= num_frames {
            (
                &input[0][position..position + block],
                &input[1][position..position + block],
            )
        } else if position >= num_frames {
            (&silence[..block], &silence[..block])
        } else {
            // The block straddles the end of the input; split it so the stream sees the same
            // samples (input then silence) as it would from a host.
            let head = num_frames - position;
            handle.process(&input[0][position..], &input[1][position..]);
            collect(&handle, position, head, latency, &mut stems);
            position += head;
            continue;
        };
        handle.process(left, right);
        collect(&handle, position, block, latency, &mut stems);
        position += block;
        progress(position as f32 / total_frames as f32);
    }
    if let Some(error) = worker.stats().worker_error() {
        return Err(EngineError::Worker(error));
    }
    if worker.stats().underrun_frames() > 0 {
        return Err(EngineError::Worker(
            "the worker did not deliver every frame".into(),
        ));
    }
    Ok(SeparatedStems {
        sample_rate_hz,
        stems,
        latency_samples: latency,
    })
}

/// Appends the block's output frames that fall at or after `latency` to `stems`.
fn collect(
    handle: &crate::stream::StemStreamHandle,
    position: usize,
    block: usize,
    latency: usize,
    stems: &mut [[Vec<f32>; 2]; NUM_STEMS],
) {
    let skip = latency.saturating_sub(position).min(block);
    for stem in Stem::ALL {
        for channel in 0..2 {
            stems[stem.index()][channel]
                .extend_from_slice(&handle.stem_output(stem, channel)[skip..block]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::BuiltinSeparator;
    use crate::demo_song::DemoSong;

    #[test]
    fn offline_stems_sum_to_the_input() {
        let song = DemoSong::generate(44_100, 3.0);
        let mix = song.mix();
        let result = separate(Box::new(BuiltinSeparator::new()), &mix, 44_100).unwrap();
        for channel in 0..2 {
            assert_eq!(result.stems[0][channel].len(), mix[channel].len());
            for (t, &x) in mix[channel].iter().enumerate() {
                let sum: f32 = (0..NUM_STEMS).map(|s| result.stems[s][channel][t]).sum();
                assert!((sum - x).abs() <= 1e-5, "t={t}: {sum} vs {x}");
            }
        }
    }

    #[test]
    fn offline_result_is_identical_across_rates_calls() {
        let song = DemoSong::generate(48_000, 1.5);
        let mix = song.mix();
        let a = separate(Box::new(BuiltinSeparator::new()), &mix, 48_000).unwrap();
        let b = separate(Box::new(BuiltinSeparator::new()), &mix, 48_000).unwrap();
        assert_eq!(a.stems, b.stems);
    }
}
