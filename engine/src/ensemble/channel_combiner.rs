//! [`ChannelCombiner`]: the members' versions of one channel of one stem, combined as they
//! stream in. Sample algorithms combine sample by sample, with no delay; spectral ones take the
//! STFT of each member frame by frame (librosa's frames: 2048 samples centred every 1024 from
//! the first sample on), combine the bins, and overlap-add the inverse, divided by the summed
//! squared window as `librosa.istft` does — [`SPECTRAL_DELAY_SAMPLES`] late, the time a sample
//! takes to be covered by both of its frames.
//!
//! Before the first sample, the frames see silence, as librosa pads (`pad_mode="constant"`, the
//! default since librosa 0.9, which MSST and UVR run). A stream never ends: the frames after the
//! last sample see whatever follows. A whole file ends: [`ChannelCombiner::finish`] pads its end
//! with silence, stops at librosa's last frame and divides by the window sum of the frames that
//! exist, so pushing a whole file and finishing gives MSST's (and UVR's) result.

use realfft::num_complex::{Complex32, Complex64};

use super::method::{EnsembleAlgorithm, Reduction};
use super::reduce::{reduce_bins, reduce_samples};
use crate::families::stft::Stft;

/// The STFT's size (`n_fft=2048` in MSST and UVR).
const FRAME_SAMPLES: usize = 2048;
/// The STFT's hop (`hop_length=1024`).
const HOP_SAMPLES: usize = 1024;
/// Bins of one frame.
const NUM_BINS: usize = FRAME_SAMPLES / 2 + 1;

/// How much later than its input a spectral combination's output comes.
pub const SPECTRAL_DELAY_SAMPLES: usize = FRAME_SAMPLES;
/// Room of the sample rings: the frame in the making and what the overlap-add still holds.
const RING_SAMPLES: usize = 4 * HOP_SAMPLES;
const RING_MASK: u64 = RING_SAMPLES as u64 - 1;

/// How much later than its input `algorithm`'s combination comes out. Realtime-safe.
pub const fn delay_samples_of(algorithm: EnsembleAlgorithm) -> usize {
    if algorithm.is_spectral() {
        SPECTRAL_DELAY_SAMPLES
    } else {
        0
    }
}

/// One channel of one stem, combined from its members as it streams.
pub enum ChannelCombiner {
    /// Sample by sample.
    Samples(SampleCombiner),
    /// Frame by frame of the STFT.
    Spectral(Box<SpectralCombiner>),
}

impl ChannelCombiner {
    /// A combiner of `weights.len()` members by `algorithm`. Not realtime-safe: allocates.
    pub fn new(algorithm: EnsembleAlgorithm, weights: &[f64]) -> Self {
        if algorithm.is_spectral() {
            ChannelCombiner::Spectral(Box::new(SpectralCombiner::new(algorithm, weights)))
        } else {
            ChannelCombiner::Samples(SampleCombiner::new(algorithm.reduction(), weights))
        }
    }

    /// How many samples later than the input the output comes. Realtime-safe.
    pub fn delay_samples(&self) -> usize {
        match self {
            ChannelCombiner::Samples(_) => 0,
            ChannelCombiner::Spectral(_) => SPECTRAL_DELAY_SAMPLES,
        }
    }

    /// Takes the next `out.len()` samples of every member (`member(i)`, at least that long) and
    /// writes as many combined samples, [`ChannelCombiner::delay_samples`] late (silence before
    /// the first). Realtime-safe.
    pub fn process<'a>(&mut self, member: impl Fn(usize) -> &'a [f32], out: &mut [f32]) {
        match self {
            ChannelCombiner::Samples(combiner) => combiner.process(member, out),
            ChannelCombiner::Spectral(combiner) => combiner.process(member, out),
        }
    }

    /// Ends a whole file after the samples pushed so far: appends to `out` the combined samples
    /// still delayed, computed as librosa computes the file's last frames. The combiner then
    /// starts over. Not realtime-safe: grows `out`.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        match self {
            ChannelCombiner::Samples(_) => {}
            ChannelCombiner::Spectral(combiner) => combiner.finish(out),
        }
    }

    /// Forgets everything, as if new. Realtime-safe.
    pub fn reset(&mut self) {
        match self {
            ChannelCombiner::Samples(_) => {}
            ChannelCombiner::Spectral(combiner) => combiner.reset(),
        }
    }
}

/// Sample by sample ([`EnsembleAlgorithm`]s `*_wave`).
pub struct SampleCombiner {
    reduction: Reduction,
    weights: Vec<f64>,
    values: Vec<f32>,
    scratch: Vec<f32>,
}

impl SampleCombiner {
    fn new(reduction: Reduction, weights: &[f64]) -> Self {
        Self {
            reduction,
            weights: weights.to_vec(),
            values: vec![0.0; weights.len()],
            scratch: vec![0.0; weights.len()],
        }
    }

