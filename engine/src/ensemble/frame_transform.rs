//! [`FrameTransform`]: one frame of the STFT that MSST's `ensemble.py` and UVR's ensembles take
//! with librosa — 2048 points every 1024 samples, `center=True`, a periodic Hann window, one-sided,
//! unnormalised — and its inverse (`librosa.istft`'s windowed frame, before the overlap-add is
//! divided by the summed squared window).

use std::sync::Arc;

use realfft::num_complex::{Complex32, Complex64};
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

/// The STFT's size (`n_fft=2048` in MSST and UVR).
pub const FRAME_SAMPLES: usize = 2048;
/// The STFT's hop (`hop_length=1024`).
pub const HOP_SAMPLES: usize = 1024;
/// Bins of one frame.
pub const NUM_BINS: usize = FRAME_SAMPLES / 2 + 1;

/// Forward and inverse transforms of one frame. Not realtime-safe to create (plans FFTs);
/// [`FrameTransform::analyse`] and [`FrameTransform::synthesise`] do not allocate.
pub struct FrameTransform {
    /// `scipy.signal.get_window('hann', 2048)`: periodic.
    window: Vec<f64>,
    forward: Arc<dyn RealToComplex<f64>>,
    inverse: Arc<dyn ComplexToReal<f64>>,
    time: Vec<f64>,
    bins: Vec<Complex64>,
    scratch: Vec<Complex64>,
}

impl FrameTransform {
    /// Plans the transforms. Not realtime-safe: allocates.
    pub fn new() -> Self {
        let mut planner = RealFftPlanner::<f64>::new();
        let forward = planner.plan_fft_forward(FRAME_SAMPLES);
        let inverse = planner.plan_fft_inverse(FRAME_SAMPLES);
        let scratch_len = forward.get_scratch_len().max(inverse.get_scratch_len());
        Self {
            window: crate::families::stft::periodic_hann(FRAME_SAMPLES),
            forward,
            inverse,
            time: vec![0.0; FRAME_SAMPLES],
            bins: vec![Complex64::default(); NUM_BINS],
            scratch: vec![Complex64::default(); scratch_len],
        }
    }

    /// The squared window at `index` (< [`FRAME_SAMPLES`]): what `librosa.istft` divides the
    /// overlap-add by, summed over the frames that cover a sample. Realtime-safe.
    pub fn window_squared(&self, index: usize) -> f64 {
        self.window[index] * self.window[index]
    }

    /// The spectrum of one frame of [`FRAME_SAMPLES`] samples: windowed and transformed in
    /// double precision, then rounded to complex64, as librosa stores the STFT of float32
    /// audio. Realtime-safe.
    pub fn analyse(&mut self, frame: &[f32], spectrum: &mut [Complex32]) {
        debug_assert_eq!(frame.len(), FRAME_SAMPLES);
        debug_assert_eq!(spectrum.len(), NUM_BINS);
        for ((time, &sample), &window) in self.time.iter_mut().zip(frame).zip(&self.window) {
            *time = f64::from(sample) * window;
        }
        self.forward
            .process_with_scratch(&mut self.time, &mut self.bins, &mut self.scratch)
            .expect("FFT sizes are fixed at construction");
        for (out, bin) in spectrum.iter_mut().zip(&self.bins) {
            *out = Complex32::new(bin.re as f32, bin.im as f32);
        }
    }

    /// The windowed inverse of one frame's spectrum (`window · irfft(spectrum)`), added into
    /// `frame`'s [`FRAME_SAMPLES`] samples. As `irfft` does, the imaginary parts of the DC and
    /// Nyquist bins are ignored. Realtime-safe.
    pub fn synthesise(&mut self, spectrum: &[Complex64], out: &mut [f64]) {
        debug_assert_eq!(spectrum.len(), NUM_BINS);
        debug_assert_eq!(out.len(), FRAME_SAMPLES);
        self.bins.copy_from_slice(spectrum);
        self.bins[0].im = 0.0;
        self.bins[NUM_BINS - 1].im = 0.0;
        self.inverse
            .process_with_scratch(&mut self.bins, &mut self.time, &mut self.scratch)
            .expect("FFT sizes are fixed at construction");
        let scale = 1.0 / FRAME_SAMPLES as f64;
        for ((out, &time), &window) in out.iter_mut().zip(&self.time).zip(&self.window) {
            *out = time * scale * window;
        }
    }
}

impl Default for FrameTransform {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_comes_back_windowed_twice() {
        let mut transform = FrameTransform::new();
        let frame: Vec<f32> = (0..FRAME_SAMPLES)
            .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5)
            .collect();
        let mut spectrum = vec![Complex32::default(); NUM_BINS];
        transform.analyse(&frame, &mut spectrum);
        let wide: Vec<Complex64> = spectrum
            .iter()
            .map(|b| Complex64::new(f64::from(b.re), f64::from(b.im)))
            .collect();
        let mut back = vec![0.0; FRAME_SAMPLES];
        transform.synthesise(&wide, &mut back);
        for (i, (&x, &y)) in frame.iter().zip(&back).enumerate() {
            let expected = f64::from(x) * transform.window_squared(i);
            assert!((expected - y).abs() < 1e-5, "{i}: {expected} vs {y}");
        }
    }
}
