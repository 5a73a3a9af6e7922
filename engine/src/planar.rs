//! [`PlanarBlock`]: audio for several channels, channel after channel, in one allocation.

/// Audio for several channels, stored channel after channel (planar) in one allocation.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanarBlock {
    num_channels: usize,
    num_frames: usize,
    samples: Vec<f32>,
}

impl PlanarBlock {
    /// A silent block. Not realtime-safe: allocates.
    pub fn new(num_channels: usize, num_frames: usize) -> Self {
        Self {
            num_channels,
            num_frames,
            samples: vec![0.0; num_channels * num_frames],
        }
    }

    /// Number of channels. Realtime-safe.
    pub fn num_channels(&self) -> usize {
        self.num_channels
    }

    /// Number of frames per channel. Realtime-safe.
    pub fn num_frames(&self) -> usize {
        self.num_frames
    }

    /// One channel's samples. Realtime-safe.
    pub fn channel(&self, channel: usize) -> &[f32] {
        &self.samples[channel * self.num_frames..(channel + 1) * self.num_frames]
    }

    /// One channel's samples, mutable. Realtime-safe.
    pub fn channel_mut(&mut self, channel: usize) -> &mut [f32] {
        &mut self.samples[channel * self.num_frames..(channel + 1) * self.num_frames]
    }

    /// The first two channels (left and right of a stereo block), mutable together.
    /// Realtime-safe.
    ///
    /// # Panics
    /// If the block has fewer than two channels.
    pub fn stereo_mut(&mut self) -> [&mut [f32]; 2] {
        assert!(self.num_channels >= 2, "a stereo block has two channels");
        let (left, rest) = self.samples.split_at_mut(self.num_frames);
        [left, &mut rest[..self.num_frames]]
    }

    /// Sets every sample to zero. Realtime-safe.
    pub fn clear(&mut self) {
        self.samples.fill(0.0);
    }
}
