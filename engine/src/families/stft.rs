//! `torch.stft` / `torch.istft` as the model families' reference code calls them: `center=True`
//! with reflect padding, a periodic Hann window of `n_fft` samples, one-sided, unnormalised.
//! Computed in `f64`; spectra are laid out bin-major (`[bin][frame]`), as the models want them.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

/// A complex spectrum value.
pub type Complex64 = Complex<f64>;

/// A short-time Fourier transform of fixed size. Not realtime-safe to create (plans FFTs);
/// [`Stft::forward`] and [`Stft::inverse`] do not allocate.
pub struct Stft {
    n_fft: usize,
    hop_frames: usize,
    window: Vec<f64>,
    forward: Arc<dyn RealToComplex<f64>>,
    inverse: Arc<dyn ComplexToReal<f64>>,
    time: Vec<f64>,
    bins: Vec<Complex64>,
    scratch: Vec<Complex64>,
}

/// `torch.hann_window(n, periodic=True)`.
pub fn periodic_hann(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect()
}

impl Stft {
    /// Plans the transforms. Not realtime-safe: allocates.
    pub fn new(n_fft: usize, hop_frames: usize) -> Self {
        let mut planner = RealFftPlanner::<f64>::new();
        let forward = planner.plan_fft_forward(n_fft);
        let inverse = planner.plan_fft_inverse(n_fft);
        let scratch_len = forward.get_scratch_len().max(inverse.get_scratch_len());
        Self {
            n_fft,
            hop_frames,
            window: periodic_hann(n_fft),
            forward,
            inverse,
            time: vec![0.0; n_fft],
            bins: vec![Complex64::default(); n_fft / 2 + 1],
            scratch: vec![Complex64::default(); scratch_len],
        }
    }

    /// Number of frequency bins, `n_fft / 2 + 1`.
    pub fn num_bins(&self) -> usize {
        self.n_fft / 2 + 1
    }

    /// Number of frames for a signal of `len` samples (`center=True`).
    pub fn num_frames(&self, len: usize) -> usize {
        1 + len / self.hop_frames
    }

    /// The squared window at `index` (< `n_fft`). Realtime-safe.
    pub fn window_squared(&self, index: usize) -> f64 {
        self.window[index] * self.window[index]
    }

    /// The spectrum (`num_bins` values) of one frame whose `n_fft` samples are `sample(j)`,
    /// windowed and transformed. Realtime-safe.
    pub fn analyse_frame(&mut self, sample: impl Fn(usize) -> f64) -> &[Complex64] {
        for (j, value) in self.time.iter_mut().enumerate() {
            *value = sample(j) * self.window[j];
        }
        self.forward
            .process_with_scratch(&mut self.time, &mut self.bins, &mut self.scratch)
            .expect("FFT sizes are fixed at construction");
        &self.bins
    }

    /// One frame's windowed inverse (`window · irfft(bins)`, `n_fft` samples) of the spectrum
    /// whose bins are `bin(b)`. As `irfft` does, the imaginary parts of the DC and Nyquist bins
    /// are ignored. Realtime-safe.
    pub fn synthesise_frame(&mut self, bin: impl Fn(usize) -> Complex64) -> &[f64] {
        self.unscaled_inverse_frame(bin);
        let scale = 1.0 / self.n_fft as f64;
        for (value, &window) in self.time.iter_mut().zip(&self.window) {
            *value *= scale * window;
        }
        &self.time
    }

    /// Adds one frame's windowed inverse (`window · irfft(bins)`, `n_fft` samples) of the spectrum
    /// whose bins are `bin(b)` to `out`: the overlap-add of a caller that normalises the sum
    /// itself (Spleeter's segments). As `irfft` does, the imaginary parts of the DC and Nyquist
    /// bins are ignored. Realtime-safe.
    pub fn overlap_add_frame(&mut self, bin: impl Fn(usize) -> Complex64, out: &mut [f64]) {
        self.unscaled_inverse_frame(bin);
        let scale = 1.0 / self.n_fft as f64;
        for ((out, &t), &w) in out.iter_mut().zip(&self.time).zip(&self.window) {
            *out += t * scale * w;
        }
    }

    /// The plain inverse FFT (`n_fft` samples, neither windowed nor divided by `n_fft`) of the
    /// spectrum whose bins are `bin(b)`, into `time`.
    fn unscaled_inverse_frame(&mut self, bin: impl Fn(usize) -> Complex64) {
        let num_bins = self.num_bins();
        for (index, value) in self.bins.iter_mut().enumerate() {
            *value = bin(index);
        }
        self.bins[0].im = 0.0;
        self.bins[num_bins - 1].im = 0.0;
        self.inverse
            .process_with_scratch(&mut self.bins, &mut self.time, &mut self.scratch)
            .expect("FFT sizes are fixed at construction");
    }

