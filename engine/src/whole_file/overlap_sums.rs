//! [`OverlapSums`]: the weighted sums of a whole file's chunk outputs and their weights, for
//! the padded frames not yet handed out — float32, as the references accumulate.

use crate::families::file_edges::PlannedChunk;

/// Weighted output sums `[output][channel]` and weight sums over padded frames
/// `[base, base + len)`.
#[derive(Debug, Default)]
pub struct OverlapSums {
    sums: Vec<[Vec<f32>; 2]>,
    weights: Vec<f32>,
    base: usize,
}

impl OverlapSums {
    /// Empty sums for `num_outputs` stereo outputs.
    pub fn new(num_outputs: usize) -> Self {
        Self {
            sums: (0..num_outputs).map(|_| [Vec::new(), Vec::new()]).collect(),
            weights: Vec::new(),
            base: 0,
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        for output in &mut self.sums {
            for channel in output.iter_mut() {
                channel.clear();
            }
        }
        self.weights.clear();
        self.base = 0;
    }

    /// Adds a chunk's outputs (`values[(output · 2 + channel) · chunk_frames + frame]`) as
    /// `plan` places and weighs them.
    pub fn add(&mut self, plan: &PlannedChunk, values: &[f32], chunk_frames: usize) {
        debug_assert!(plan.dest >= self.base, "a chunk added to frames handed out");
        let from = plan.dest - self.base;
        let to = from + plan.output_frames;
        if self.weights.len() < to {
            self.weights.resize(to, 0.0);
            for output in &mut self.sums {
                for channel in output.iter_mut() {
                    channel.resize(to, 0.0);
                }
            }
        }
        let window = &plan.window[..plan.output_frames];
        for (output, sums) in self.sums.iter_mut().enumerate() {
            for (channel, sum) in sums.iter_mut().enumerate() {
                let source = &values[(output * 2 + channel) * chunk_frames + plan.output_from..]
                    [..plan.output_frames];
                for ((acc, &y), &w) in sum[from..to].iter_mut().zip(source).zip(window) {
                    *acc += w * y;
                }
            }
        }
        for (acc, &w) in self.weights[from..to].iter_mut().zip(window) {
            *acc += w;
        }
    }

    /// Output `output`, `channel` at padded frame `u` (at least [`OverlapSums::base`]): the
    /// weighted average of the chunks that reached it, 0 where none weighed it (the references
    /// turn that 0/0 into 0 too).
    pub fn value(&self, output: usize, channel: usize, u: usize) -> f64 {
        let i = u - self.base;
        let weight = self.weights.get(i).copied().unwrap_or(0.0);
        if weight > 0.0 {
            f64::from(self.sums[output][channel][i]) / f64::from(weight)
        } else {
            0.0
        }
    }

    /// Drops the frames before padded frame `u`.
    pub fn forget_before(&mut self, u: usize) {
        let drop = u.saturating_sub(self.base);
        if drop == 0 {
            return;
        }
        let held = drop.min(self.weights.len());
        self.weights.drain(..held);
        for output in &mut self.sums {
            for channel in output.iter_mut() {
                channel.drain(..held);
            }
        }
        self.base = u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_chunks_average_by_their_weights() {
        let mut sums = OverlapSums::new(1);
        let plan = |dest, output_from, window: &[f32]| PlannedChunk {
            input_start: 0,
            input_frames: 4,
            fill: crate::families::file_edges::Fill::Zeros,
            output_from,
            output_frames: 2,
            dest,
            window: window.into(),
            file_end: None,
        };
        // Chunks of 4 frames, outputs [channel][frame]; the first uses frames 0–1 at 0, the
        // second frames 2–3 at 1.
        sums.add(
            &plan(0, 0, &[1.0, 1.0]),
            &[1.0, 2.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0],
            4,
        );
        sums.add(
            &plan(1, 2, &[3.0, 1.0]),
            &[0.0, 0.0, 4.0, 8.0, 0.0, 0.0, 0.0, 0.0],
            4,
        );
        assert_eq!(sums.value(0, 0, 0), 1.0);
        assert_eq!(sums.value(0, 0, 1), (2.0 + 3.0 * 4.0) / 4.0);
        assert_eq!(sums.value(0, 0, 2), 8.0);
        assert_eq!(sums.value(0, 1, 1), 5.0 / 4.0);
        assert_eq!(sums.value(0, 0, 3), 0.0);
        sums.forget_before(2);
        assert_eq!((sums.base, sums.value(0, 0, 2)), (2, 8.0));
    }
}
