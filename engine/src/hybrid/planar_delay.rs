//! [`PlanarDelay`]: a fixed delay of planar channels, for lining up separators of different
//! latencies (a route's stages, an ensemble's members).

/// A fixed delay of planar channels. Realtime-safe after [`PlanarDelay::new`].
pub(crate) struct PlanarDelay {
    buffers: Vec<Vec<f32>>,
    position: usize,
}

impl PlanarDelay {
    /// `num_channels` channels delayed by `delay_frames`. Not realtime-safe: allocates.
    pub(crate) fn new(num_channels: usize, delay_frames: usize) -> Self {
        Self {
            buffers: vec![vec![0.0; delay_frames]; num_channels],
            position: 0,
        }
    }

    /// Replaces `samples` of `channel` by what went in `delay` frames earlier. All channels
    /// must be processed with the same lengths, in order, before [`PlanarDelay::advance`].
    /// Realtime-safe.
    pub(crate) fn process(&mut self, channel: usize, samples: &mut [f32]) {
        let buffer = &mut self.buffers[channel];
        if buffer.is_empty() {
            return;
        }
        let mut position = self.position;
        for sample in samples {
            std::mem::swap(sample, &mut buffer[position]);
            position = (position + 1) % buffer.len();
        }
    }

    /// Moves on by `num_frames`, once every channel was processed. Realtime-safe.
    pub(crate) fn advance(&mut self, num_frames: usize) {
        if let Some(len) = self.buffers.first().map(Vec::len).filter(|&l| l > 0) {
            self.position = (self.position + num_frames) % len;
        }
    }

    /// Silence again. Realtime-safe.
    pub(crate) fn reset(&mut self) {
        for buffer in &mut self.buffers {
            buffer.fill(0.0);
        }
        self.position = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_come_out_delayed_across_calls() {
        let mut delay = PlanarDelay::new(2, 3);
        let mut out = Vec::new();
        for block in [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]] {
            let mut left = block;
            let mut right = block.map(|x| -x);
            delay.process(0, &mut left);
            delay.process(1, &mut right);
            delay.advance(2);
            out.push((left, right));
        }
        assert_eq!(
            out,
            [
                ([0.0, 0.0], [0.0, 0.0]),
                ([0.0, 1.0], [0.0, -1.0]),
                ([2.0, 3.0], [-2.0, -3.0])
            ]
        );
        let mut none = PlanarDelay::new(1, 0);
        let mut samples = [7.0];
        none.process(0, &mut samples);
        assert_eq!(samples, [7.0]);
    }
}