    /// The spectrum of `signal` into `out[bin * num_frames + frame]`. `signal` must be longer than
    /// `n_fft / 2` (reflect padding). Realtime-safe.
    pub fn forward(&mut self, signal: &[f32], out: &mut [Complex64]) {
        let half = (self.n_fft / 2) as isize;
        let len = signal.len() as isize;
        let num_frames = self.num_frames(signal.len());
        debug_assert!(len > half, "signal too short for reflect padding");
        debug_assert_eq!(out.len(), self.num_bins() * num_frames);
        for frame in 0..num_frames {
            let start = (frame * self.hop_frames) as isize - half;
            let bins = self.analyse_frame(|j| {
                let mut index = start + j as isize;
                // Reflect without repeating the edge sample, like `torch.nn.functional.pad`.
                if index < 0 {
                    index = -index;
                }
                if index >= len {
                    index = 2 * (len - 1) - index;
                }
                f64::from(signal[index as usize])
            });
            for (bin, value) in bins.iter().enumerate() {
                out[bin * num_frames + frame] = *value;
            }
        }
    }

    /// The inverse of [`Stft::forward`] (`torch.istft(center=True, length=out.len())`):
    /// windowed overlap-add divided by the summed squared window. `spectrum` holds
    /// `num_bins × num_frames` values bin-major. Realtime-safe.
    pub fn inverse(&mut self, spectrum: &[Complex64], num_frames: usize, out: &mut [f64]) {
        let half = self.n_fft / 2;
        let num_bins = self.num_bins();
        debug_assert_eq!(spectrum.len(), num_bins * num_frames);
        out.fill(0.0);
        // Sum of windowed frames, in padded coordinates shifted by `half`.
        let length = out.len();
        let hop_frames = self.hop_frames;
        for frame in 0..num_frames {
            let windowed = self.synthesise_frame(|bin| spectrum[bin * num_frames + frame]);
            let start = frame * hop_frames;
            for (j, &value) in windowed.iter().enumerate() {
                let padded = start + j;
                if padded < half || padded - half >= length {
                    continue;
                }
                out[padded - half] += value;
            }
        }
        let envelope_at = |position: usize| -> f64 {
            // Σ_frames w²[position − frame·hop] over the frames that cover `position` (padded).
            let mut sum = 0.0;
            let last = position / self.hop_frames;
            let first = (position + 1)
                .saturating_sub(self.n_fft)
                .div_ceil(self.hop_frames);
            for frame in first..=last.min(num_frames - 1) {
                let j = position - frame * self.hop_frames;
                if j < self.n_fft {
                    sum += self.window[j] * self.window[j];
                }
            }
            sum
        };
        for (i, value) in out.iter_mut().enumerate() {
            let envelope = envelope_at(i + half);
            *value = if envelope > 1e-11 {
                *value / envelope
            } else {
                0.0
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact() {
        let mut stft = Stft::new(64, 16);
        let signal: Vec<f32> = (0..160)
            .map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5)
            .collect();
        let frames = stft.num_frames(signal.len());
        assert_eq!(frames, 11);
        let mut spectrum = vec![Complex64::default(); stft.num_bins() * frames];
        stft.forward(&signal, &mut spectrum);
        let mut back = vec![0.0; signal.len()];
        stft.inverse(&spectrum, frames, &mut back);
        for (a, b) in signal.iter().zip(&back) {
            assert!((*a as f64 - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn a_centred_frame_of_a_sine_peaks_at_its_bin() {
        let n = 256;
        let mut stft = Stft::new(n, 64);
        let signal: Vec<f32> = (0..1024)
            .map(|i| (2.0 * std::f64::consts::PI * 8.0 * i as f64 / n as f64).sin() as f32)
            .collect();
        let frames = stft.num_frames(signal.len());
        let mut spectrum = vec![Complex64::default(); stft.num_bins() * frames];
        stft.forward(&signal, &mut spectrum);
        let frame = 8;
        let peak = (0..stft.num_bins())
            .max_by(|&a, &b| {
                spectrum[a * frames + frame]
                    .norm()
                    .total_cmp(&spectrum[b * frames + frame].norm())
            })
            .unwrap();
        assert_eq!(peak, 8);
        // A unit sine under a periodic Hann window of n samples: |X| = n / 4.
        assert!((spectrum[8 * frames + frame].norm() - n as f64 / 4.0).abs() < 1e-3);
    }
}
