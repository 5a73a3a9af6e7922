//! A run of stereo input frames: two channels checked once to be as long as each other, so the
//! offline streams that take it need no check of their own.

use crate::error::EngineError;

/// Left and right channels of the same length. Built with [`StereoInput::new`] (which checks
/// the lengths) or from a planar stereo file ([`StereoInput::planar`]).
#[derive(Clone, Copy, Debug)]
pub struct StereoInput<'a> {
    left: &'a [f32],
    right: &'a [f32],
}

impl<'a> StereoInput<'a> {
    /// `left` and `right`, which must be as long as each other (else
    /// [`EngineError::InvalidBlockSize`] with the length of `right`). Realtime-safe.
    pub fn new(left: &'a [f32], right: &'a [f32]) -> Result<Self, EngineError> {
        if left.len() != right.len() {
            return Err(EngineError::InvalidBlockSize(right.len()));
        }
        Ok(Self { left, right })
    }

    /// A planar stereo file, `[channel][frame]` (see [`StereoInput::new`]). Realtime-safe.
    pub fn planar(channels: &'a [Vec<f32>; 2]) -> Result<Self, EngineError> {
        Self::new(&channels[0], &channels[1])
    }

    /// The left channel. Realtime-safe.
    pub fn left(&self) -> &'a [f32] {
        self.left
    }

    /// The right channel. Realtime-safe.
    pub fn right(&self) -> &'a [f32] {
        self.right
    }

    /// Both channels, left first. Realtime-safe.
    pub fn channels(&self) -> [&'a [f32]; 2] {
        [self.left, self.right]
    }

    /// Frames per channel. Realtime-safe.
    pub fn num_frames(&self) -> usize {
        self.left.len()
    }

    /// The input in runs of at most `max_frames` frames (the last may be shorter), in order.
    /// Realtime-safe.
    pub fn chunks(&self, max_frames: usize) -> impl Iterator<Item = StereoInput<'a>> {
        self.left
            .chunks(max_frames)
            .zip(self.right.chunks(max_frames))
            .map(|(left, right)| StereoInput { left, right })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_of_different_lengths_are_refused_with_the_right_channels_length() {
        let left = [0.0f32; 4];
        let right = [0.0f32; 3];
        assert!(matches!(
            StereoInput::new(&left, &right),
            Err(EngineError::InvalidBlockSize(3))
        ));
        assert!(StereoInput::planar(&[vec![0.0; 2], vec![]]).is_err());
    }

    #[test]
    fn chunks_cover_the_input_in_order_with_a_short_last_one() {
        let left: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let right: Vec<f32> = left.iter().map(|x| -x).collect();
        let input = StereoInput::new(&left, &right).unwrap();
        assert_eq!(input.num_frames(), 10);
        let chunks: Vec<_> = input.chunks(4).collect();
        assert_eq!(
            chunks
                .iter()
                .map(StereoInput::num_frames)
                .collect::<Vec<_>>(),
            [4, 4, 2]
        );
        assert_eq!(chunks[1].left(), &left[4..8]);
        assert_eq!(chunks[2].right(), &right[8..]);
        assert_eq!(chunks[0].channels(), [&left[..4], &right[..4]]);
    }
}
