//! The built-in separator: classic DSP, streaming, no model file.
//!
//! Per STFT frame (2048-point, 50 % overlap, square-root Hann analysis and synthesis, which
//! reconstructs perfectly):
//! 1. Harmonic/percussive separation by median filtering (Fitzgerald, "Harmonic/percussive
//!    separation using median filtering", DAFx 2010) of the mid magnitude spectrogram: the
//!    median across time enhances sustained partials, the median across frequency enhances
//!    broadband hits. Soft Wiener-style masks with power 2 split each bin.
//! 2. Drums = the percussive part.
//! 3. Bass = the harmonic part below a raised-cosine crossover at 140–260 Hz.
//! 4. Vocals = the harmonic part above the bass, inside the voice band, weighted by the
//!    centre-channel similarity `2·Re(L·R*) / (|L|² + |R|²)` (Avendano & Jot), which is 1 for a
//!    source panned dead centre and falls for panned or decorrelated sources.
//! 5. Other = everything left, computed exactly as a residual by [`crate::stream`].
//!
//! The time median looks [`TIME_MEDIAN_LOOKAHEAD_HOPS`] hops ahead, which with the STFT framing
//! gives the separator's latency.

use std::sync::Arc;

use realfft::num_complex::Complex32;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::dsp::{periodic_hann, raised_cosine_step};
use crate::planar::PlanarBlock;
use crate::separator::{stem_channel, Separator, SeparatorError, SeparatorInfo};
use crate::stem::Stem;

/// The built-in separator's display name, everywhere it is shown.
pub const BUILTIN_DISPLAY_NAME: &str = "Built-in (DSP)";
/// The rate the built-in separator runs at; other host rates are resampled.
pub const BUILTIN_SAMPLE_RATE_HZ: u32 = 44_100;
/// STFT frame length in samples.
pub const FFT_SIZE_SAMPLES: usize = 2048;
/// STFT hop in samples (50 % overlap).
pub const HOP_SAMPLES: usize = FFT_SIZE_SAMPLES / 2;
/// Hops the time median looks ahead (and behind): a 9-frame (~210 ms) median.
pub const TIME_MEDIAN_LOOKAHEAD_HOPS: usize = 4;
/// Frames in the time-median window.
const TIME_MEDIAN_FRAMES: usize = 2 * TIME_MEDIAN_LOOKAHEAD_HOPS + 1;
/// Bins in the frequency-median window (~370 Hz).
const FREQ_MEDIAN_BINS: usize = 17;
const NUM_BINS: usize = FFT_SIZE_SAMPLES / 2 + 1;
/// The stems the built-in separator computes (the first stems of [`crate::Stem::ALL`]); the
/// rest of the mix is `Other`, and it has no guitar or piano.
pub const BUILTIN_STEMS: [Stem; 3] = [Stem::Vocals, Stem::Drums, Stem::Bass];
/// Output channels the built-in separator computes: [`BUILTIN_STEMS`], stereo.
const BUILTIN_CHANNELS: usize = BUILTIN_STEMS.len() * 2;
/// Output of a hop completes the samples that entered `FFT_SIZE - HOP` samples before the
/// newest frame's end, plus the time median's look-ahead.
const LATENCY_FRAMES: usize =
    FFT_SIZE_SAMPLES - HOP_SAMPLES + TIME_MEDIAN_LOOKAHEAD_HOPS * HOP_SAMPLES;

/// The bass crossover: fully bass below the first, none above the second frequency.
const BASS_CROSSOVER_HZ: (f32, f32) = (140.0, 260.0);
/// The voice band's lower edge ramp.
const VOICE_LOW_EDGE_HZ: (f32, f32) = (120.0, 220.0);
/// The voice band's upper edge ramp (falling).
const VOICE_HIGH_EDGE_HZ: (f32, f32) = (9_000.0, 6_000.0);
/// Centre similarity ramp: sources with similarity below the first value are not vocals.
const CENTRE_SIMILARITY_RAMP: (f32, f32) = (0.70, 0.95);
/// Keeps the masks defined in silence.
const MASK_EPSILON: f32 = 1e-12;

