//! [`FileResampler`]: a whole file resampled as it arrives, its delay taken off and its length
//! exact: the references separate at the model's rate, so a file at another rate goes to it
//! first and its stems come back to the file's rate.

use rubato::{FftFixedInOut, Resampler};

use crate::error::EngineError;

/// Input frames per resampler chunk (rounded up to the rates' ratio by the resampler).
const CHUNK_FRAMES: usize = 4096;

/// A fixed-ratio resampler over a whole signal of `num_channels` planar channels.
pub struct FileResampler {
    resampler: FftFixedInOut<f32>,
    /// Input not yet a whole chunk.
    pending: Vec<Vec<f32>>,
    /// Resampled frames not yet taken.
    output: Vec<Vec<f32>>,
    scratch: Vec<Vec<f32>>,
    /// Resampled frames still to drop (the resampler's delay).
    to_skip: usize,
    /// Frames resampled so far, after the delay.
    produced: usize,
}

impl FileResampler {
    /// From `from_hz` to `to_hz`. Not realtime-safe: allocates.
    pub fn new(from_hz: u32, to_hz: u32, num_channels: usize) -> Result<Self, EngineError> {
        let resampler =
            FftFixedInOut::new(from_hz as usize, to_hz as usize, CHUNK_FRAMES, num_channels)
                .map_err(|e| EngineError::Resampler(e.to_string()))?;
        let out_frames = resampler.output_frames_max();
        Ok(Self {
            to_skip: resampler.output_delay(),
            pending: vec![Vec::new(); num_channels],
            output: vec![Vec::new(); num_channels],
            scratch: vec![vec![0.0; out_frames]; num_channels],
            produced: 0,
            resampler,
        })
    }

    /// Appends the next frames (`channels[c]`, all as long) and resamples every whole chunk.
    pub fn push(&mut self, channels: &[&[f32]]) -> Result<(), EngineError> {
        for (pending, samples) in self.pending.iter_mut().zip(channels) {
            pending.extend_from_slice(samples);
        }
        self.run_chunks()
    }

    /// The signal ended: resamples the rest, followed by silence, until `total_frames` frames
    /// at the output rate came out.
    pub fn finish(&mut self, total_frames: usize) -> Result<(), EngineError> {
        while self.produced < total_frames {
            let chunk = self.resampler.input_frames_next();
            for pending in &mut self.pending {
                let whole = pending.len().div_ceil(chunk).max(1) * chunk;
                pending.resize(whole, 0.0);
            }
            self.run_chunks()?;
        }
        let excess = self.produced - total_frames;
        for output in &mut self.output {
            output.truncate(output.len().saturating_sub(excess));
        }
        self.produced = total_frames;
        Ok(())
    }

    /// Frames resampled and not yet taken.
    pub fn num_frames(&self) -> usize {
        self.output[0].len()
    }

    /// One channel's resampled frames not yet taken.
    pub fn channel(&self, channel: usize) -> &[f32] {
        &self.output[channel]
    }

    /// Drops the first `frames` resampled frames.
    pub fn consume(&mut self, frames: usize) {
        for output in &mut self.output {
            output.drain(..frames.min(output.len()));
        }
    }

    fn run_chunks(&mut self) -> Result<(), EngineError> {
        let mut taken = 0;
        loop {
            let chunk = self.resampler.input_frames_next();
            if self.pending[0].len() - taken < chunk {
                break;
            }
            let input: Vec<&[f32]> = self
                .pending
                .iter()
                .map(|p| &p[taken..taken + chunk])
                .collect();
            let (_, written) = self
                .resampler
                .process_into_buffer(&input, &mut self.scratch, None)
                .map_err(|e| EngineError::Resampler(e.to_string()))?;
            taken += chunk;
            let skip = self.to_skip.min(written);
            self.to_skip -= skip;
            let keep = written - skip;
            for (output, scratch) in self.output.iter_mut().zip(&self.scratch) {
                output.extend_from_slice(&scratch[skip..skip + keep]);
            }
            self.produced += keep;
        }
        for pending in &mut self.pending {
            pending.drain(..taken);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sine_comes_back_at_its_time_and_length() {
        let (from, to) = (48_000u32, 44_100u32);
        let n = 48_000 + 123;
        let sine: Vec<f32> = (0..n)
            .map(|t| (2.0 * std::f32::consts::PI * 440.0 * t as f32 / from as f32).sin())
            .collect();
        let mut down = FileResampler::new(from, to, 1).unwrap();
        for block in sine.chunks(1000) {
            down.push(&[block]).unwrap();
        }
        let m = (n as u64 * u64::from(to)).div_ceil(u64::from(from)) as usize;
        down.finish(m).unwrap();
        assert_eq!(down.num_frames(), m);
        // In the middle, the sine at the new rate, not delayed.
        for t in 1000..m - 1000 {
            let expected = (2.0 * std::f32::consts::PI * 440.0 * t as f32 / to as f32).sin();
            assert!((down.channel(0)[t] - expected).abs() < 1e-3, "{t}");
        }
        let mut up = FileResampler::new(to, from, 1).unwrap();
        up.push(&[down.channel(0)]).unwrap();
        up.finish(n).unwrap();
        assert_eq!(up.num_frames(), n);
        for t in 1000..n - 1000 {
            assert!((up.channel(0)[t] - sine[t]).abs() < 2e-3, "{t}");
        }
    }
}
