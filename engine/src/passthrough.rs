//! [`PassthroughSeparator`]: puts its whole input on Vocals after a fixed delay, so the
//! streaming machinery's timing can be checked exactly; and, for tests, `WeightedSixStems`, a
//! six-stem separator whose every stem carries something.

use crate::planar::PlanarBlock;
use crate::separator::{stem_channel, Separator, SeparatorError, SeparatorInfo};

/// A separator that puts its whole input on the Vocals stem after a fixed delay. It exists to
/// test the streaming machinery: with it, every stem's timing can be checked exactly.
pub struct PassthroughSeparator {
    info: SeparatorInfo,
    /// Delay line per channel, `latency_frames + hop_frames` long, oldest first.
    delay: [Vec<f32>; 2],
}

impl PassthroughSeparator {
    /// Creates the separator. Not realtime-safe: allocates.
    pub fn new(sample_rate_hz: u32, hop_frames: usize, latency_frames: usize) -> Self {
        let len = latency_frames + hop_frames;
        Self {
            info: SeparatorInfo::new(
                "Passthrough (test)",
                sample_rate_hz,
                hop_frames,
                latency_frames,
            ),
            delay: [vec![0.0; len], vec![0.0; len]],
        }
    }
}

impl Separator for PassthroughSeparator {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn reset(&mut self) {
        for channel in &mut self.delay {
            channel.fill(0.0);
        }
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        let (hop_frames, latency_frames) = (self.info.hop_frames(), self.info.latency_frames());
        stems.clear();
        for channel in 0..2 {
            let delay = &mut self.delay[channel];
            delay[latency_frames..].copy_from_slice(input.channel(channel));
            stems
                .channel_mut(stem_channel(0, channel))
                .copy_from_slice(&delay[..hop_frames]);
            delay.copy_within(hop_frames.., 0);
        }
        Ok(())
    }
}

/// A six-stem separator whose stems are different fixed weights of its input, so each stem's
/// channel is non-silent and their sum is not the input.
#[cfg(test)]
pub(crate) struct WeightedSixStems(SeparatorInfo);

#[cfg(test)]
impl WeightedSixStems {
    pub(crate) fn new() -> Self {
        Self(
            SeparatorInfo::new("weighted six stems", 44_100, 256, 0)
                .with_delivered_stems(crate::stem::Stem::ALL),
        )
    }
}

#[cfg(test)]
impl Separator for WeightedSixStems {
    fn info(&self) -> &SeparatorInfo {
        &self.0
    }
    fn reset(&mut self) {}
    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        for stem in 0..crate::stem::NUM_SEPARATED_STEMS {
            for channel in 0..2 {
                let weight = 0.1 + 0.07 * (stem * 2 + channel) as f32;
                let output = stems.channel_mut(stem_channel(stem, channel));
                for (out, &x) in output.iter_mut().zip(input.channel(channel)) {
                    *out = weight * x;
                }
            }
        }
        Ok(())
    }
}