/// The built-in DSP separator. See the module docs for the method.
pub struct BuiltinSeparator {
    forward_fft: Arc<dyn RealToComplex<f32>>,
    inverse_fft: Arc<dyn ComplexToReal<f32>>,
    /// Square-root periodic Hann, used for analysis and synthesis.
    window: Vec<f32>,
    /// The last `FFT_SIZE_SAMPLES` input samples per channel, oldest first.
    input_history: [Vec<f32>; 2],
    /// Spectra of the last `TIME_MEDIAN_FRAMES` frames, `[frame][channel][bin]` flattened.
    spectra: Vec<Complex32>,
    /// Mid magnitudes `(|L| + |R|) / 2` of the same frames, `[frame][bin]` flattened.
    magnitudes: Vec<f32>,
    /// Ring index of the newest frame in `spectra` and `magnitudes`.
    newest_frame: usize,
    /// Per-bin weight of the bass band.
    bass_weights: Vec<f32>,
    /// Per-bin weight of the voice band (excluding the bass band).
    voice_weights: Vec<f32>,
    /// Overlap-add accumulators, one per separated stem channel.
    overlap: Vec<Vec<f32>>,
    time_scratch: Vec<f32>,
    spectrum_scratch: Vec<Complex32>,
    /// The centre frame's masks per bin, vocals, drums and bass: the same for both channels,
    /// so computed once per frame.
    masks: [Vec<f32>; 3],
    forward_scratch: Vec<Complex32>,
    inverse_scratch: Vec<Complex32>,
    harmonic: Vec<f32>,
    percussive: Vec<f32>,
    /// Its name, rate, hop and latency (the constants above); [`BUILTIN_STEMS`] delivered.
    info: SeparatorInfo,
}

impl BuiltinSeparator {
    /// Creates the separator. Not realtime-safe: allocates.
    pub fn new() -> Self {
        let mut planner = RealFftPlanner::<f32>::new();
        let forward_fft = planner.plan_fft_forward(FFT_SIZE_SAMPLES);
        let inverse_fft = planner.plan_fft_inverse(FFT_SIZE_SAMPLES);
        let forward_scratch = forward_fft.make_scratch_vec();
        let inverse_scratch = inverse_fft.make_scratch_vec();

        let bin_hz = BUILTIN_SAMPLE_RATE_HZ as f32 / FFT_SIZE_SAMPLES as f32;
        let bass_weights: Vec<f32> = (0..NUM_BINS)
            .map(|k| {
                raised_cosine_step(k as f32 * bin_hz, BASS_CROSSOVER_HZ.1, BASS_CROSSOVER_HZ.0)
            })
            .collect();
        let voice_weights = (0..NUM_BINS)
            .map(|k| {
                let freq_hz = k as f32 * bin_hz;
                (1.0 - bass_weights[k])
                    * raised_cosine_step(freq_hz, VOICE_LOW_EDGE_HZ.0, VOICE_LOW_EDGE_HZ.1)
                    * raised_cosine_step(freq_hz, VOICE_HIGH_EDGE_HZ.0, VOICE_HIGH_EDGE_HZ.1)
            })
            .collect();

        Self {
            forward_fft,
            inverse_fft,
            window: periodic_hann(FFT_SIZE_SAMPLES, 0.5),
            input_history: [vec![0.0; FFT_SIZE_SAMPLES], vec![0.0; FFT_SIZE_SAMPLES]],
            spectra: vec![Complex32::default(); TIME_MEDIAN_FRAMES * 2 * NUM_BINS],
            magnitudes: vec![0.0; TIME_MEDIAN_FRAMES * NUM_BINS],
            newest_frame: 0,
            bass_weights,
            voice_weights,
            overlap: vec![vec![0.0; FFT_SIZE_SAMPLES]; BUILTIN_CHANNELS],
            time_scratch: vec![0.0; FFT_SIZE_SAMPLES],
            spectrum_scratch: vec![Complex32::default(); NUM_BINS],
            masks: std::array::from_fn(|_| vec![0.0; NUM_BINS]),
            forward_scratch,
            inverse_scratch,
            harmonic: vec![0.0; NUM_BINS],
            percussive: vec![0.0; NUM_BINS],
            info: SeparatorInfo::new(
                BUILTIN_DISPLAY_NAME,
                BUILTIN_SAMPLE_RATE_HZ,
                HOP_SAMPLES,
                LATENCY_FRAMES,
            ),
        }
    }