    fn process<'a>(&mut self, member: impl Fn(usize) -> &'a [f32], out: &mut [f32]) {
        for (t, out) in out.iter_mut().enumerate() {
            for (index, value) in self.values.iter_mut().enumerate() {
                *value = member(index)[t];
            }
            *out = reduce_samples(
                self.reduction,
                &self.values,
                &self.weights,
                &mut self.scratch,
            );
        }
    }
}

/// Frame by frame of the STFT ([`EnsembleAlgorithm`]s `*_fft`, `*_spec`). Time `t` below counts
/// input samples since the start (or the last reset); frame `k` covers `[1024·k − 1024,
/// 1024·k + 1024)`.
pub struct SpectralCombiner {
    reduction: Reduction,
    weights: Vec<f64>,
    /// librosa's STFT of 2048 points every 1024 (periodic Hann, one-sided, unnormalised), one
    /// frame at a time.
    stft: Stft,
    /// Each member's last [`RING_SAMPLES`] input samples, member after member, `t` at
    /// `t & RING_MASK`.
    history: Vec<f32>,
    /// The overlap-add of the frames computed, `t` at `t & RING_MASK`, cleared once output.
    overlap_add: Vec<f64>,
    /// Input samples taken (the time of the next one).
    received: u64,
    /// The next frame to compute.
    next_frame: u64,
    /// One member's frame, its spectrum per member, a bin's values, the combined spectrum.
    frame: Vec<f32>,
    spectra: Vec<Complex32>,
    bin_values: Vec<Complex32>,
    bin_scratch: Vec<Complex32>,
    combined: Vec<Complex64>,
}

impl SpectralCombiner {
    fn new(algorithm: EnsembleAlgorithm, weights: &[f64]) -> Self {
        let num_members = weights.len();
        Self {
            reduction: algorithm.reduction(),
            weights: weights.to_vec(),
            stft: Stft::new(FRAME_SAMPLES, HOP_SAMPLES),
            history: vec![0.0; num_members * RING_SAMPLES],
            overlap_add: vec![0.0; RING_SAMPLES],
            received: 0,
            next_frame: 0,
            frame: vec![0.0; FRAME_SAMPLES],
            spectra: vec![Complex32::default(); num_members * NUM_BINS],
            bin_values: vec![Complex32::default(); num_members],
            bin_scratch: vec![Complex32::default(); num_members],
            combined: vec![Complex64::default(); NUM_BINS],
        }
    }

    fn num_members(&self) -> usize {
        self.weights.len()
    }

    fn reset(&mut self) {
        self.history.fill(0.0);
        self.overlap_add.fill(0.0);
        self.received = 0;
        self.next_frame = 0;
    }

    /// How many input samples frame `k` waits for: up to its last.
    fn needed(frame: u64) -> u64 {
        (frame + 1) * HOP_SAMPLES as u64
    }

