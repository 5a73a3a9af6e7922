//! Deterministic test signals and block-size schedules.
//!
//! Everything here is a pure function of its arguments (a seed where randomness is involved), so a
//! failing test reproduces exactly.

use std::f32::consts::TAU;

pub use stemflow_kit::testing::XorShift64;

/// How a host splits a long buffer into `process()` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockSizes {
    /// Every block has this many frames (the last one may be shorter).
    Fixed(usize),
    /// Block sizes drawn uniformly from `1..=max` by [`XorShift64`] seeded with `seed`.
    Random {
        /// Seed of the size sequence.
        seed: u64,
        /// Largest block, also the maximum declared at activation.
        max: usize,
    },
}

impl BlockSizes {
    /// The largest block this schedule produces: what the host declares as `max_frames_count`.
    pub fn max_block_frames(&self) -> usize {
        match *self {
            BlockSizes::Fixed(n) => n,
            BlockSizes::Random { max, .. } => max,
        }
    }

    /// The smallest block this schedule may produce, ignoring a shorter last block.
    pub fn min_block_frames(&self) -> usize {
        match *self {
            BlockSizes::Fixed(n) => n,
            BlockSizes::Random { .. } => 1,
        }
    }

    /// The `(start, len)` of every block covering `num_frames` frames, in order.
    pub fn blocks(&self, num_frames: usize) -> Vec<(usize, usize)> {
        assert!(
            self.max_block_frames() > 0,
            "blocks must hold at least one frame"
        );
        let mut rng = match *self {
            BlockSizes::Random { seed, .. } => Some(XorShift64::new(seed)),
            BlockSizes::Fixed(_) => None,
        };
        let mut blocks = Vec::new();
        let mut start = 0;
        while start < num_frames {
            let wanted = match (self, rng.as_mut()) {
                (BlockSizes::Fixed(n), _) => *n,
                (BlockSizes::Random { max, .. }, Some(rng)) => rng.next_in(1, *max),
                (BlockSizes::Random { .. }, None) => unreachable!(),
            };
            let len = wanted.min(num_frames - start);
            blocks.push((start, len));
            start += len;
        }
        blocks
    }
}

/// A few seconds of deterministic "music" for the separator: a bass line (sine + 2nd harmonic),
/// a vibrato "voice" with harmonics, noise-burst "drums" with a kick sweep, and a click train.
/// Stereo (`[left, right]`), peak below 1.0, different content per channel.
///
/// Use this where the engine's demo song is not wanted or not available; it costs nothing.
pub fn test_song(sample_rate_hz: u32, duration_s: f32, seed: u64) -> Vec<Vec<f32>> {
    let sr = sample_rate_hz as f32;
    let num_frames = (duration_s * sr).round() as usize;
    let mut rng = XorShift64::new(seed);
    let mut left = vec![0.0f32; num_frames];
    let mut right = vec![0.0f32; num_frames];

    let bass_notes_hz = [55.0f32, 55.0, 73.42, 65.41];
    let voice_notes_hz = [220.0f32, 246.94, 261.63, 293.66, 329.63, 293.66];
    let beat_frames = ((0.25 * sr) as usize).max(1);
    let click_frames = ((0.5 * sr) as usize).max(1);

    let mut bass_phase = 0.0f32;
    let mut voice_phase = 0.0f32;
    let mut drum_env = 0.0f32;
    let mut kick_phase = 0.0f32;
    let mut kick_time_s = f32::INFINITY;
    for i in 0..num_frames {
        let t = i as f32 / sr;

        let bass_hz = bass_notes_hz[(t / 1.0) as usize % bass_notes_hz.len()];
        bass_phase = (bass_phase + bass_hz / sr).fract();
        let bass = 0.22 * (TAU * bass_phase).sin() + 0.06 * (2.0 * TAU * bass_phase).sin();

        let voice_hz = voice_notes_hz[(t / 0.5) as usize % voice_notes_hz.len()]
            * (1.0 + 0.01 * (TAU * 5.5 * t).sin());
        voice_phase = (voice_phase + voice_hz / sr).fract();
        let voice_env = 0.5 + 0.5 * (TAU * 0.7 * t).sin().abs();
        let voice = 0.12
            * voice_env
            * ((TAU * voice_phase).sin()
                + 0.5 * (2.0 * TAU * voice_phase).sin()
                + 0.25 * (3.0 * TAU * voice_phase).sin());

        if i % beat_frames == 0 {
            drum_env = 1.0;
            if (i / beat_frames).is_multiple_of(2) {
                kick_time_s = 0.0;
                kick_phase = 0.0;
            }
        }
        drum_env *= (-1.0 / (0.03 * sr)).exp();
        let noise_l = rng.next_bipolar();
        let noise_r = rng.next_bipolar();
        let mut kick = 0.0;
        if kick_time_s < 0.3 {
            let kick_hz = 50.0 + 100.0 * (-kick_time_s / 0.04).exp();
            kick_phase = (kick_phase + kick_hz / sr).fract();
            kick = 0.3 * (-kick_time_s / 0.12).exp() * (TAU * kick_phase).sin();
            kick_time_s += 1.0 / sr;
        }

        let click = if i % click_frames == click_frames / 3 {
            0.25
        } else {
            0.0
        };

        left[i] = bass + 0.8 * voice + 0.15 * drum_env * noise_l + kick + click;
        right[i] = bass + 1.0 * voice + 0.15 * drum_env * noise_r + kick - 0.5 * click;
    }
    vec![left, right]
}