    fn spectrum_range(frame: usize, channel: usize) -> std::ops::Range<usize> {
        let start = (frame * 2 + channel) * NUM_BINS;
        start..start + NUM_BINS
    }

    /// Analyses the newest input frame into the history rings.
    fn analyse_newest_frame(&mut self) {
        self.newest_frame = (self.newest_frame + 1) % TIME_MEDIAN_FRAMES;
        let frame = self.newest_frame;
        for channel in 0..2 {
            for ((scratch, sample), window) in self
                .time_scratch
                .iter_mut()
                .zip(&self.input_history[channel])
                .zip(&self.window)
            {
                *scratch = sample * window;
            }
            let range = Self::spectrum_range(frame, channel);
            // Lengths are fixed at construction, so this cannot fail.
            let _ = self.forward_fft.process_with_scratch(
                &mut self.time_scratch,
                &mut self.spectra[range],
                &mut self.forward_scratch,
            );
        }
        let left = Self::spectrum_range(frame, 0);
        let right = Self::spectrum_range(frame, 1);
        let magnitudes = &mut self.magnitudes[frame * NUM_BINS..(frame + 1) * NUM_BINS];
        // `sqrt(re² + im²)`, not `hypot`: a bin of audio is at most the FFT size, far from
        // overflow, and hypot's care costs a fifth of the separator's time.
        for (k, magnitude) in magnitudes.iter_mut().enumerate() {
            *magnitude = 0.5
                * (self.spectra[left.start + k].norm_sqr().sqrt()
                    + self.spectra[right.start + k].norm_sqr().sqrt());
        }
    }

    /// Computes the harmonic (time median) and percussive (frequency median) enhanced
    /// spectrograms of the centre frame.
    fn median_filter(&mut self, centre_frame: usize) {
        let mut window = [0.0f32; TIME_MEDIAN_FRAMES];
        for k in 0..NUM_BINS {
            for (frame, value) in window.iter_mut().enumerate() {
                *value = self.magnitudes[frame * NUM_BINS + k];
            }
            self.harmonic[k] = median_of_9(window);
        }
        let centre = &self.magnitudes[centre_frame * NUM_BINS..(centre_frame + 1) * NUM_BINS];
        sliding_median::<FREQ_MEDIAN_BINS>(centre, &mut self.percussive);
    }

    /// Masks the centre frame into the stems and overlap-adds the results.
    fn synthesise(&mut self, centre_frame: usize) {
        let left = Self::spectrum_range(centre_frame, 0);
        let right = Self::spectrum_range(centre_frame, 1);
        let norm = 1.0 / FFT_SIZE_SAMPLES as f32;
        // Masks per bin for vocals, drums, bass (channel-independent).
        let [vocals_mask, drums_mask, bass_mask] = &mut self.masks;
        for k in 0..NUM_BINS {
            let l = self.spectra[left.start + k];
            let r = self.spectra[right.start + k];
            let h2 = self.harmonic[k] * self.harmonic[k];
            let p2 = self.percussive[k] * self.percussive[k];
            let percussive_mask = p2 / (h2 + p2 + MASK_EPSILON);
            let harmonic_mask = 1.0 - percussive_mask;
            drums_mask[k] = percussive_mask;
            bass_mask[k] = harmonic_mask * self.bass_weights[k];
            let similarity =
                2.0 * (l.re * r.re + l.im * r.im) / (l.norm_sqr() + r.norm_sqr() + MASK_EPSILON);
            vocals_mask[k] = harmonic_mask
                * self.voice_weights[k]
                * raised_cosine_step(
                    similarity,
                    CENTRE_SIMILARITY_RAMP.0,
                    CENTRE_SIMILARITY_RAMP.1,
                );
        }
        for (stem, mask) in BUILTIN_STEMS.into_iter().zip(0..3) {
            for channel in 0..2 {
                let source = if channel == 0 { &left } else { &right };
                for k in 0..NUM_BINS {
                    self.spectrum_scratch[k] = self.spectra[source.start + k] * self.masks[mask][k];
                }
                // A real signal's DC and Nyquist bins are real; keep them exactly so.
                self.spectrum_scratch[0].im = 0.0;
                self.spectrum_scratch[NUM_BINS - 1].im = 0.0;
                let _ = self.inverse_fft.process_with_scratch(
                    &mut self.spectrum_scratch,
                    &mut self.time_scratch,
                    &mut self.inverse_scratch,
                );
                let accumulator = &mut self.overlap[stem_channel(stem.index(), channel)];
                for ((acc, sample), window) in accumulator
                    .iter_mut()
                    .zip(&self.time_scratch)
                    .zip(&self.window)
                {
                    *acc += sample * window * norm;
                }
            }
        }
    }
}