    fn process<'a>(&mut self, member: impl Fn(usize) -> &'a [f32], out: &mut [f32]) {
        let mut done = 0;
        while done < out.len() {
            let until_frame = (Self::needed(self.next_frame) - self.received) as usize;
            let step = until_frame.min(out.len() - done);
            for index in 0..self.num_members() {
                let input = &member(index)[done..done + step];
                let ring = &mut self.history[index * RING_SAMPLES..(index + 1) * RING_SAMPLES];
                for (offset, &sample) in input.iter().enumerate() {
                    ring[((self.received + offset as u64) & RING_MASK) as usize] = sample;
                }
            }
            self.received += step as u64;
            while self.received >= Self::needed(self.next_frame) {
                self.compute_frame(self.next_frame, None);
                self.next_frame += 1;
            }
            let first_output = self.received - step as u64;
            for (offset, out) in out[done..done + step].iter_mut().enumerate() {
                *out = self.take_output(first_output + offset as u64, None);
            }
            done += step;
        }
    }

    fn finish(&mut self, out: &mut Vec<f32>) {
        let length = self.received;
        if length > 0 {
            let last_frame = length / HOP_SAMPLES as u64;
            while self.next_frame <= last_frame {
                self.compute_frame(self.next_frame, Some(length));
                self.next_frame += 1;
            }
            let owed_from = length.saturating_sub(SPECTRAL_DELAY_SAMPLES as u64);
            for t in owed_from..length {
                out.push(self.take_output(t + SPECTRAL_DELAY_SAMPLES as u64, Some(last_frame)));
            }
        }
        self.reset();
    }

    /// The input sample of `member` at time `t`: silence before the start and after `end` (a
    /// finished file's length).
    fn input_at(&self, member: usize, t: i64, end: Option<u64>) -> f32 {
        if t < 0 || end.is_some_and(|end| t as u64 >= end) {
            return 0.0;
        }
        self.history[member * RING_SAMPLES + (t as u64 & RING_MASK) as usize]
    }

    /// Computes frame `k` and adds its inverse into the overlap-add.
    fn compute_frame(&mut self, frame: u64, end: Option<u64>) {
        let start = frame as i64 * HOP_SAMPLES as i64 - HOP_SAMPLES as i64;
        for member in 0..self.num_members() {
            for j in 0..FRAME_SAMPLES {
                self.frame[j] = self.input_at(member, start + j as i64, end);
            }
            let frame = &self.frame;
            let bins = self.stft.analyse_frame(|j| f64::from(frame[j]));
            // librosa stores the STFT of float32 audio as complex64.
            let spectrum = &mut self.spectra[member * NUM_BINS..(member + 1) * NUM_BINS];
            for (out, bin) in spectrum.iter_mut().zip(bins) {
                *out = Complex32::new(bin.re as f32, bin.im as f32);
            }
        }
        for bin in 0..NUM_BINS {
            for (member, value) in self.bin_values.iter_mut().enumerate() {
                *value = self.spectra[member * NUM_BINS + bin];
            }
            self.combined[bin] = reduce_bins(
                self.reduction,
                &self.bin_values,
                &self.weights,
                &mut self.bin_scratch,
            );
        }
        let combined = &self.combined;
        let inverse = self.stft.synthesise_frame(|bin| combined[bin]);
        let length = end.map_or(i64::MAX, |end| end as i64);
        for (j, &value) in inverse.iter().enumerate() {
            let t = start + j as i64;
            if t >= 0 && t < length {
                self.overlap_add[(t as u64 & RING_MASK) as usize] += value;
            }
        }
    }

    /// Output sample `output` (input time `output − delay`): the overlap-add divided by the
    /// squared windows of the frames that cover it (up to `last_frame` when the file ended),
    /// then cleared for reuse; silence before the start.
    fn take_output(&mut self, output: u64, last_frame: Option<u64>) -> f32 {
        let Some(t) = output.checked_sub(SPECTRAL_DELAY_SAMPLES as u64) else {
            return 0.0;
        };
        let slot = &mut self.overlap_add[(t & RING_MASK) as usize];
        let sum = std::mem::take(slot);
        let hop = HOP_SAMPLES as u64;
        let mut envelope = 0.0;
        for frame in [t / hop, t / hop + 1] {
            if last_frame.is_none_or(|last| frame <= last) {
                envelope += self.stft.window_squared((t + hop - frame * hop) as usize);
            }
        }
        if envelope > f64::from(f32::MIN_POSITIVE) {
            (sum / envelope) as f32
        } else {
            sum as f32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_kit::testing::XorShift64;

    fn noise(seed: u64, len: usize) -> Vec<f32> {
        XorShift64::new(seed).samples(len, 0.5)
    }

    /// Streams `members` through a combiner in blocks of `block` samples, then finishes;
    /// returns the combined file (the output's delay removed).
    fn combine_file(algorithm: EnsembleAlgorithm, members: &[Vec<f32>], block: usize) -> Vec<f32> {
        let len = members[0].len();
        let mut combiner = ChannelCombiner::new(algorithm, &vec![1.0; members.len()]);
        let mut out = Vec::new();
        let mut start = 0;
        while start < len {
            let end = (start + block).min(len);
            let mut chunk = vec![0.0; end - start];
            combiner.process(|m| &members[m][start..end], &mut chunk);
            out.extend_from_slice(&chunk);
            start = end;
        }
        combiner.finish(&mut out);
        out.split_off(combiner.delay_samples().min(len))
    }

    #[test]
    fn block_sizes_do_not_change_a_whole_file() {
        let members = [noise(1, 9000), noise(2, 9000), noise(3, 9000)];
        for algorithm in EnsembleAlgorithm::ALL {
            let whole = combine_file(algorithm, &members, 9000);
            assert_eq!(whole.len(), 9000, "{algorithm}");
            for block in [1, 333, 1024, 4096] {
                assert_eq!(
                    combine_file(algorithm, &members, block),
                    whole,
                    "{algorithm} {block}"
                );
            }
        }
    }

    #[test]
    fn averaging_the_spectra_of_equal_members_gives_the_member_back_to_its_last_sample() {
        for len in [1, 700, 1024, 2049, 5000] {
            let member = noise(4, len);
            for algorithm in [
                EnsembleAlgorithm::AvgFft,
                EnsembleAlgorithm::MaxFft,
                EnsembleAlgorithm::MaxSpec,
            ] {
                let out = combine_file(algorithm, &[member.clone(), member.clone()], 512);
                for (t, (&a, &b)) in member.iter().zip(&out).enumerate() {
                    assert!(
                        (a - b).abs() < 1e-6,
                        "{algorithm} len {len} t {t}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