/// `num_channels` channels of `num_frames` zeros with a single `amplitude` sample at `at_frame`
/// in every channel.
pub fn impulse(
    num_channels: usize,
    num_frames: usize,
    at_frame: usize,
    amplitude: f32,
) -> Vec<Vec<f32>> {
    assert!(
        at_frame < num_frames,
        "impulse at {at_frame} outside {num_frames} frames"
    );
    (0..num_channels)
        .map(|_| {
            let mut channel = vec![0.0; num_frames];
            channel[at_frame] = amplitude;
            channel
        })
        .collect()
}

/// Each channel followed by `num_frames` zeros (to flush a latency's worth of output).
pub fn pad_end(channels: &[Vec<f32>], num_frames: usize) -> Vec<Vec<f32>> {
    channels
        .iter()
        .map(|c| {
            let mut padded = c.clone();
            padded.resize(c.len() + num_frames, 0.0);
            padded
        })
        .collect()
}

/// Output buffers, `num_frames` long, for ports of `channel_counts` channels each, filled with
/// NaN so that a sample the plugin leaves unwritten fails every comparison.
pub fn nan_ports(
    channel_counts: impl IntoIterator<Item = u32>,
    num_frames: usize,
) -> Vec<Vec<Vec<f32>>> {
    channel_counts
        .into_iter()
        .map(|count| vec![vec![f32::NAN; num_frames]; count as usize])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_schedules_cover_the_buffer_exactly() {
        for sizes in [
            BlockSizes::Fixed(1),
            BlockSizes::Fixed(64),
            BlockSizes::Fixed(1000),
            BlockSizes::Random { seed: 7, max: 300 },
        ] {
            let blocks = sizes.blocks(12_345);
            let mut next = 0;
            for &(start, len) in &blocks {
                assert_eq!(start, next);
                assert!(len >= 1 && len <= sizes.max_block_frames());
                next += len;
            }
            assert_eq!(next, 12_345);
        }
    }

    #[test]
    fn random_block_sizes_vary_and_repeat_per_seed() {
        let a = BlockSizes::Random { seed: 3, max: 4096 }.blocks(100_000);
        let b = BlockSizes::Random { seed: 3, max: 4096 }.blocks(100_000);
        assert_eq!(a, b);
        let distinct: std::collections::BTreeSet<usize> = a.iter().map(|b| b.1).collect();
        assert!(distinct.len() > 10);
    }

    #[test]
    fn test_song_is_deterministic_and_bounded() {
        let a = test_song(44_100, 1.0, 1);
        let b = test_song(44_100, 1.0, 1);
        assert_eq!(a, b);
        assert_eq!(a[0].len(), 44_100);
        let peak = a.iter().flatten().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!(peak > 0.3 && peak < 1.0, "peak {peak}");
        assert_ne!(a[0], a[1]);
    }
}