impl Default for BuiltinSeparator {
    fn default() -> Self {
        Self::new()
    }
}

impl Separator for BuiltinSeparator {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn reset(&mut self) {
        for channel in &mut self.input_history {
            channel.fill(0.0);
        }
        self.spectra.fill(Complex32::default());
        self.magnitudes.fill(0.0);
        self.newest_frame = 0;
        for accumulator in &mut self.overlap {
            accumulator.fill(0.0);
        }
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        debug_assert_eq!(input.num_frames(), HOP_SAMPLES);
        debug_assert_eq!(stems.num_frames(), HOP_SAMPLES);
        for channel in 0..2 {
            let history = &mut self.input_history[channel];
            history.copy_within(HOP_SAMPLES.., 0);
            history[FFT_SIZE_SAMPLES - HOP_SAMPLES..].copy_from_slice(input.channel(channel));
        }
        self.analyse_newest_frame();
        let centre_frame = (self.newest_frame + TIME_MEDIAN_FRAMES - TIME_MEDIAN_LOOKAHEAD_HOPS)
            % TIME_MEDIAN_FRAMES;
        self.median_filter(centre_frame);
        self.synthesise(centre_frame);

        for (index, accumulator) in self.overlap.iter_mut().enumerate() {
            stems
                .channel_mut(index)
                .copy_from_slice(&accumulator[..HOP_SAMPLES]);
            accumulator.copy_within(HOP_SAMPLES.., 0);
            accumulator[FFT_SIZE_SAMPLES - HOP_SAMPLES..].fill(0.0);
        }
        // No guitar or piano: those stems stay silent.
        for index in BUILTIN_CHANNELS..stems.num_channels() {
            stems.channel_mut(index).fill(0.0);
        }
        Ok(())
    }
}

/// Median of nine values with Paeth's/Devillard's 19-exchange network.
#[inline]
fn median_of_9(mut p: [f32; 9]) -> f32 {
    #[inline(always)]
    fn sort(p: &mut [f32; 9], a: usize, b: usize) {
        let (x, y) = (p[a], p[b]);
        p[a] = x.min(y);
        p[b] = x.max(y);
    }
    sort(&mut p, 1, 2);
    sort(&mut p, 4, 5);
    sort(&mut p, 7, 8);
    sort(&mut p, 0, 1);
    sort(&mut p, 3, 4);
    sort(&mut p, 6, 7);
    sort(&mut p, 1, 2);
    sort(&mut p, 4, 5);
    sort(&mut p, 7, 8);
    sort(&mut p, 0, 3);
    sort(&mut p, 5, 8);
    sort(&mut p, 4, 7);
    sort(&mut p, 3, 6);
    sort(&mut p, 1, 4);
    sort(&mut p, 2, 5);
    sort(&mut p, 4, 7);
    sort(&mut p, 4, 2);
    sort(&mut p, 6, 4);
    sort(&mut p, 4, 2);
    p[4]
}

/// Median over a sliding window of `WIDTH` (odd) values centred on each element, treating values
/// beyond the ends as zero. Keeps the window sorted, so each step costs O(WIDTH).
fn sliding_median<const WIDTH: usize>(values: &[f32], medians: &mut [f32]) {
    let half = WIDTH / 2;
    let value_at = |i: isize| -> f32 {
        if i < 0 || i as usize >= values.len() {
            0.0
        } else {
            values[i as usize]
        }
    };
    let mut sorted = [0.0f32; WIDTH];
    for (slot, offset) in sorted.iter_mut().zip(-(half as isize)..=half as isize) {
        *slot = value_at(offset);
    }
    sorted.sort_unstable_by(f32::total_cmp);
    for (k, median) in medians.iter_mut().enumerate() {
        *median = sorted[half];
        // Slide: drop value k - half, add value k + half + 1.
        let outgoing = value_at(k as isize - half as isize);
        let incoming = value_at(k as isize + half as isize + 1);
        let mut pos = sorted
            .iter()
            .position(|&v| v.to_bits() == outgoing.to_bits())
            .unwrap_or(0);
        // Move the hole to where `incoming` belongs, shifting neighbours.
        while pos > 0 && sorted[pos - 1] > incoming {
            sorted[pos] = sorted[pos - 1];
            pos -= 1;
        }
        while pos + 1 < WIDTH && sorted[pos + 1] < incoming {
            sorted[pos] = sorted[pos + 1];
            pos += 1;
        }
        sorted[pos] = incoming;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::separator::SEPARATED_CHANNELS;
    use stemflow_kit::testing::XorShift64;

    #[test]
    fn median_of_9_matches_sorting() {
        let mut rng = XorShift64::new(0x1234_5678_9abc_def1);
        for _ in 0..10_000 {
            let mut values = [0.0f32; 9];
            for v in &mut values {
                // Coarse values so that ties happen too.
                *v = (rng.next_unit() * 8.0).floor();
            }
            let mut sorted = values;
            sorted.sort_by(f32::total_cmp);
            assert_eq!(median_of_9(values), sorted[4], "{values:?}");
        }
    }

    #[test]
    fn sliding_median_matches_naive() {
        let mut rng = XorShift64::new(42);
        let values: Vec<f32> = (0..300).map(|_| (rng.next_unit() * 10.0).floor()).collect();
        let mut fast = vec![0.0; values.len()];
        sliding_median::<17>(&values, &mut fast);
        for k in 0..values.len() {
            let mut window: Vec<f32> = (k as isize - 8..=k as isize + 8)
                .map(|i| {
                    if i < 0 || i as usize >= values.len() {
                        0.0
                    } else {
                        values[i as usize]
                    }
                })
                .collect();
            window.sort_by(f32::total_cmp);
            assert_eq!(fast[k], window[8], "bin {k}");
        }
    }

    /// Runs the separator over a whole stereo signal hop by hop.
    fn run(separator: &mut BuiltinSeparator, left: &[f32], right: &[f32]) -> Vec<Vec<f32>> {
        let mut input = PlanarBlock::new(2, HOP_SAMPLES);
        let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, HOP_SAMPLES);
        let mut out = vec![Vec::new(); SEPARATED_CHANNELS];
        for (l, r) in left
            .chunks_exact(HOP_SAMPLES)
            .zip(right.chunks_exact(HOP_SAMPLES))
        {
            input.channel_mut(0).copy_from_slice(l);
            input.channel_mut(1).copy_from_slice(r);
            separator.process_hop(&input, &mut stems).unwrap();
            for (c, channel) in out.iter_mut().enumerate() {
                channel.extend_from_slice(stems.channel(c));
            }
        }
        out
    }

    #[test]
    fn stems_never_exceed_the_input_and_respect_latency() {
        // An impulse: nothing may come out before the reported latency.
        let mut separator = BuiltinSeparator::new();
        let len = HOP_SAMPLES * 16;
        let mut left = vec![0.0; len];
        left[100] = 1.0;
        let right = left.clone();
        let out = run(&mut separator, &left, &right);
        let latency = separator.info().latency_frames();
        let sum: Vec<f32> = (0..len)
            .map(|i| (0..SEPARATED_CHANNELS).step_by(2).map(|c| out[c][i]).sum())
            .collect();
        // A frame spreads the impulse over its own span at most.
        assert!(sum[..latency + 101 - FFT_SIZE_SAMPLES]
            .iter()
            .all(|&x| x == 0.0));
        assert!(sum[latency + 100 + FFT_SIZE_SAMPLES..]
            .iter()
            .all(|&x| x == 0.0));
        // With all masks summing to at most one, the separated sum cannot exceed the impulse.
        assert!(sum.iter().all(|x| x.abs() <= 1.0 + 1e-5));
        // No guitar or piano from the built-in separator.
        for stem in [crate::stem::Stem::Guitar, crate::stem::Stem::Piano] {
            for channel in 0..2 {
                let samples = &out[stem_channel(stem.index(), channel)];
                assert!(samples.iter().all(|&x| x == 0.0), "{stem:?} is not silent");
            }
        }
    }

    #[test]
    fn centred_low_tone_goes_to_bass_and_panned_tone_stays_out_of_vocals() {
        let sr = BUILTIN_SAMPLE_RATE_HZ as f32;
        let len = HOP_SAMPLES * 64;
        let tone = |freq: f32, i: usize| (2.0 * std::f32::consts::PI * freq * i as f32 / sr).sin();
        // A steady 80 Hz centred tone: bass.
        let left: Vec<f32> = (0..len).map(|i| 0.5 * tone(80.0, i)).collect();
        let mut separator = BuiltinSeparator::new();
        let out = run(&mut separator, &left, &left);
        let energy = |c: usize| out[c][len / 2..].iter().map(|x| x * x).sum::<f32>();
        let input_energy: f32 = left[len / 2..].iter().map(|x| x * x).sum();
        let bass = energy(stem_channel(Stem::Bass.index(), 0));
        assert!(bass > 0.8 * input_energy, "bass {bass} of {input_energy}");

        // A steady 1 kHz tone panned hard left: neither vocals (not centred) nor drums (steady).
        let left: Vec<f32> = (0..len).map(|i| 0.5 * tone(1000.0, i)).collect();
        let right = vec![0.0; len];
        separator.reset();
        let out = run(&mut separator, &left, &right);
        let energy = |c: usize| out[c][len / 2..].iter().map(|x| x * x).sum::<f32>();
        let input_energy: f32 = left[len / 2..].iter().map(|x| x * x).sum();
        let vocals = energy(stem_channel(Stem::Vocals.index(), 0));
        let drums = energy(stem_channel(Stem::Drums.index(), 0));
        assert!(
            vocals < 0.01 * input_energy,
            "vocals {vocals} of {input_energy}"
        );
        assert!(
            drums < 0.05 * input_energy,
            "drums {drums} of {input_energy}"
        );
        // The same tone centred is vocal-band harmonic: vocals.
        separator.reset();
        let out = run(&mut separator, &left, &left);
        let vocals = out[stem_channel(Stem::Vocals.index(), 0)][len / 2..]
            .iter()
            .map(|x| x * x)
            .sum::<f32>();
        assert!(
            vocals > 0.8 * input_energy,
            "vocals {vocals} of {input_energy}"
        );
    }

    #[test]
    fn reset_makes_runs_repeatable() {
        let mut rng = XorShift64::new(7);
        let len = HOP_SAMPLES * 12;
        let left: Vec<f32> = (0..len).map(|_| rng.next_unit() - 0.5).collect();
        let right: Vec<f32> = (0..len).map(|_| rng.next_unit() - 0.5).collect();
        let mut separator = BuiltinSeparator::new();
        let first = run(&mut separator, &left, &right);
        separator.reset();
        let second = run(&mut separator, &left, &right);
        assert_eq!(first, second);
    }
}
